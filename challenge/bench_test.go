package challenge

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func BenchmarkIssue(b *testing.B) {
	c, _ := newTest(b, nil)
	now := c.now()
	b.ReportAllocs()
	for b.Loop() {
		c.issue(alice, Spec{Bits: 16, Rule: "browsers"}, now)
	}
}

// BenchmarkVerify is what /.maat/pass spends on a solution: one HMAC, k
// hashes and the binding digest.
func BenchmarkVerify(b *testing.B) {
	c, _ := newTest(b, nil)
	tk, tok := c.issue(alice, Spec{Bits: 16}, c.now())
	nonces := formatNonces(solve(&tk))
	b.ReportAllocs()
	for b.Loop() {
		t, err := parseToken(tok, c.tokenKeys)
		ns, ok := parseNonces(nonces, int(t.k))
		if err != nil || !ok || t.bind != bindHash(c.bind, alice) || !verifyPoW(&t, ns) {
			b.Fatal("verify failed")
		}
	}
}

func BenchmarkCheckCacheHit(b *testing.B) {
	c, _ := newTest(b, nil)
	r := requestWith(earn(b, c, alice, 16))
	if c.Check(r, alice, 16) != PassOK {
		b.Fatal("no pass")
	}
	b.ReportAllocs()
	for b.Loop() {
		if c.Check(r, alice, 16) != PassOK {
			b.Fatal("no pass")
		}
	}
}

func BenchmarkCheckCacheMiss(b *testing.B) {
	c, _ := newTest(b, nil)
	ck := earn(b, c, alice, 16)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.parseCookie(ck.Value); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkChallengePage(b *testing.B) {
	c, _ := newTest(b, nil)
	r := httptest.NewRequest(http.MethodGet, "https://example.org/wiki/", nil)
	r.Header.Set("Accept-Encoding", "gzip")
	b.ReportAllocs()
	for b.Loop() {
		c.Challenge(httptest.NewRecorder(), r, alice, Spec{Bits: 16}, "req")
	}
}

func BenchmarkDenyPage(b *testing.B) {
	c, _ := newTest(b, nil)
	r := httptest.NewRequest(http.MethodGet, "https://example.org/wiki/", nil)
	r.Header.Set("Accept-Encoding", "gzip")
	b.ReportAllocs()
	for b.Loop() {
		c.Deny(httptest.NewRecorder(), r, "req", "bad_ua")
	}
}

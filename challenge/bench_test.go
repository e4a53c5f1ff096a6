package challenge

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func BenchmarkIssue(b *testing.B) {
	c, _ := newTest(b, nil)
	now := c.now()
	b.ReportAllocs()
	for b.Loop() {
		c.issuePoW(alice, Spec{Bits: 16, Rule: "browsers"}, now)
	}
}

// BenchmarkVerify is what /.maat/pass spends on a solution: one HMAC, k
// hashes and the binding digest.
func BenchmarkVerify(b *testing.B) {
	c, _ := newTest(b, nil)
	tk, tok := c.issuePoW(alice, Spec{Bits: 16}, c.now())
	nonces := formatNonces(solve(&tk))
	b.ReportAllocs()
	for b.Loop() {
		t, err := parseToken(tok, c.tokenKeys)
		ns, ok := parseNonces(nonces, int(t.k))
		if err != nil || !ok || !t.bind.boundTo(bindingOf(c.bind, alice)) || !verifyPoW(&t, ns) {
			b.Fatal("verify failed")
		}
	}
}

func BenchmarkCheckCacheHit(b *testing.B) {
	c, _ := newTest(b, nil)
	r := requestWith(earn(b, c, alice, 16))
	if c.Check(r, alice, Need{Bits: 16}) != PassOK {
		b.Fatal("no pass")
	}
	b.ReportAllocs()
	for b.Loop() {
		if c.Check(r, alice, Need{Bits: 16}) != PassOK {
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

// discardResponse is a ResponseWriter that keeps nothing, with a fresh
// header map per response as net/http gives each request.
type discardResponse struct {
	h http.Header
	n int
}

func (d *discardResponse) Header() http.Header { return d.h }
func (d *discardResponse) WriteHeader(int)     {}
func (d *discardResponse) Write(b []byte) (int, error) {
	d.n += len(b)
	return len(b), nil
}

// BenchmarkPageVsFixed compares the challenge and deny pages with the
// DESIGN's yardstick for pages under flood: a trivial handler that serves
// the same bytes, with the same headers (gzipped, as a browser asks). It
// reports each one's time per response and their ratio.
func BenchmarkPageVsFixed(b *testing.B) {
	c, _ := newTest(b, nil)
	for _, page := range []struct {
		name  string
		serve func(w http.ResponseWriter, r *http.Request)
	}{
		{"challenge", func(w http.ResponseWriter, r *http.Request) { c.Challenge(w, r, alice, Spec{Bits: 16}, "req") }},
		{"deny", func(w http.ResponseWriter, r *http.Request) { c.Deny(w, r, "req", "bad_ua") }},
	} {
		b.Run(page.name, func(b *testing.B) {
			r := httptest.NewRequest(http.MethodGet, "https://example.org/wiki/", nil)
			r.Header.Set("Accept-Encoding", "gzip, deflate, br, zstd")
			r.Header.Set("Accept", "text/html")
			r.Header.Set("Sec-Fetch-Mode", "navigate")
			rec := httptest.NewRecorder()
			page.serve(rec, r)
			if rec.Header().Get("Content-Encoding") != "gzip" {
				b.Fatal("page not gzipped")
			}
			body, hdr := rec.Body.Bytes(), rec.Header()
			fixed := func(w http.ResponseWriter, _ *http.Request) {
				h := w.Header()
				for k, vs := range hdr {
					h.Set(k, vs[0])
				}
				w.WriteHeader(http.StatusOK)
				w.Write(body)
			}
			b.ReportAllocs()
			var pageTime, fixedTime time.Duration
			for b.Loop() {
				t0 := time.Now()
				page.serve(&discardResponse{h: make(http.Header)}, r)
				t1 := time.Now()
				fixed(&discardResponse{h: make(http.Header)}, r)
				pageTime += t1.Sub(t0)
				fixedTime += time.Since(t1)
			}
			b.ReportMetric(float64(pageTime.Nanoseconds())/float64(b.N), "page-ns/op")
			b.ReportMetric(float64(fixedTime.Nanoseconds())/float64(b.N), "fixed-ns/op")
			b.ReportMetric(float64(pageTime)/float64(fixedTime), "ratio")
		})
	}
}

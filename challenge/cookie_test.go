package challenge

import (
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	c, clk := newTest(t, func(cfg *Config) { cfg.PolicyVersion = "v1" })
	pow := earn(t, c, alice, 16)
	wait := earnWait(t, c, clk, alice)
	tests := []struct {
		name    string
		cookie  *http.Cookie
		client  Client
		need    Need
		advance time.Duration
		want    Reason
	}{
		{"same client", pow, alice, Need{Bits: 16}, 0, PassOK},
		{"easier rule", pow, alice, Need{Bits: 8}, 0, PassOK},
		{"no proof of work asked", pow, alice, Need{}, 0, PassOK},
		{"harder rule even where a wait would do", pow, alice, Need{Bits: 20, Wait: true}, 0, PassBits},
		{"neighbour in the /24", pow, Client{IP: alice.IP.Prev(), JA4: alice.JA4}, Need{Bits: 16}, 0, PassOK},
		{"same browser over QUIC", pow, aliceQ, Need{Bits: 16}, 0, PassOK},
		{"another stack over QUIC", pow, Client{IP: alice.IP, JA4: aliceQ.JA4, Family: "curl"}, Need{Bits: 16}, 0, PassJA4},
		{"unknown stack over QUIC", pow, Client{IP: alice.IP, JA4: aliceQ.JA4}, Need{Bits: 16}, 0, PassJA4},
		{"no TLS fingerprint now", pow, Client{IP: alice.IP}, Need{Bits: 16}, 0, PassJA4},
		{"difficulty step-up", pow, alice, Need{Bits: 20}, 0, PassBits},
		{"other /24", pow, mallory, Need{Bits: 16}, 0, PassPrefix},
		{"roamed to IPv6", pow, alice6, Need{Bits: 16}, 0, PassPrefix},
		{"other JA4", pow, Client{IP: alice.IP, JA4: "t13d1715h2_5b57614c22b0_3d5424432f57"}, Need{Bits: 16}, 0, PassJA4},
		{"wait where a wait would do", wait, alice, Need{Bits: 12, Wait: true}, 0, PassOK},
		{"wait at the wait's worth", wait, alice, Need{Bits: WaitBits, Wait: true}, 0, PassOK},
		{"wait where a harder rule offers it", wait, alice, Need{Bits: WaitBits + 1, Wait: true}, 0, PassBits},
		{"wait where 28 bits are asked", wait, alice, Need{Bits: 28}, 0, PassWaitOnly},
		{"wait where proof of work is asked", wait, alice, Need{Bits: 12}, 0, PassWaitOnly},
		{"wait where no bits are asked but no wait offered", wait, alice, Need{}, 0, PassWaitOnly},
		{"wait from another /24", wait, mallory, Need{Wait: true}, 0, PassPrefix},
		{"expired", pow, alice, Need{Bits: 16}, DefaultPassTTL, PassExpired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Not parallel: the clock moves in the last case.
			clk.Add(tt.advance)
			if got := c.Check(requestWith(tt.cookie), tt.client, tt.need); got != tt.want {
				t.Errorf("Check = %v, want %v", got, tt.want)
			}
			if got := c.Pass(requestWith(tt.cookie), tt.client, tt.need); got != (tt.want == PassOK) {
				t.Errorf("Pass = %v", got)
			}
		})
	}
}

func TestCheckIPv6Binding(t *testing.T) {
	t.Parallel()
	c, _ := newTest(t, nil)
	ck := earn(t, c, alice6, 8)
	same64 := Client{IP: alice6.IP.Next(), JA4: alice6.JA4}
	other64 := Client{IP: ipFrom(t, "2001:db8:1:3::7"), JA4: alice6.JA4}
	for _, tt := range []struct {
		cl   Client
		want Reason
	}{{alice6, PassOK}, {same64, PassOK}, {other64, PassPrefix}, {alice, PassPrefix}} {
		if got := c.Check(requestWith(ck), tt.cl, Need{Bits: 8}); got != tt.want {
			t.Errorf("%v: Check = %v, want %v", tt.cl.IP, got, tt.want)
		}
	}
}

func TestCheckPolicyVersion(t *testing.T) {
	t.Parallel()
	c1, _ := newTest(t, func(cfg *Config) { cfg.PolicyVersion = "v1" })
	c2, _ := newTest(t, func(cfg *Config) { cfg.PolicyVersion = "v2" })
	ck := earn(t, c1, alice, 8)
	if got := c2.Check(requestWith(ck), alice, Need{Bits: 8}); got != PassPolicy {
		t.Errorf("Check = %v, want %v", got, PassPolicy)
	}
}

func TestCheckBindNone(t *testing.T) {
	t.Parallel()
	c, _ := newTest(t, func(cfg *Config) { cfg.Bind = BindNone })
	ck := earn(t, c, alice, 8)
	if got := c.Check(requestWith(ck), mallory, Need{Bits: 8}); got != PassOK {
		t.Errorf("Check = %v, want ok", got)
	}
}

func TestCheckForged(t *testing.T) {
	t.Parallel()
	edPub, edPriv, _ := ed25519.GenerateKey(rand.Reader)
	hs, clk := newTest(t, nil)
	ed, _ := newTest(t, func(cfg *Config) { cfg.SigningKey = edPriv; cfg.Now = clk.Now })
	now := clk.Now()
	claims := passClaims{
		RegisteredClaims: jwt.RegisteredClaims{IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour))},
		Method:           MethodPoW, Bits: 30, Net: "198.51.100.0/24", JA4: alice.JA4,
	}
	sign := func(m jwt.SigningMethod, key any) string {
		s, err := jwt.NewWithClaims(m, claims).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	noExp := claims
	noExp.ExpiresAt = nil
	noExpTok, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, noExp).SignedString(hs.cookieKey)
	// A cookie from before methods were recorded may have been earned by
	// waiting for a proof of work: it is invalid, its holder challenged
	// once more.
	old := claims
	old.Method = ""
	oldTok, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, old).SignedString(hs.cookieKey)
	waitBits := claims
	waitBits.Method = MethodWait
	waitBitsTok, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, waitBits).SignedString(hs.cookieKey)
	odd := claims
	odd.Method = "sleep"
	oddTok, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, odd).SignedString(hs.cookieKey)
	tests := []struct {
		name  string
		c     *Challenger
		value string
		want  Reason
	}{
		{"genuine HS256", hs, sign(jwt.SigningMethodHS256, hs.cookieKey), PassOK},
		{"genuine EdDSA", ed, sign(jwt.SigningMethodEdDSA, edPriv), PassOK},
		{"alg none", hs, sign(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType), PassInvalid},
		{"HS256 keyed with the public key", ed, sign(jwt.SigningMethodHS256, []byte(edPub)), PassInvalid},
		{"HS256 on an EdDSA challenger", ed, sign(jwt.SigningMethodHS256, ed.cookieKey), PassInvalid},
		{"EdDSA on an HS256 challenger", hs, sign(jwt.SigningMethodEdDSA, edPriv), PassInvalid},
		{"HS512", hs, sign(jwt.SigningMethodHS512, hs.cookieKey), PassInvalid},
		{"wrong key", hs, sign(jwt.SigningMethodHS256, []byte("not the key")), PassInvalid},
		{"no expiry", hs, noExpTok, PassInvalid},
		{"no method (an old cookie)", hs, oldTok, PassInvalid},
		{"a wait with bits", hs, waitBitsTok, PassInvalid},
		{"unknown method", hs, oddTok, PassInvalid},
		{"garbage", hs, "a.b.c", PassInvalid},
		{"empty", hs, "", PassNoCookie},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.Header.Set("Cookie", CookieName+"="+tt.value)
			if got := tt.c.Check(r, alice, Need{Bits: 16}); got != tt.want {
				t.Errorf("Check = %v, want %v", got, tt.want)
			}
		})
	}
	if ed.PublicKey() == nil || !ed.PublicKey().Equal(edPub) || hs.PublicKey() != nil {
		t.Error("PublicKey")
	}
}

func TestCookieValue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		headers []string
		want    string
		ok      bool
	}{
		{nil, "", false},
		{[]string{"a=b"}, "", false},
		{[]string{CookieName + "=v"}, "v", true},
		{[]string{"a=b;" + CookieName + "=v;c=d"}, "v", true},
		{[]string{"a=b", "x=y; " + CookieName + "=\"v\""}, "v", true},
		{[]string{"x" + CookieName + "=v"}, "", false},
		{[]string{CookieName + "="}, "", false},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header["Cookie"] = tt.headers
		if got, ok := cookieValue(r); got != tt.want || ok != tt.ok {
			t.Errorf("cookieValue(%q) = %q, %v", tt.headers, got, ok)
		}
	}
}

func TestPassCacheBounded(t *testing.T) {
	t.Parallel()
	pc := passCache{m: make(map[string]passEntry), max: 100}
	for i := range 1000 {
		pc.put(string(rune(i+0x100)), passEntry{expires: 10}, 5)
	}
	if len(pc.m) > 100 {
		t.Errorf("cache holds %d entries, max 100", len(pc.m))
	}
}

func TestReasonString(t *testing.T) {
	t.Parallel()
	for r := PassOK; r <= PassWaitOnly; r++ {
		if s := r.String(); s == "unknown" || s == "" {
			t.Errorf("Reason(%d) has no name", r)
		}
	}
}

// TestRejectedCookies: a cookie that fails to verify is remembered, so that
// replaying it costs no JWT parse; good cookies are unaffected, the memory
// forgets after rejectTTL and stays bounded.
func TestRejectedCookies(t *testing.T) { // not parallel: AllocsPerRun
	c, clk := newTest(t, nil)
	good := earn(t, c, alice, 16)
	forged := *good
	forged.Value = good.Value[:len(good.Value)-4] + "AAAA"
	now := func() int64 { return c.now().Unix() }
	for range 2 {
		if got := c.Check(requestWith(&forged), alice, Need{Bits: 16}); got != PassInvalid {
			t.Fatalf("forged cookie: %v, want PassInvalid", got)
		}
		if !c.rejected.has(forged.Value, now()) {
			t.Fatal("forged cookie not remembered")
		}
	}
	if got := c.Check(requestWith(good), alice, Need{Bits: 16}); got != PassOK {
		t.Fatalf("good cookie: %v", got)
	}
	r := requestWith(&forged)
	if a := testing.AllocsPerRun(100, func() { c.Check(r, alice, Need{Bits: 16}) }); a != 0 {
		t.Errorf("a remembered bad cookie costs %v allocations; a JWT parse costs about 50", a)
	}
	clk.Add(rejectTTL * time.Second)
	if c.rejected.has(forged.Value, now()) {
		t.Error("forged cookie still remembered after rejectTTL")
	}
	if got := c.Check(requestWith(&forged), alice, Need{Bits: 16}); got != PassInvalid {
		t.Fatalf("forged cookie after rejectTTL: %v", got)
	}
	for i := range 3 * maxRejected {
		c.rejected.add(fmt.Sprintf("junk-%d", i), now())
		if n := len(c.rejected.m); n > maxRejected {
			t.Fatalf("%d rejected cookies remembered, bound %d", n, maxRejected)
		}
	}
}

func BenchmarkCheckRejected(b *testing.B) {
	c, _ := newTest(b, nil)
	forged := *earn(b, c, alice, 16)
	forged.Value = forged.Value[:len(forged.Value)-4] + "AAAA"
	r := requestWith(&forged)
	b.ReportAllocs()
	for b.Loop() {
		if c.Check(r, alice, Need{Bits: 16}) != PassInvalid {
			b.Fatal("forged cookie accepted")
		}
	}
}

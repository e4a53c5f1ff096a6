package challenge

import (
	"crypto/ed25519"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	c, clk := newTest(t, func(cfg *Config) { cfg.PolicyVersion = "v1" })
	ck := earn(t, c, alice, 16)
	tests := []struct {
		name    string
		client  Client
		minBits int
		advance time.Duration
		want    Reason
	}{
		{"same client", alice, 16, 0, PassOK},
		{"easier rule", alice, 8, 0, PassOK},
		{"neighbour in the /24", Client{IP: alice.IP.Prev(), JA4: alice.JA4}, 16, 0, PassOK},
		{"same browser over QUIC", aliceQ, 16, 0, PassOK},
		{"difficulty step-up", alice, 20, 0, PassBits},
		{"other /24", mallory, 16, 0, PassPrefix},
		{"roamed to IPv6", alice6, 16, 0, PassPrefix},
		{"other JA4", Client{IP: alice.IP, JA4: "t13d1715h2_5b57614c22b0_3d5424432f57"}, 16, 0, PassJA4},
		{"expired", alice, 16, DefaultPassTTL, PassExpired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Not parallel: the clock moves in the last case.
			clk.Add(tt.advance)
			if got := c.Check(requestWith(ck), tt.client, tt.minBits); got != tt.want {
				t.Errorf("Check = %v, want %v", got, tt.want)
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
		if got := c.Check(requestWith(ck), tt.cl, 8); got != tt.want {
			t.Errorf("%v: Check = %v, want %v", tt.cl.IP, got, tt.want)
		}
	}
}

func TestCheckPolicyVersion(t *testing.T) {
	t.Parallel()
	c1, _ := newTest(t, func(cfg *Config) { cfg.PolicyVersion = "v1" })
	c2, _ := newTest(t, func(cfg *Config) { cfg.PolicyVersion = "v2" })
	ck := earn(t, c1, alice, 8)
	if got := c2.Check(requestWith(ck), alice, 8); got != PassPolicy {
		t.Errorf("Check = %v, want %v", got, PassPolicy)
	}
}

func TestCheckBindNone(t *testing.T) {
	t.Parallel()
	c, _ := newTest(t, func(cfg *Config) { cfg.Bind = BindNone })
	ck := earn(t, c, alice, 8)
	if got := c.Check(requestWith(ck), mallory, 8); got != PassOK {
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
		Bits:             30, Net: "198.51.100.0/24", JA4: alice.JA4,
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
		{"garbage", hs, "a.b.c", PassInvalid},
		{"empty", hs, "", PassNoCookie},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.Header.Set("Cookie", CookieName+"="+tt.value)
			if got := tt.c.Check(r, alice, 16); got != tt.want {
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
	for r := PassOK; r <= PassPolicy; r++ {
		if s := r.String(); s == "unknown" || s == "" {
			t.Errorf("Reason(%d) has no name", r)
		}
	}
}

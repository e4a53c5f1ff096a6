package challenge

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// memMarker is a tiny in-memory Marker for the tests.
type memMarker struct {
	mu sync.Mutex
	m  map[string]bool
}

func (mm *memMarker) MarkOnce(_ context.Context, key string, _ time.Duration) (bool, error) {
	mm.mu.Lock()
	defer mm.mu.Unlock()
	if mm.m == nil {
		mm.m = make(map[string]bool)
	}
	if mm.m[key] {
		return false, nil
	}
	mm.m[key] = true
	return true, nil
}

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

var testSecret = []byte("0123456789abcdef0123456789abcdef-test")

func newTest(t testing.TB, edit func(*Config)) (*Challenger, *clock) {
	t.Helper()
	clk := &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	cfg := Config{Secret: testSecret, Marker: &memMarker{}, Now: clk.Now, Wait: 2 * time.Second}
	if edit != nil {
		edit(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, clk
}

var (
	alice   = Client{IP: netip.MustParseAddr("198.51.100.7"), JA4: "t13d1516h2_8daaf6152771_d8a2da3f94cd", Family: "chrome"}
	alice6  = Client{IP: netip.MustParseAddr("2001:db8:1:2::7"), JA4: alice.JA4, Family: "chrome"}
	aliceQ  = Client{IP: alice.IP, JA4: "q13d0312h3_55b375c5d22e_06cda9e17597", Family: "chrome"}
	mallory = Client{IP: netip.MustParseAddr("203.0.113.9"), JA4: alice.JA4, Family: "chrome"}
	bob     = Client{IP: netip.MustParseAddr("192.0.2.44"), JA4: "t13d1715h2_5b57614c22b0_3d5424432f57"}
)

// passURL builds a /.maat/pass URL for a PoW token with its solution (n
// is always there, empty when nonces is).
func passURL(tok, redirect, nonces string) string {
	return passPath + "?t=" + tok + "&r=" + url.QueryEscape(redirect) + "&n=" + nonces
}

// do runs the /.maat/ handler for cl.
func do(c *Challenger, cl Client, target string, cookies ...*http.Cookie) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, "https://example.org"+target, nil)
	for _, ck := range cookies {
		r.AddCookie(ck)
	}
	w := httptest.NewRecorder()
	c.Handler(func(*http.Request) Client { return cl }).ServeHTTP(w, r)
	return w
}

func passCookie(w *httptest.ResponseRecorder) *http.Cookie {
	for _, ck := range w.Result().Cookies() {
		if ck.Name == CookieName {
			return ck
		}
	}
	return nil
}

// earn solves a fresh challenge for cl at bits and returns the cookie.
func earn(t testing.TB, c *Challenger, cl Client, bits int) *http.Cookie {
	t.Helper()
	tk, tok := c.issuePoW(cl, Spec{Bits: bits}, c.now())
	w := do(c, cl, passURL(tok, "/", formatNonces(solve(&tk))))
	ck := passCookie(w)
	if w.Code != http.StatusSeeOther || ck == nil {
		t.Fatalf("earn: status %d, cookie %v, body %.200s", w.Code, ck, w.Body)
	}
	return ck
}

// earnWait waits out a fresh wait token for cl (moving clk) and returns
// the cookie.
func earnWait(t testing.TB, c *Challenger, clk *clock, cl Client) *http.Cookie {
	t.Helper()
	_, tok := c.issueWait(cl, "", 2, c.now())
	clk.Add(2 * time.Second)
	w := do(c, cl, waitURL(tok, "/"))
	ck := passCookie(w)
	if w.Code != http.StatusSeeOther || ck == nil {
		t.Fatalf("earnWait: status %d, cookie %v, body %.200s", w.Code, ck, w.Body)
	}
	return ck
}

// waitURL builds a /.maat/pass URL for a wait token: no n at all.
func waitURL(tok, redirect string) string {
	return passPath + "?t=" + tok + "&r=" + url.QueryEscape(redirect)
}

// claimsOf decodes a pass cookie's claims without checking them.
func claimsOf(t testing.TB, ck *http.Cookie) passClaims {
	t.Helper()
	var claims passClaims
	if _, _, err := jwt.NewParser().ParseUnverified(ck.Value, &claims); err != nil {
		t.Fatal(err)
	}
	return claims
}

func requestWith(ck *http.Cookie) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "https://example.org/page", nil)
	r.Header.Set("Cookie", "theme=dark; "+ck.Name+"="+ck.Value+"; other=1")
	return r
}

func isHTML(w *httptest.ResponseRecorder) bool {
	return strings.HasPrefix(w.Header().Get("Content-Type"), "text/html")
}

func ipFrom(t testing.TB, s string) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

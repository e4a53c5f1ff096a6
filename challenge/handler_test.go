package challenge

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestPass(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		spec       Spec
		client     Client // who redeems
		advance    time.Duration
		nonces     func(tk *token) string
		redirect   string
		wantStatus int
		wantCookie bool
		wantLoc    string
	}{
		{name: "solved", client: alice, redirect: "/wiki/Main_Page?action=view", wantStatus: 303, wantCookie: true, wantLoc: "/wiki/Main_Page?action=view"},
		{name: "solved from another address in the /24", client: Client{IP: alice.IP.Next(), JA4: alice.JA4}, redirect: "/", wantStatus: 303, wantCookie: true, wantLoc: "/"},
		{name: "expired token gets a fresh challenge", client: alice, advance: DefaultChallengeTTL, redirect: "/x", wantStatus: 200},
		{name: "roamed to IPv6 gets a fresh challenge", client: alice6, redirect: "/x", wantStatus: 200},
		{name: "other /24 gets a fresh challenge", client: mallory, redirect: "/x", wantStatus: 200},
		{name: "other JA4 gets a fresh challenge", client: Client{IP: alice.IP, JA4: "t13d1715h2_5b57614c22b0_3d5424432f57"}, redirect: "/x", wantStatus: 200},
		{name: "wrong solution", client: alice, nonces: func(*token) string {
			return "0,100000000000000,200000000000000,300000000000000,400000000000000,500000000000000,600000000000000,700000000000000"
		}, wantStatus: 403},
		{name: "garbage nonces", client: alice, nonces: func(*token) string { return "zz" }, wantStatus: 403},
		{name: "wait path too early", client: alice, nonces: func(*token) string { return "" }, wantStatus: 200},
		{name: "wait path after the wait", client: alice, advance: 2 * time.Second, nonces: func(*token) string { return "" }, wantStatus: 303, wantCookie: true, wantLoc: "/"},
		{name: "metarefresh after the wait", spec: Spec{Algorithm: "metarefresh"}, client: alice, advance: 3 * time.Second, nonces: func(*token) string { return "" }, redirect: "/feed", wantStatus: 303, wantCookie: true, wantLoc: "/feed"},
		{name: "metarefresh refuses nonces", spec: Spec{Algorithm: "metarefresh", Bits: 1}, client: alice, advance: 3 * time.Second, nonces: func(*token) string { return "0" }, wantStatus: 403},
		{name: "open redirect //", client: alice, redirect: "//evil.example/", wantStatus: 303, wantCookie: true, wantLoc: "/"},
		{name: "open redirect scheme", client: alice, redirect: "https://evil.example/", wantStatus: 303, wantCookie: true, wantLoc: "/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, clk := newTest(t, nil)
			tk, tok := c.issue(alice, tt.spec, c.now())
			n := ""
			if tt.nonces != nil {
				n = tt.nonces(&tk)
			} else {
				n = formatNonces(solve(&tk))
			}
			clk.Add(tt.advance)
			w := do(c, tt.client, passURL(tok, tt.redirect, n))
			if w.Code != tt.wantStatus {
				t.Fatalf("status %d, want %d; body %.300s", w.Code, tt.wantStatus, w.Body)
			}
			if got := passCookie(w) != nil; got != tt.wantCookie {
				t.Errorf("cookie set = %v, want %v", got, tt.wantCookie)
			}
			if tt.wantLoc != "" && w.Header().Get("Location") != tt.wantLoc {
				t.Errorf("Location %q, want %q", w.Header().Get("Location"), tt.wantLoc)
			}
			if w.Code == 200 && !strings.Contains(w.Body.String(), `/.maat/pass?t=`) {
				t.Errorf("200 without a challenge: %.300s", w.Body)
			}
		})
	}
}

func TestPassForgedToken(t *testing.T) {
	t.Parallel()
	c, _ := newTest(t, nil)
	for _, tok := range []string{"", "x", strings.Repeat("A", 200), strings.Repeat("A", 5000)} {
		if w := do(c, alice, passURL(tok, "/", "0")); w.Code != http.StatusForbidden || passCookie(w) != nil {
			t.Errorf("token %.20q: status %d", tok, w.Code)
		}
	}
}

func TestPassCookieAttributes(t *testing.T) {
	t.Parallel()
	c, clk := newTest(t, nil)
	ck := earn(t, c, alice, 12)
	if !ck.HttpOnly || !ck.Secure || ck.SameSite != http.SameSiteLaxMode || ck.Path != "/" || ck.Domain != "" {
		t.Errorf("cookie attributes %+v", ck)
	}
	if want := clk.Now().Add(DefaultPassTTL); !ck.Expires.Equal(want) {
		t.Errorf("expires %v, want %v", ck.Expires, want)
	}
}

func TestReplay(t *testing.T) {
	t.Parallel()
	c, _ := newTest(t, nil)
	tk, tok := c.issue(alice, Spec{Bits: 8}, c.now())
	u := passURL(tok, "/a", formatNonces(solve(&tk)))
	w := do(c, alice, u)
	ck := passCookie(w)
	if ck == nil {
		t.Fatal("first redemption: no cookie")
	}
	// The same browser submitting twice is sent on, without a new cookie.
	if w := do(c, alice, u, ck); w.Code != http.StatusSeeOther || passCookie(w) != nil {
		t.Errorf("double submit with cookie: status %d, cookie %v", w.Code, passCookie(w))
	}
	// Anyone else replaying it starts over.
	if w := do(c, alice, u); w.Code != http.StatusOK || passCookie(w) != nil {
		t.Errorf("replay: status %d, cookie %v", w.Code, passCookie(w))
	}
}

func TestParallelRedemptions(t *testing.T) {
	t.Parallel()
	c, _ := newTest(t, nil)
	tk, tok := c.issue(alice, Spec{Bits: 10}, c.now())
	u := passURL(tok, "/", formatNonces(solve(&tk)))
	var cookies atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 64 {
		wg.Go(func() {
			<-start
			if passCookie(do(c, alice, u)) != nil {
				cookies.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	if n := cookies.Load(); n != 1 {
		t.Errorf("64 redemptions gave %d cookies, want 1", n)
	}
}

func TestParallelChallenges(t *testing.T) {
	t.Parallel()
	c, _ := newTest(t, nil)
	// Two tabs challenged at once: both pass, and the first cookie stays valid.
	tk1, tok1 := c.issue(alice, Spec{Bits: 8}, c.now())
	tk2, tok2 := c.issue(alice, Spec{Bits: 8}, c.now())
	ck1 := passCookie(do(c, alice, passURL(tok1, "/1", formatNonces(solve(&tk1)))))
	ck2 := passCookie(do(c, alice, passURL(tok2, "/2", formatNonces(solve(&tk2))), ck1))
	if ck1 == nil || ck2 == nil {
		t.Fatalf("cookies %v %v", ck1, ck2)
	}
	for _, ck := range []*http.Cookie{ck1, ck2} {
		if r := c.Check(requestWith(ck), alice, 8); r != PassOK {
			t.Errorf("cookie check %v", r)
		}
	}
}

type failingMarker struct{}

func (failingMarker) MarkOnce(context.Context, string, time.Duration) (bool, error) {
	return false, errors.New("store down")
}

func TestPassStoreDown(t *testing.T) {
	t.Parallel()
	c, _ := newTest(t, func(cfg *Config) { cfg.Marker = failingMarker{} })
	tk, tok := c.issue(alice, Spec{Bits: 4}, c.now())
	w := do(c, alice, passURL(tok, "/", formatNonces(solve(&tk))))
	if w.Code != http.StatusServiceUnavailable || passCookie(w) != nil {
		t.Errorf("status %d", w.Code)
	}
}

func TestSafeRedirect(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"/", "/"},
		{"/a/b?c=d#e", "/a/b?c=d#e"},
		{"/%2F%2Fevil.example", "/%2F%2Fevil.example"},
		{"", "/"},
		{"//evil.example", "/"},
		{"/\\evil.example", "/"},
		{"/\\/evil.example", "/"},
		{"/a\\b", "/"},
		{"\\\\evil.example", "/"},
		{"https://evil.example/", "/"},
		{"javascript:alert(1)", "/"},
		{"evil.example", "/"},
		{"/\t/evil.example", "/"},
		{"/\n/evil.example", "/"},
		{"/ /evil.example", "/"},
		{"/.maat/pass?t=x", "/"},
		{"///evil.example", "/"},
		{"/" + strings.Repeat("a", 5000), "/"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			if got := safeRedirect(tt.in); got != tt.want {
				t.Errorf("safeRedirect(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestStatic(t *testing.T) {
	t.Parallel()
	c, _ := newTest(t, nil)
	for _, name := range []string{"solve.js", "worker.js", "maat.css"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w := do(c, alice, staticPrefix+name)
			if w.Code != 200 || w.Body.Len() == 0 {
				t.Fatalf("status %d", w.Code)
			}
			if ct := w.Header().Get("Content-Type"); !strings.Contains(ct, "javascript") && !strings.Contains(ct, "css") {
				t.Errorf("content type %q", ct)
			}
		})
	}
	if w := do(c, alice, staticPrefix+"../config.go"); w.Code != http.StatusNotFound {
		t.Errorf("traversal: status %d", w.Code)
	}
	if w := do(c, alice, PathPrefix+"nothing"); w.Code != http.StatusNotFound {
		t.Errorf("unknown path: status %d", w.Code)
	}
}

func TestPassMethod(t *testing.T) {
	t.Parallel()
	c, _ := newTest(t, nil)
	tk, tok := c.issue(alice, Spec{Bits: 4}, c.now())
	r := httptest.NewRequest(http.MethodPost, "https://example.org"+passURL(tok, "/", formatNonces(solve(&tk))), nil)
	w := httptest.NewRecorder()
	c.Handler(func(*http.Request) Client { return alice }).ServeHTTP(w, r)
	if w.Code != http.StatusMethodNotAllowed || passCookie(w) != nil || isHTML(w) {
		t.Errorf("POST: status %d", w.Code)
	}
}

func TestPassRequestID(t *testing.T) {
	t.Parallel()
	c, _ := newTest(t, func(cfg *Config) {
		cfg.RequestID = func(r *http.Request) string { return r.Header.Get("X-Test-Id") }
	})
	r := httptest.NewRequest(http.MethodGet, "https://example.org"+passURL("forged", "/", "0"), nil)
	r.Header.Set("X-Test-Id", "req-77")
	w := httptest.NewRecorder()
	c.Handler(func(*http.Request) Client { return alice }).ServeHTTP(w, r)
	if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "req-77") || !strings.Contains(w.Body.String(), "challenge_invalid") {
		t.Errorf("status %d body %s", w.Code, w.Body)
	}
}

func TestOnPassReportsSolveTime(t *testing.T) {
	t.Parallel()
	var got []time.Duration
	var spec Spec
	c, clk := newTest(t, func(cfg *Config) {
		cfg.OnPass = func(_ *http.Request, s Spec, solve time.Duration) { got = append(got, solve); spec = s }
	})
	tk, tok := c.issue(alice, Spec{Bits: 8}, c.now())
	clk.Add(1500 * time.Millisecond)
	if w := do(c, alice, passURL(tok, "/", formatNonces(solve(&tk)))); w.Code != 303 {
		t.Fatalf("status %d", w.Code)
	}
	// A replay earns nothing and reports nothing.
	do(c, alice, passURL(tok, "/", formatNonces(solve(&tk))))
	if len(got) != 1 || got[0] < time.Second || got[0] > 2*time.Second || spec.Bits != 8 {
		t.Errorf("OnPass calls %v, spec %+v; want one of about 1.5s at 8 bits", got, spec)
	}
}

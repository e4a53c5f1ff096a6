package challenge

import (
	"context"
	"errors"
	"html"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// refusals records what Config.OnFail and Config.OnPass report.
type reports struct {
	mu     sync.Mutex
	failed []string
	passed []Spec
}

func (rp *reports) onFail(_ *http.Request, reason string) {
	rp.mu.Lock()
	rp.failed = append(rp.failed, reason)
	rp.mu.Unlock()
}

func (rp *reports) onPass(_ *http.Request, s Spec, _ time.Duration) {
	rp.mu.Lock()
	rp.passed = append(rp.passed, s)
	rp.mu.Unlock()
}

func newReported(t testing.TB, edit func(*Config)) (*Challenger, *clock, *reports) {
	t.Helper()
	rp := &reports{}
	c, clk := newTest(t, func(cfg *Config) {
		cfg.OnFail, cfg.OnPass = rp.onFail, rp.onPass
		if edit != nil {
			edit(cfg)
		}
	})
	return c, clk, rp
}

// checkRefusal asserts a refused redemption: 403, Maat-Mitigated, the
// reason on the page and reported, a link back to back, no cookie, no pass.
func checkRefusal(t *testing.T, w *httptest.ResponseRecorder, rp *reports, reason, back string) {
	t.Helper()
	body := w.Body.String()
	if w.Code != http.StatusForbidden || w.Header().Get(MitigatedHeader) != "challenge" || !isHTML(w) {
		t.Fatalf("status %d, %s %q, type %q; want 403 challenge HTML", w.Code, MitigatedHeader, w.Header().Get(MitigatedHeader), w.Header().Get("Content-Type"))
	}
	if !strings.Contains(body, "<code>"+reason+"</code>") {
		t.Errorf("page does not show %s:\n%s", reason, body)
	}
	if want := `href="` + html.EscapeString(back) + `"`; !strings.Contains(body, want) {
		t.Errorf("page lacks the link back %s:\n%s", want, body)
	}
	if passCookie(w) != nil {
		t.Error("a refusal set a cookie")
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if len(rp.failed) != 1 || rp.failed[0] != reason || len(rp.passed) != 0 {
		t.Errorf("reported failures %v, passes %v; want [%s] and none", rp.failed, rp.passed, reason)
	}
}

func TestPassPoW(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		client   Client // who redeems
		redirect string
		wantLoc  string
	}{
		{name: "solved", client: alice, redirect: "/wiki/Main_Page?action=view", wantLoc: "/wiki/Main_Page?action=view"},
		{name: "solved from another address in the /24", client: Client{IP: alice.IP.Next(), JA4: alice.JA4}, redirect: "/", wantLoc: "/"},
		{name: "same browser over QUIC", client: aliceQ, redirect: "/a", wantLoc: "/a"},
		{name: "open redirect //", client: alice, redirect: "//evil.example/", wantLoc: "/"},
		{name: "open redirect scheme", client: alice, redirect: "https://evil.example/", wantLoc: "/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, _, rp := newReported(t, nil)
			tk, tok := c.issuePoW(alice, Spec{Bits: 12, Rule: "browsers"}, c.now())
			w := do(c, tt.client, passURL(tok, tt.redirect, formatNonces(solve(&tk))))
			if w.Code != http.StatusSeeOther || w.Header().Get("Location") != tt.wantLoc {
				t.Fatalf("status %d Location %q, want 303 %q; body %.300s", w.Code, w.Header().Get("Location"), tt.wantLoc, w.Body)
			}
			ck := passCookie(w)
			if ck == nil {
				t.Fatal("no cookie")
			}
			if cl := claimsOf(t, ck); cl.Method != MethodPoW || cl.Bits != 12 || cl.Rule != "browsers" {
				t.Errorf("claims method %q bits %d rule %q; want pow 12 browsers", cl.Method, cl.Bits, cl.Rule)
			}
			if len(rp.passed) != 1 || rp.passed[0].Algorithm != "pow" || rp.passed[0].Bits != 12 || len(rp.failed) != 0 {
				t.Errorf("reported passes %v, failures %v", rp.passed, rp.failed)
			}
		})
	}
}

// TestPassRefused: every way a redemption fails gets a 403 page with its
// reason and a link back, is reported, and earns nothing.
func TestPassRefused(t *testing.T) {
	t.Parallel()
	otherJA4 := Client{IP: alice.IP, JA4: "t13d1715h2_5b57614c22b0_3d5424432f57"}
	wrong := "0,100000000000000,200000000000000,300000000000000"
	tests := []struct {
		name    string
		kind    uint8
		client  Client
		advance time.Duration
		query   func(tok string, tk *token) string // the query after /.maat/pass?
		reason  string
	}{
		{name: "forged", kind: kindPoW, client: alice, query: func(string, *token) string { return "t=AQEQCAIA&r=%2Fx&n=0" }, reason: FailInvalid},
		{name: "empty token", kind: kindPoW, client: alice, query: func(string, *token) string { return "r=%2Fx&n=0" }, reason: FailInvalid},
		{name: "expired", kind: kindPoW, client: alice, advance: DefaultChallengeTTL, reason: FailExpired},
		{name: "expired wait", kind: kindWait, client: alice, advance: DefaultChallengeTTL, reason: FailExpired},
		{name: "roamed to another /24", kind: kindPoW, client: mallory, reason: FailRoamed},
		{name: "roamed to IPv6", kind: kindPoW, client: alice6, reason: FailRoamed},
		{name: "roamed to another JA4", kind: kindPoW, client: otherJA4, reason: FailRoamed},
		{name: "wait token roamed", kind: kindWait, client: mallory, advance: 3 * time.Second, reason: FailRoamed},
		{name: "PoW token without nonces", kind: kindPoW, client: alice, advance: time.Minute, query: func(tok string, _ *token) string { return "t=" + tok + "&r=%2Fx" }, reason: FailNonceMissing},
		{name: "PoW token with empty nonces", kind: kindPoW, client: alice, advance: time.Minute, query: func(tok string, _ *token) string { return "t=" + tok + "&r=%2Fx&n=" }, reason: FailNonceMissing},
		{name: "wait token with nonces", kind: kindWait, client: alice, advance: 3 * time.Second, query: func(tok string, _ *token) string { return "t=" + tok + "&r=%2Fx&n=0" }, reason: FailWrongKind},
		{name: "wait token with an empty n", kind: kindWait, client: alice, advance: 3 * time.Second, query: func(tok string, _ *token) string { return "t=" + tok + "&r=%2Fx&n=" }, reason: FailWrongKind},
		{name: "wrong solution", kind: kindPoW, client: alice, query: func(tok string, _ *token) string { return "t=" + tok + "&r=%2Fx&n=" + wrong }, reason: FailWrongSolution},
		{name: "garbage nonces", kind: kindPoW, client: alice, query: func(tok string, _ *token) string { return "t=" + tok + "&r=%2Fx&n=zz" }, reason: FailWrongSolution},
		{name: "too few nonces", kind: kindPoW, client: alice, query: func(tok string, tk *token) string {
			return "t=" + tok + "&r=%2Fx&n=" + formatNonces(solve(tk)[1:])
		}, reason: FailWrongSolution},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, clk, rp := newReported(t, nil)
			var tk token
			var tok string
			if tt.kind == kindWait {
				tk, tok = c.issueWait(alice, "r", 2, c.now())
			} else {
				tk, tok = c.issuePoW(alice, Spec{Bits: 10}, c.now())
			}
			q := "t=" + tok + "&r=%2Fx"
			switch {
			case tt.query != nil:
				q = tt.query(tok, &tk)
			case tt.kind == kindPoW:
				q += "&n=" + formatNonces(solve(&tk))
			}
			clk.Add(tt.advance)
			checkRefusal(t, do(c, tt.client, passPath+"?"+q), rp, tt.reason, "/x")
		})
	}
}

// TestPassRefusedLocalized: the refusal is in the visitor's language, and
// a non-navigation gets the short answer with the reason.
func TestPassRefusedLocalized(t *testing.T) {
	t.Parallel()
	c, _, _ := newReported(t, func(cfg *Config) { cfg.Messages = loadMessages(t) })
	tk, tok := c.issuePoW(alice, Spec{Bits: 8}, c.now())
	_ = tk
	r := httptest.NewRequest(http.MethodGet, "https://example.org"+passPath+"?t="+tok+"&r=%2Fwiki%2FSeite", nil)
	r.Header.Set("Accept-Language", "de-DE,de;q=0.9")
	w := httptest.NewRecorder()
	c.Handler(func(*http.Request) Client { return alice }).ServeHTTP(w, r)
	body := w.Body.String()
	for _, want := range []string{`lang="de"`, "Die Prüfung ist fehlgeschlagen", "Zurück zur Seite", `href="/wiki/Seite"`, FailNonceMissing} {
		if !strings.Contains(body, want) {
			t.Errorf("German refusal lacks %q:\n%s", want, body)
		}
	}
	r = httptest.NewRequest(http.MethodGet, "https://example.org"+passPath+"?t="+tok, nil)
	r.Header.Set("Sec-Fetch-Mode", "cors")
	r.Header.Set("Accept", "application/json")
	w = httptest.NewRecorder()
	c.Handler(func(*http.Request) Client { return alice }).ServeHTTP(w, r)
	if w.Code != http.StatusForbidden || isHTML(w) || !strings.Contains(w.Body.String(), `"error":"`+FailNonceMissing+`"`) {
		t.Errorf("fetch: status %d body %s", w.Code, w.Body)
	}
}

// TestPassWait: a wait token before its time gets the wait page again (not
// a cookie), after it a cookie that records the wait and no bits.
func TestPassWait(t *testing.T) {
	t.Parallel()
	c, clk, rp := newReported(t, nil)
	_, tok := c.issueWait(alice, "browsers", 5, c.now())
	u := waitURL(tok, "/feed")
	clk.Add(2 * time.Second)
	w := do(c, alice, u)
	if w.Code != http.StatusForbidden || w.Header().Get(MitigatedHeader) != "challenge" || passCookie(w) != nil {
		t.Fatalf("too early: status %d, cookie %v", w.Code, passCookie(w))
	}
	body := w.Body.String()
	if !strings.Contains(body, `content="3; url=`+html.EscapeString(u)+`"`) || !strings.Contains(body, `href="`+html.EscapeString(u)+`"`) {
		t.Errorf("too early: not the same wait, refreshing in 3 s:\n%s", body)
	}
	if strings.Contains(body, "data-pass") || len(rp.failed) != 0 {
		t.Errorf("too early: a PoW on the page or a failure reported (%v)", rp.failed)
	}
	clk.Add(3 * time.Second)
	w = do(c, alice, u)
	ck := passCookie(w)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/feed" || ck == nil {
		t.Fatalf("after the wait: status %d, cookie %v", w.Code, ck)
	}
	if cl := claimsOf(t, ck); cl.Method != MethodWait || cl.Bits != 0 || cl.Rule != "browsers" {
		t.Errorf("claims method %q bits %d rule %q; want wait 0 browsers", cl.Method, cl.Bits, cl.Rule)
	}
	if len(rp.passed) != 1 || rp.passed[0].Algorithm != "metarefresh" || rp.passed[0].Bits != 0 || rp.passed[0].Wait != 5*time.Second {
		t.Errorf("reported passes %+v", rp.passed)
	}
	for _, tt := range []struct {
		need Need
		want Reason
	}{{Need{Bits: 12}, PassWaitOnly}, {Need{}, PassWaitOnly}, {Need{Bits: 12, Wait: true}, PassOK}} {
		if got := c.Check(requestWith(ck), alice, tt.need); got != tt.want {
			t.Errorf("wait cookie, %+v: %v, want %v", tt.need, got, tt.want)
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

// TestReplay: a redeemed token sends on the browser that holds a pass good
// for it (the rule Check applies on the way to the site), and refuses
// anyone else.
func TestReplay(t *testing.T) {
	t.Parallel()
	c, clk, rp := newReported(t, nil)
	tk, tok := c.issuePoW(alice, Spec{Bits: 8}, c.now())
	u := passURL(tok, "/a", formatNonces(solve(&tk)))
	ck := passCookie(do(c, alice, u))
	if ck == nil {
		t.Fatal("first redemption: no cookie")
	}
	if w := do(c, alice, u, ck); w.Code != http.StatusSeeOther || passCookie(w) != nil {
		t.Errorf("double submit with the cookie: status %d, cookie %v", w.Code, passCookie(w))
	}
	waitCk := earnWait(t, c, clk, alice)
	rp.failed, rp.passed = nil, nil
	if w := do(c, alice, u, waitCk); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), FailReused) {
		t.Errorf("PoW token replayed with a wait cookie: status %d", w.Code)
	}
	rp.failed, rp.passed = nil, nil
	checkRefusal(t, do(c, alice, u), rp, FailReused, "/a")
}

// TestNoDowngrade: a browser that holds a proof of work and redeems a wait
// token (another tab fell back to the wait) keeps its proof of work.
func TestNoDowngrade(t *testing.T) {
	t.Parallel()
	c, clk, rp := newReported(t, nil)
	pow := earn(t, c, alice, 16)
	_, tok := c.issueWait(alice, "", 2, c.now())
	clk.Add(2 * time.Second)
	w := do(c, alice, waitURL(tok, "/b"), pow)
	if w.Code != http.StatusSeeOther || passCookie(w) != nil {
		t.Errorf("status %d, cookie %v: want 303 and the PoW cookie kept", w.Code, passCookie(w))
	}
	weaker := earn(t, c, alice, 8)
	tk, tok := c.issuePoW(alice, Spec{Bits: 12}, c.now())
	w = do(c, alice, passURL(tok, "/c", formatNonces(solve(&tk))), weaker)
	if ck := passCookie(w); w.Code != http.StatusSeeOther || ck == nil || claimsOf(t, ck).Bits != 12 {
		t.Errorf("8 bits held, 12 solved: status %d, cookie %v; want a 12-bit cookie", w.Code, ck)
	}
	if len(rp.passed) != 4 {
		t.Errorf("%d passes reported, want 4", len(rp.passed))
	}
}

func TestParallelRedemptions(t *testing.T) {
	t.Parallel()
	c, _ := newTest(t, nil)
	tk, tok := c.issuePoW(alice, Spec{Bits: 10}, c.now())
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
	tk1, tok1 := c.issuePoW(alice, Spec{Bits: 8}, c.now())
	tk2, tok2 := c.issuePoW(alice, Spec{Bits: 8}, c.now())
	ck1 := passCookie(do(c, alice, passURL(tok1, "/1", formatNonces(solve(&tk1)))))
	w2 := do(c, alice, passURL(tok2, "/2", formatNonces(solve(&tk2))), ck1)
	if ck1 == nil || w2.Code != http.StatusSeeOther || w2.Header().Get("Location") != "/2" {
		t.Fatalf("first cookie %v; second tab status %d", ck1, w2.Code)
	}
	if r := c.Check(requestWith(ck1), alice, Need{Bits: 8}); r != PassOK {
		t.Errorf("cookie check %v", r)
	}
}

type failingMarker struct{}

func (failingMarker) MarkOnce(context.Context, string, time.Duration) (bool, error) {
	return false, errors.New("store down")
}

func TestPassStoreDown(t *testing.T) {
	t.Parallel()
	c, _, rp := newReported(t, func(cfg *Config) { cfg.Marker = failingMarker{} })
	tk, tok := c.issuePoW(alice, Spec{Bits: 4}, c.now())
	w := do(c, alice, passURL(tok, "/", formatNonces(solve(&tk))))
	if w.Code != http.StatusServiceUnavailable || passCookie(w) != nil {
		t.Errorf("status %d", w.Code)
	}
	if len(rp.failed) != 1 || rp.failed[0] != FailStore || len(rp.passed) != 0 {
		t.Errorf("reported failures %v, passes %v", rp.failed, rp.passed)
	}
}

func TestSafeRedirect(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"/", "/"},
		{"/a/b?c=d#e", "/a/b?c=d#e"},
		{"/%2F%2Fevil.example", "/%2F%2Fevil.example"},
		{"/%09/evil.example", "/%09/evil.example"},
		{"/a/.b/c..d", "/a/.b/c..d"},
		{"", "/"},
		{"//evil.example", "/"},
		{"/\\evil.example", "/"},
		{"\\/evil.example", "/"},
		{"/\\/evil.example", "/"},
		{"/a\\b", "/"},
		{"\\\\evil.example", "/"},
		{"%2F%2Fevil.example", "/"},
		{"https://evil.example/", "/"},
		{"https:evil.example", "/"},
		{"javascript:alert(1)", "/"},
		{"evil.example", "/"},
		{"/..//evil.example", "/"},
		{"/a/../..//evil.example", "/"},
		{"/./evil", "/"},
		{"/a/..", "/"},
		{"/\t/evil.example", "/"},
		{"/\n/evil.example", "/"},
		{"/a\r\nSet-Cookie: x=y", "/"},
		{"/a%0d%0aSet-Cookie:%20x=y", "/a%0d%0aSet-Cookie:%20x=y"},
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
	tk, tok := c.issuePoW(alice, Spec{Bits: 4}, c.now())
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
	tk, tok := c.issuePoW(alice, Spec{Bits: 8}, c.now())
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

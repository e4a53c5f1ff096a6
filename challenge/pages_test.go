package challenge

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestChallengeNonNavigation(t *testing.T) {
	t.Parallel()
	c, _ := newTest(t, nil)
	tests := []struct {
		name   string
		method string
		header map[string]string
		json   bool
	}{
		{name: "POST form", method: http.MethodPost},
		{name: "PUT", method: http.MethodPut},
		{name: "fetch cors", method: http.MethodGet, header: map[string]string{"Sec-Fetch-Mode": "cors", "Accept": "application/json"}, json: true},
		{name: "fetch no-cors image", method: http.MethodGet, header: map[string]string{"Sec-Fetch-Mode": "no-cors", "Accept": "image/avif,*/*"}},
		{name: "XHR", method: http.MethodGet, header: map[string]string{"X-Requested-With": "XMLHttpRequest"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(tt.method, "https://example.org/api/save", strings.NewReader("a=b"))
			for k, v := range tt.header {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			c.Challenge(w, r, alice, Spec{}, "req-1")
			if w.Code != http.StatusUnauthorized {
				t.Errorf("status %d, want 401", w.Code)
			}
			if w.Header().Get("Retry-After") == "" || w.Header().Get("Location") != "" || isHTML(w) {
				t.Errorf("headers %v", w.Header())
			}
			if tt.json {
				var v struct{ Error, RequestID string }
				if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil || v.Error != "challenge_required" {
					t.Errorf("JSON body %q: %v", w.Body, err)
				}
			}
		})
	}
}

var (
	nonceRE    = regexp.MustCompile(`script-src 'nonce-([A-Za-z0-9_-]+)'`)
	refreshRE  = regexp.MustCompile(`<meta http-equiv="refresh" content="(\d+); url=([^"]+)">`)
	dataWaitRE = regexp.MustCompile(`data-wait="([^"]+)"`)
	dataPassRE = regexp.MustCompile(`data-pass="([^"]+)"`)
	buttonRE   = regexp.MustCompile(`<a class="button" href="([^"]+)">`)
)

// pageURLs are the pass URLs on a challenge page, unescaped; "" where the
// page has none.
type pageURLs struct {
	refresh, dataWait, dataPass, button string
	refreshSecs                         string
}

func urlsOf(body string) pageURLs {
	var u pageURLs
	if m := refreshRE.FindStringSubmatch(body); m != nil {
		u.refreshSecs, u.refresh = m[1], html.UnescapeString(m[2])
	}
	for _, f := range []struct {
		re  *regexp.Regexp
		dst *string
	}{{dataWaitRE, &u.dataWait}, {dataPassRE, &u.dataPass}, {buttonRE, &u.button}} {
		if m := f.re.FindStringSubmatch(body); m != nil {
			*f.dst = html.UnescapeString(m[1])
		}
	}
	return u
}

// challengePage serves a challenge page to cl for target.
func challengePage(c *Challenger, cl Client, target string, s Spec) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, "https://example.org"+target, nil)
	r.Header.Set("Sec-Fetch-Mode", "navigate")
	w := httptest.NewRecorder()
	c.Challenge(w, r, cl, s, "req-2")
	return w
}

func TestChallengePage(t *testing.T) {
	t.Parallel()
	c, _ := newTest(t, nil)
	tests := []struct {
		name              string
		spec              Spec
		wantPoW, wantWait bool
		wantSecs          string
		want, dont        []string
	}{
		{name: "pow with a wait", spec: Spec{Bits: 16, Wait: 3 * time.Second}, wantPoW: true, wantWait: true, wantSecs: "3",
			want: []string{"JavaScript is turned off", "Please wait 3 seconds"}, dont: []string{"<strong>This site needs JavaScript"}},
		{name: "pow without a wait", spec: Spec{Bits: 16}, wantPoW: true,
			want: []string{"<noscript>\n<p><strong>This site needs JavaScript to let you in"}, dont: []string{"JavaScript is turned off", "Please wait", "data-wait"}},
		{name: "metarefresh", spec: Spec{Algorithm: "metarefresh"}, wantWait: true, wantSecs: "2",
			want: []string{"wait a moment", "Please wait 2 seconds"}, dont: []string{"data-seed", "needs JavaScript"}},
		{name: "metarefresh with its own wait", spec: Spec{Algorithm: "metarefresh", Wait: 4500 * time.Millisecond}, wantWait: true, wantSecs: "5"},
		{name: "a wait too long", spec: Spec{Bits: 12, Wait: time.Hour}, wantPoW: true, wantWait: true, wantSecs: "600"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := challengePage(c, alice, "/wiki/Page?x=1", tt.spec)
			body := w.Body.String()
			if w.Code != http.StatusForbidden || !isHTML(w) || w.Header().Get(MitigatedHeader) != "challenge" {
				t.Fatalf("status %d type %q %s %q", w.Code, w.Header().Get("Content-Type"), MitigatedHeader, w.Header().Get(MitigatedHeader))
			}
			u := urlsOf(body)
			if (u.dataPass != "") != tt.wantPoW {
				t.Errorf("data-pass %q, want PoW %v", u.dataPass, tt.wantPoW)
			}
			if tt.wantWait {
				if u.refresh == "" || u.refresh != u.dataWait || u.refresh != u.button || u.refreshSecs != tt.wantSecs {
					t.Errorf("wait URLs disagree: %+v, want %s s", u, tt.wantSecs)
				}
				tok, err := c.ParseToken(mustQuery(t, u.refresh).Get("t"))
				if err != nil || tok.Kind != MethodWait || strconv.Itoa(int(tok.Wait/time.Second)) != tt.wantSecs {
					t.Errorf("wait token %+v %v", tok, err)
				}
			} else if u.refresh != "" || u.dataWait != "" || u.button != "" {
				t.Errorf("a wait on a page without one: %+v", u)
			}
			if tt.wantPoW {
				tok, err := c.ParseToken(mustQuery(t, u.dataPass).Get("t"))
				if err != nil || tok.Kind != MethodPoW || tok.Bits != tt.spec.Bits {
					t.Errorf("PoW token %+v %v", tok, err)
				}
			}
			for _, s := range tt.want {
				if !strings.Contains(body, s) {
					t.Errorf("page lacks %q", s)
				}
			}
			for _, s := range tt.dont {
				if strings.Contains(body, s) {
					t.Errorf("page has %q", s)
				}
			}
			if !strings.Contains(body, "r=%2Fwiki%2FPage%3Fx%3D1") {
				t.Errorf("original URL not carried: %s", body)
			}
			m := nonceRE.FindStringSubmatch(w.Header().Get("Content-Security-Policy"))
			if m == nil || !strings.Contains(body, `<script nonce="`+m[1]+`"`) {
				t.Errorf("script nonce does not match CSP %q", w.Header().Get("Content-Security-Policy"))
			}
			if w.Header().Get("Cache-Control") != "no-store" {
				t.Error("challenge page may be cached")
			}
			// The ID the logs carry, for a visitor stuck on the page to quote.
			if w.Header().Get("X-Request-Id") != "req-2" || !strings.Contains(body, `<code class="rid">req-2</code>`) {
				t.Errorf("request ID: header %q, shown: %v", w.Header().Get("X-Request-Id"), strings.Contains(body, "req-2"))
			}
		})
	}
}

func mustQuery(t *testing.T, u string) url.Values {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil || p.Path != passPath {
		t.Fatalf("pass URL %q: %v", u, err)
	}
	return p.Query()
}

// TestTokensFreshPerPage: two pages served one after the other (the second
// from the page skeleton the first one built) carry their own tokens in
// every pass URL, and each works for its own visitor, the no-JS Continue
// of the second visitor included.
func TestTokensFreshPerPage(t *testing.T) {
	t.Parallel()
	c, clk, rp := newReported(t, nil)
	spec := Spec{Bits: 10, Wait: 2 * time.Second}
	p1 := urlsOf(challengePage(c, alice, "/one", spec).Body.String())
	p2 := urlsOf(challengePage(c, bob, "/two", spec).Body.String())
	seen := map[string]string{}
	for name, u := range map[string]string{
		"first data-pass": p1.dataPass, "first wait": p1.refresh,
		"second data-pass": p2.dataPass, "second wait": p2.refresh,
	} {
		if u == "" {
			t.Fatalf("%s missing", name)
		}
		if other, dup := seen[u]; dup {
			t.Errorf("%s and %s share %s", name, other, u)
		}
		seen[u] = name
	}
	for i, p := range []pageURLs{p1, p2} {
		if p.dataWait != p.refresh || p.button != p.refresh {
			t.Errorf("page %d: meta refresh, data-wait and Continue differ: %+v", i+1, p)
		}
	}
	clk.Add(2 * time.Second)
	// The second visitor, without JavaScript, follows Continue.
	if w := do(c, bob, p2.button); w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/two" || passCookie(w) == nil {
		t.Fatalf("second visitor's Continue: status %d Location %q; reasons %v", w.Code, w.Header().Get("Location"), rp.failed)
	}
	// The first one solves the proof of work.
	q := mustQuery(t, p1.dataPass)
	tk, err := parseToken(q.Get("t"), c.tokenKeys)
	if err != nil {
		t.Fatal(err)
	}
	if w := do(c, alice, p1.dataPass+"&n="+formatNonces(solve(&tk))); w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/one" || passCookie(w) == nil {
		t.Fatalf("first visitor's proof of work: status %d; reasons %v", w.Code, rp.failed)
	}
	// The first one's wait, now over, works for them too; not for the second.
	if w := do(c, bob, p1.refresh); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), FailRoamed) {
		t.Errorf("first visitor's wait redeemed by the second: status %d", w.Code)
	}
	if w := do(c, alice, p1.refresh); w.Code != http.StatusSeeOther {
		t.Errorf("first visitor's wait: status %d", w.Code)
	}
}

// TestStatusCodes: challenge and deny pages answer 403 with Maat-Mitigated
// by default, the configured codes otherwise; short answers keep theirs.
func TestStatusCodes(t *testing.T) {
	t.Parallel()
	def, _ := newTest(t, nil)
	anubis, _ := newTest(t, func(cfg *Config) { cfg.ChallengeStatus, cfg.DenyStatus = 200, 200 })
	teapot, _ := newTest(t, func(cfg *Config) { cfg.ChallengeStatus, cfg.DenyStatus = 429, 451 })
	nav := func(method, accept string) *http.Request {
		r := httptest.NewRequest(method, "https://example.org/wiki/", nil)
		if accept != "" {
			r.Header.Set("Accept", accept)
			r.Header.Set("Sec-Fetch-Mode", "cors")
		}
		return r
	}
	tests := []struct {
		name      string
		c         *Challenger
		serve     func(c *Challenger, w http.ResponseWriter, r *http.Request)
		r         *http.Request
		status    int
		mitigated string
		wantHTML  bool
	}{
		{"challenge", def, challengeFn, nav("GET", ""), 403, "challenge", true},
		{"challenge 200", anubis, challengeFn, nav("GET", ""), 200, "challenge", true},
		{"challenge 429", teapot, challengeFn, nav("GET", ""), 429, "challenge", true},
		{"challenge for an API", anubis, challengeFn, nav("GET", "application/json"), 401, "challenge", false},
		{"challenge for a form post", def, challengeFn, nav("POST", ""), 401, "challenge", false},
		{"deny", def, denyFn, nav("GET", ""), 403, "deny", true},
		{"deny 200", anubis, denyFn, nav("GET", ""), 200, "deny", true},
		{"deny 451", teapot, denyFn, nav("GET", ""), 451, "deny", true},
		{"deny for an API", teapot, denyFn, nav("GET", "application/json"), 451, "deny", false},
		{"rate limited", teapot, func(c *Challenger, w http.ResponseWriter, r *http.Request) { c.RateLimited(w, r, "req", time.Second) }, nav("GET", ""), 429, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := httptest.NewRecorder()
			tt.serve(tt.c, w, tt.r)
			if w.Code != tt.status || w.Header().Get(MitigatedHeader) != tt.mitigated || isHTML(w) != tt.wantHTML {
				t.Errorf("status %d, %s %q, HTML %v; want %d, %q, %v", w.Code, MitigatedHeader, w.Header().Get(MitigatedHeader), isHTML(w), tt.status, tt.mitigated, tt.wantHTML)
			}
		})
	}
	for _, code := range []int{100, 204, 205, 301, 302, 304, 399, 600, -1} {
		if err := (&Config{Secret: testSecret, ChallengeStatus: code}).Validate(); err == nil {
			t.Errorf("challenge status %d accepted", code)
		}
		if err := (&Config{Secret: testSecret, DenyStatus: code}).Validate(); err == nil {
			t.Errorf("deny status %d accepted", code)
		}
	}
}

func challengeFn(c *Challenger, w http.ResponseWriter, r *http.Request) {
	c.Challenge(w, r, alice, Spec{Bits: 12, Wait: time.Second}, "req")
}

func denyFn(c *Challenger, w http.ResponseWriter, r *http.Request) { c.Deny(w, r, "req", "bad_ua") }

func TestPagesStatus(t *testing.T) {
	t.Parallel()
	c, _ := newTest(t, func(cfg *Config) { cfg.Contact = "ops@example.org" })
	tests := []struct {
		name   string
		serve  func(w http.ResponseWriter, r *http.Request)
		status int
		want   []string
	}{
		{"deny", func(w http.ResponseWriter, r *http.Request) { c.Deny(w, r, "req-3", "bad_ua") }, 403, []string{"Access denied", "req-3", "bad_ua", "ops@example.org"}},
		{"rate", func(w http.ResponseWriter, r *http.Request) { c.RateLimited(w, r, "req-4", 1500*time.Millisecond) }, 429, []string{"Too many requests", "2 seconds", "req-4"}},
		{"rate one second", func(w http.ResponseWriter, r *http.Request) { c.RateLimited(w, r, "req-5", time.Second) }, 429, []string{"1 second.", "req-5"}},
		{"502", func(w http.ResponseWriter, r *http.Request) { c.Error(w, r, 502, "req-6", "upstream_refused") }, 502, []string{"invalid answer", "not a problem with your browser", "upstream_refused"}},
		{"503", func(w http.ResponseWriter, r *http.Request) { c.Error(w, r, 503, "req-7", "overloaded") }, 503, []string{"temporarily unavailable"}},
		{"504", func(w http.ResponseWriter, r *http.Request) { c.Error(w, r, 504, "req-8", "upstream_timeout") }, 504, []string{"too long"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(http.MethodGet, "https://example.org/", nil)
			w := httptest.NewRecorder()
			tt.serve(w, r)
			if w.Code != tt.status || !isHTML(w) {
				t.Fatalf("status %d type %q", w.Code, w.Header().Get("Content-Type"))
			}
			for _, s := range tt.want {
				if !strings.Contains(w.Body.String(), s) {
					t.Errorf("page lacks %q:\n%s", s, w.Body)
				}
			}
			if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script-src") {
				t.Errorf("CSP %q", csp)
			}
			if tt.status == 429 && w.Header().Get("Retry-After") == "" {
				t.Error("no Retry-After")
			}
		})
	}
}

// TestPageSize holds the challenge page, with its inline solver, and what
// it loads (the worker, the WebAssembly search, the style sheet) to 20 KB
// gzipped, and the page alone to 5 KB: it is what every challenged
// request, a flood's included, gets.
func TestPageSize(t *testing.T) {
	t.Parallel()
	c, _ := newTest(t, nil)
	r := httptest.NewRequest(http.MethodGet, "https://example.org/", nil)
	r.Header.Set("Accept-Encoding", "gzip, br")
	w := httptest.NewRecorder()
	c.Challenge(w, r, alice, Spec{Wait: 5 * time.Second}, "req")
	if w.Header().Get("Content-Encoding") != "gzip" {
		t.Fatal("page not gzipped")
	}
	zr, err := gzip.NewReader(bytes.NewReader(w.Body.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil || !bytes.Contains(b, []byte("<!DOCTYPE html>")) {
		t.Fatalf("gunzip: %v", err)
	}
	if !bytes.Contains(b, []byte(c.assets["solve.js"].inline)) || bytes.Contains(b, []byte("// Maat challenge page")) {
		t.Error("the solver is not inlined")
	}
	page := w.Body.Len()
	total := page
	for _, name := range []string{"worker.js", "search.wasm", "maat.css"} {
		a := c.assets[name]
		if a.gz == nil {
			t.Fatalf("%s not precompressed", name)
		}
		total += len(a.gz)
	}
	t.Logf("challenge page: %d bytes gzipped; with worker, WebAssembly and CSS: %d", page, total)
	if page > 5*1024 || total > 20*1024 {
		t.Errorf("%d and %d bytes gzipped, budgets 5 KB and 20 KB", page, total)
	}
}

func TestTemplateDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "brand.html"), []byte(`{{define "brand"}}<img src="{{asset "logo.svg"}}" alt="Example Wiki">{{end}}`), 0o644)
	os.Mkdir(filepath.Join(dir, "static"), 0o755)
	os.WriteFile(filepath.Join(dir, "static", "logo.svg"), []byte(`<svg xmlns="http://www.w3.org/2000/svg"/>`), 0o644)
	c, _ := newTest(t, func(cfg *Config) { cfg.TemplateDir = dir })
	w := httptest.NewRecorder()
	c.Deny(w, httptest.NewRequest(http.MethodGet, "/", nil), "r", "x")
	if !strings.Contains(w.Body.String(), `alt="Example Wiki"`) || !strings.Contains(w.Body.String(), "/.maat/static/logo.svg?v=") {
		t.Errorf("override not used: %s", w.Body)
	}
	if w := do(c, alice, staticPrefix+"logo.svg"); w.Code != 200 {
		t.Errorf("logo: %d", w.Code)
	}

	bad := t.TempDir()
	os.WriteFile(filepath.Join(bad, "x.html"), []byte(`{{define "brand"}}{{end`), 0o644)
	if _, err := New(Config{Secret: testSecret, TemplateDir: bad}); err == nil {
		t.Error("broken template accepted")
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"minimal", Config{Secret: testSecret}, true},
		{"short secret", Config{Secret: []byte("short")}, false},
		{"negative ttl", Config{Secret: testSecret, PassTTL: -1}, false},
		{"wait too long", Config{Secret: testSecret, Wait: time.Hour}, false},
		{"bad signing key", Config{Secret: testSecret, SigningKey: []byte{1, 2}}, false},
		{"missing template dir", Config{Secret: testSecret, TemplateDir: "/nonexistent/maat"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if err := tt.cfg.Validate(); (err == nil) != tt.ok {
				t.Errorf("Validate() = %v", err)
			}
		})
	}
}

func TestParseBinding(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   []string
		want Binding
		ok   bool
	}{{nil, BindNone, true}, {[]string{"ip_prefix", "ja4"}, BindIPPrefix | BindJA4, true}, {[]string{"ja4"}, BindJA4, true}, {[]string{"asn"}, 0, false}} {
		got, err := ParseBinding(tt.in)
		if got != tt.want || (err == nil) != tt.ok {
			t.Errorf("ParseBinding(%v) = %v, %v", tt.in, got, err)
		}
	}
}

func TestFailurePagesForAPIs(t *testing.T) {
	t.Parallel()
	c, _ := newTest(t, nil)
	r := httptest.NewRequest(http.MethodPost, "https://example.org/api", nil)
	r.Header.Set("Accept", "application/json")
	for _, tt := range []struct {
		serve  func(http.ResponseWriter)
		status int
		code   string
	}{
		{func(w http.ResponseWriter) { c.Deny(w, r, "req-9", "bad_ua") }, 403, "bad_ua"},
		{func(w http.ResponseWriter) { c.RateLimited(w, r, "req-9", 3*time.Second) }, 429, "rate_limited"},
		{func(w http.ResponseWriter) { c.Error(w, r, 504, "req-9", "upstream_timeout") }, 504, "upstream_timeout"},
	} {
		w := httptest.NewRecorder()
		tt.serve(w)
		var v struct {
			Error     string `json:"error"`
			RequestID string `json:"request_id"`
		}
		if w.Code != tt.status || isHTML(w) || json.Unmarshal(w.Body.Bytes(), &v) != nil || v.Error != tt.code || v.RequestID != "req-9" {
			t.Errorf("status %d, body %s", w.Code, w.Body)
		}
	}
}

// TestRequestIDCopyable: the deny and challenge pages show the request ID
// under its localized label, in a <code> that one click or tap selects
// whole (user-select: all, in the style sheet: the deny page runs no
// script), equal to the X-Request-Id header.
func TestRequestIDCopyable(t *testing.T) {
	t.Parallel()
	c, _ := newTest(t, func(cfg *Config) { cfg.Messages = loadMessages(t) })
	css := string(c.assets["maat.css"].body)
	if !regexp.MustCompile(`\.rid\{[^}]*(^|;|\{)user-select:all`).MatchString(css) {
		t.Errorf("maat.css does not make .rid select whole:\n%s", css)
	}
	for _, tt := range []struct{ page, accept, label string }{
		{"deny", "en", "Request ID"}, {"deny", "de", "Anfrage-ID"},
		{"challenge", "en", "Request ID"}, {"challenge", "de", "Anfrage-ID"},
	} {
		t.Run(tt.page+" "+tt.accept, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(http.MethodGet, "https://example.org/x", nil)
			r.Header.Set("Sec-Fetch-Mode", "navigate")
			r.Header.Set("Accept-Language", tt.accept)
			w := httptest.NewRecorder()
			if tt.page == "deny" {
				c.Deny(w, r, "k3x9-1f", "bad_ua")
			} else {
				c.Challenge(w, r, alice, Spec{Bits: 12}, "k3x9-1f")
			}
			re := regexp.MustCompile(regexp.QuoteMeta(tt.label) + `(</dt><dd>|: )<code class="rid">([^<]*)</code>`)
			m := re.FindStringSubmatch(w.Body.String())
			if m == nil || m[2] != w.Header().Get("X-Request-Id") || m[2] != "k3x9-1f" {
				t.Errorf("ID shown %q, header %q; want k3x9-1f under %q:\n%s", m, w.Header().Get("X-Request-Id"), tt.label, w.Body.String())
			}
		})
	}
}

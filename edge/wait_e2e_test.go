package edge

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// weighedPolicy adds weight by path: /wN/ weighs N. Every request is
// challenged at 8 bits; fake_crawler adds nothing, so that only its being
// a lie keeps the wait from a fake crawler.
const weighedPolicy = `bots:
  - {name: w5, path_regex: ^/w5/, action: WEIGH, weight: {adjust: 5}}
  - {name: w10, path_regex: ^/w10/, action: WEIGH, weight: {adjust: 10}}
  - {name: w12, path_regex: ^/w12/, action: WEIGH, weight: {adjust: 12}}
  - {name: w15, path_regex: ^/w15/, action: WEIGH, weight: {adjust: 15}}
signals: {fake_crawler: 0}
thresholds:
  - {name: everyone, expression: weight < 1000, action: CHALLENGE, challenge: {algorithm: fast, bits: 8}}
`

// startWaitEdge runs weighedPolicy with challenge.wait set as wait says.
func startWaitEdge(t *testing.T, wait string) (*testEdge, string) {
	t.Helper()
	dir := t.TempDir()
	pol, fp := filepath.Join(dir, "policy.yaml"), filepath.Join(dir, "fp.jsonl")
	if err := os.WriteFile(pol, []byte(weighedPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	up := echoUpstream(t, "site")
	e := startEdge(t, "log: {fingerprints: "+fp+"}\npolicy: "+pol+"\nchallenge: {wait: "+wait+"}\n"+
		"sites: [{hosts: [localhost], upstream: "+up.URL+"}]\n")
	return e, fp
}

// noscriptRefresh is the no-JS wait's meta refresh and its seconds.
var noscriptRefresh = regexp.MustCompile(`http-equiv="refresh" content="(\d+); url=`)

// withUA is Chrome's navigation headers with another User-Agent.
func withUA(ua string) [][2]string {
	h := slices.Clone(chromeHeaders)
	for i := range h {
		if h[i][0] == "User-Agent" {
			h[i][1] = ua
		}
	}
	return h
}

// TestWaitBelowMaxWeight: with challenge.wait.max_weight 12, a browser
// whose fingerprints agree with its User-Agent is offered the no-JS wait
// below weight 12 and not at 12 or above, where the page says JavaScript
// is needed; the wait grows with the weight from duration (4s) towards
// twice that at max_weight. A client that claims Googlebot from an address
// that is not Google's (fake_crawler, a lie) never gets the wait, whatever
// its weight.
func TestWaitBelowMaxWeight(t *testing.T) {
	t.Parallel()
	e, fp := startWaitEdge(t, "{max_weight: 12, duration: 4s}")
	// 4s + 4s·weight/12, rounded up to whole seconds; 0: not offered.
	for _, tt := range []struct {
		path string
		secs int
	}{
		{"/w0/a", 4}, {"/w5/a", 6}, {"/w10/a", 8}, {"/w12/a", 0}, {"/w15/a", 0},
	} {
		res, body := chromeVisitor(t, e).get(e, tt.path)
		if res.StatusCode != http.StatusForbidden || res.Header.Get("Maat-Mitigated") != "challenge" {
			t.Fatalf("%s: %d %q, want a challenge", tt.path, res.StatusCode, res.Header.Get("Maat-Mitigated"))
		}
		p := parsePage(t, body)
		m := noscriptRefresh.FindStringSubmatch(body)
		switch {
		case tt.secs == 0 && (p.wait != "" || m != nil):
			t.Errorf("%s: the wait was offered at or above max_weight (%q)", tt.path, m)
		case tt.secs == 0 && !strings.Contains(body, "needs JavaScript"):
			t.Errorf("%s: without the wait, the page does not say JavaScript is needed", tt.path)
		case tt.secs > 0 && (p.wait == "" || m == nil):
			t.Errorf("%s: no wait offered below max_weight", tt.path)
		case tt.secs > 0 && m[1] != strconv.Itoa(tt.secs):
			t.Errorf("%s: a wait of %ss, want %ds", tt.path, m[1], tt.secs)
		}
	}

	// A Chrome User-Agent that names Googlebot, on Chrome's own TLS and
	// HTTP/2: the fingerprints agree with the browser it claims, its weight
	// is 0, and only the failed verification (fake_crawler) is against it.
	// The crawler's own User-Agent is a declared bot, never offered the wait.
	for _, tt := range []struct{ path, ua string }{
		{"/w0/fake-chrome-googlebot", "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/133.0.0.0 Safari/537.36 Googlebot"},
		{"/w0/fake-googlebot", googleUA},
	} {
		v := chromeVisitor(t, e)
		v.header = withUA(tt.ua)
		res, body := v.get(e, tt.path)
		if res.StatusCode != http.StatusForbidden {
			t.Fatalf("%s: %d, want a challenge", tt.path, res.StatusCode)
		}
		l := waitLine(t, fp, tt.path)
		if !slices.Contains(l.rules(), "fake_crawler") || l["weight"] != float64(0) {
			t.Fatalf("%s: rules %v weight %v: the test needs fake_crawler at weight 0", tt.path, l.rules(), l["weight"])
		}
		if p := parsePage(t, body); p.wait != "" || noscriptRefresh.MatchString(body) {
			t.Errorf("%s: a fake crawler was offered the wait", tt.path)
		}
	}
}

// passClaimsOf reads the claims of a pass cookie ("name=JWT") without
// verifying them: the test reads what the edge wrote.
func passClaimsOf(t *testing.T, cookie string) (method string, bits int) {
	t.Helper()
	_, jwt, _ := strings.Cut(cookie, "=")
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %q", cookie)
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Method string `json:"method"`
		Bits   int    `json:"bits"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	return c.Method, c.Bits
}

// TestWaitCookieIsNoProofOfWork: a pass cookie earned by waiting records
// method wait and 0 bits; it passes where the wait was offered, and not
// where a proof of work is asked without it (weight at max_weight): there
// the visitor is challenged again (reason wait_only), without the wait, and
// its solved proof of work earns a cookie that passes.
func TestWaitCookieIsNoProofOfWork(t *testing.T) {
	t.Parallel()
	e, _ := startWaitEdge(t, "{max_weight: 12, duration: 1s}")
	v := chromeVisitor(t, e)
	_, body := v.get(e, "/w0/a")
	p := parsePage(t, body)
	if p.wait == "" {
		t.Fatal("no wait offered at weight 0")
	}
	if !waitFor(t, 10*time.Second, func() bool {
		res, _ := v.get(e, p.wait)
		return res.StatusCode == http.StatusSeeOther
	}) || v.cookie == "" {
		t.Fatal("the wait never passed")
	}
	if m, bits := passClaimsOf(t, v.cookie); m != "wait" || bits != 0 {
		t.Errorf("the waited cookie says method %q, %d bits; want wait, 0", m, bits)
	}
	if res, body := v.get(e, "/w0/a"); res.StatusCode != http.StatusOK || !strings.Contains(body, "Path=/w0/a\n") {
		t.Errorf("the waited cookie where the wait is offered: %d", res.StatusCode)
	}

	waitOnly := e.Server.metrics.challenges.WithLabelValues("issued", "wait_only")
	before := counterValue(waitOnly)
	res, body := v.get(e, "/w15/b")
	if res.StatusCode != http.StatusForbidden || res.Header.Get("Maat-Mitigated") != "challenge" {
		t.Fatalf("the waited cookie where a proof of work is asked: %d, want a challenge", res.StatusCode)
	}
	if got := counterValue(waitOnly); got != before+1 {
		t.Errorf("challenges issued for wait_only: %v, want %v", got, before+1)
	}
	p = parsePage(t, body)
	if p.wait != "" || p.pass == "" {
		t.Fatalf("the step-up page offers the wait (%q) or no proof of work", p.wait)
	}
	if res, _ := v.get(e, p.pass+"&n="+p.solve()); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("the solved proof of work: %d", res.StatusCode)
	}
	if m, bits := passClaimsOf(t, v.cookie); m != "pow" || bits != p.bits {
		t.Errorf("the solved cookie says method %q, %d bits; want pow, %d", m, bits, p.bits)
	}
	if res, body := v.get(e, "/w15/b"); res.StatusCode != http.StatusOK || !strings.Contains(body, "Path=/w15/b\n") {
		t.Errorf("the proof-of-work cookie where it is asked: %d", res.StatusCode)
	}
}

package edge

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/maatproxy/maat/edge/config"
)

func TestSiteFeatures(t *testing.T) {
	t.Parallel()
	up := echoUpstream(t, "a")
	hash, _ := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	h := newTestHandlerEnv(t, fmt.Sprintf(`
sites:
  - hosts: [localhost, www.localhost]
    canonical: localhost
    upstream: %[1]s
    hsts: { max_age: 2h, include_subdomains: true }
    security_headers: true
    redirects:
      - { from: /old/, to: /new/ }
      - { from: /exact, to: /moved, status: 308 }
      - { from: /away, to: "https://example.org/x", status: 302 }
    headers:
      request:  { set: { X-Site: one }, remove: [Cookie] }
      response: { set: { X-Served-By: maat }, remove: [X-Upstream] }
    routes:
      - path: /private/
        upstream: %[1]s
        basic_auth: { realm: "Staff only", users: { alice: %[2]q } }
        headers:
          request: { add: { X-Route: private } }
  - hosts: [down.localhost]
    upstream: %[1]s
    maintenance: true
`, up.URL, hash), Env{HTTPSPort: "8443"})
	c := handlerClient(h, "h2")
	do := func(method, host, path string, hdr ...string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(method, handlerURL(path), nil)
		req.Host = host
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var b strings.Builder
		_, _ = fmt.Fprint(&b, readAll(res))
		return res, b.String()
	}
	p := "8443"

	t.Run("canonical host", func(t *testing.T) {
		res, _ := do("GET", "www.localhost", "/a?b=1")
		if res.StatusCode != 301 || res.Header.Get("Location") != "https://localhost:"+p+"/a?b=1" {
			t.Errorf("%d %q", res.StatusCode, res.Header.Get("Location"))
		}
	})
	t.Run("redirects", func(t *testing.T) {
		for _, tt := range []struct {
			method, path string
			status       int
			loc          string
		}{
			{"GET", "/old/page?q=1", 301, "/new/page?q=1"},
			{"POST", "/exact", 308, "/moved"},
			{"GET", "/exactly", 200, ""},
			{"GET", "/away", 302, "https://example.org/x"},
		} {
			res, _ := do(tt.method, "localhost", tt.path)
			if res.StatusCode != tt.status || res.Header.Get("Location") != tt.loc {
				t.Errorf("%s %s: %d %q, want %d %q", tt.method, tt.path, res.StatusCode, res.Header.Get("Location"), tt.status, tt.loc)
			}
		}
	})
	t.Run("headers", func(t *testing.T) {
		res, body := do("GET", "localhost", "/h", "Cookie", "a=b")
		if got := res.Header.Get("Strict-Transport-Security"); got != "max-age=7200; includeSubDomains" {
			t.Errorf("HSTS %q", got)
		}
		if res.Header.Get("X-Content-Type-Options") != "nosniff" || res.Header.Get("Referrer-Policy") == "" {
			t.Errorf("security headers missing: %v", res.Header)
		}
		if res.Header.Get("X-Served-By") != "maat" || res.Header.Get("X-Upstream") != "" {
			t.Errorf("response rules: %v", res.Header)
		}
		_ = body
		// HTTPS only: TestPort80RedirectsAndAdmin checks that port 80's
		// redirect goes without it.
	})
	t.Run("basic auth after policy", func(t *testing.T) {
		res, _ := do("GET", "localhost", "/private/x")
		if res.StatusCode != 401 || !strings.Contains(res.Header.Get("WWW-Authenticate"), `realm="Staff only"`) {
			t.Errorf("no credentials: %d %q", res.StatusCode, res.Header.Get("WWW-Authenticate"))
		}
		req, _ := http.NewRequest("GET", handlerURL("/private/x"), nil)
		req.Host = "localhost"
		req.SetBasicAuth("alice", "wrong")
		if res, err := c.Do(req); err != nil || res.StatusCode != 401 {
			t.Errorf("wrong password: %v %v", res, err)
		} else {
			res.Body.Close()
		}
		for range 2 { // the second time from the cache
			req.SetBasicAuth("alice", "s3cret")
			res, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			if res.StatusCode != 200 {
				t.Errorf("right password: %d", res.StatusCode)
			}
			res.Body.Close()
		}
	})
	t.Run("maintenance", func(t *testing.T) {
		res, body := do("GET", "down.localhost", "/")
		if res.StatusCode != 503 || res.Header.Get("Retry-After") == "" || !strings.Contains(body, "maintenance") {
			t.Errorf("%d %q", res.StatusCode, body)
		}
	})
}

// TestHeaderRulesReachUpstream checks what the upstream receives.
func TestHeaderRulesReachUpstream(t *testing.T) {
	t.Parallel()
	got := make(chan http.Header, 1)
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { got <- r.Header.Clone() })
	hd := newTestHandler(t, "sites: [{hosts: [localhost], upstream: "+up+", headers: {request: {set: {X-Site: one}, add: {X-Multi: b}, remove: [Cookie]}}}]\n")
	get(t, handlerClient(hd, "h1"), handlerURL("/"), "Cookie", "a=b", "X-Multi", "a")
	h := <-got
	if h.Get("X-Site") != "one" || h.Get("Cookie") != "" || strings.Join(h.Values("X-Multi"), ",") != "a,b" {
		t.Errorf("upstream saw %v", h)
	}
	if _, err := config.Parse("c", []byte("sites: [{hosts: [a], upstream: 'http://127.0.0.1:1', headers: {request: {set: {X-Maat-Action: ALLOW}}}}]\n")); err == nil {
		t.Error("a rule setting X-Maat-* was accepted")
	}
	if _, err := config.Parse("c", []byte("sites: [{hosts: [a], upstream: 'http://127.0.0.1:1', routes: [{path: /x/, upstream: 'http://127.0.0.1:1', basic_auth: {users: {bob: plaintext}}}]}]\n")); err == nil || !strings.Contains(err.Error(), "bcrypt") {
		t.Errorf("a plaintext password was accepted: %v", err)
	}
}

// TestOperatorPages: the operator's templates, contact and policy link show
// on the pages the edge serves (here a deny page for an AI crawler).
func TestOperatorPages(t *testing.T) {
	t.Parallel()
	up := echoUpstream(t, "a")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "brand.html"), []byte(`{{define "brand"}}<p class="brand">ACME Wiki</p>{{end}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	h := newTestHandler(t, "challenge: {template_dir: "+dir+", contact: wiki-admin@acme.test, policy_url: /about/bots}\n"+
		"sites: [{hosts: [localhost], upstream: "+up.URL+"}]\n")
	res, body := get(t, handlerClient(h, "h2"), handlerURL("/"), "User-Agent", gptUA, "Accept", "text/html", "Sec-Fetch-Mode", "navigate")
	if res.StatusCode != 403 {
		t.Fatalf("GPTBot: %d", res.StatusCode)
	}
	for _, want := range []string{"ACME Wiki", "wiki-admin@acme.test", `href="/about/bots"`} {
		if !strings.Contains(body, want) {
			t.Errorf("deny page lacks %q:\n%s", want, body)
		}
	}
}

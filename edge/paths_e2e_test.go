package edge

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

// pathsSite guards /admin/ with basic_auth (any case, the default) and
// sends /app/ (no password, in its case) and everything else to up; the
// policy lets every request through, so that only the routes decide.
func pathsSite(t *testing.T, up, adm string) string {
	t.Helper()
	pol := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(pol, []byte("bots:\n  - {name: everyone, path_regex: '.*', action: ALLOW}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hash, _ := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	return fmt.Sprintf(`
policy: %s
sites:
  - hosts: [localhost]
    upstream: %s
    compress: false
    routes:
      - { path: /app/, upstream: %[2]s }
      - path: /admin/
        upstream: %s
        basic_auth: { users: { alice: %q } }
`, pol, up, adm, hash)
}

// guardedSpellings are spellings of places under /admin/ that a common
// upstream serves as such (PHP, Tomcat, Node, IIS, a static server on a
// case-insensitive disk), and what the edge answers each: 401 (the
// password is asked for), 400 (refused: the path means different places to
// different upstreams, or is not UTF-8), or 301 to the path with a slash.
var guardedSpellings = []struct {
	path   string
	status int
	loc    string // the Location of a 301
}{
	{"/admin/secret", 401, ""},
	{"/ADMIN/secret", 401, ""},
	{"/Admin/secret", 401, ""},
	{"/aDmIn/secret", 401, ""},
	{"/admin", 301, "/admin/"},
	{"/ADMIN", 301, "/ADMIN/"},
	{"/admin?x=1&y=//evil.example", 301, "/admin/?x=1&y=//evil.example"},
	{"/admin;x", 301, "/admin;x/"},
	{"/admin;x/secret", 401, ""},
	{"/admin%3bx/secret", 401, ""},
	{"/;/admin/secret", 401, ""},
	{"/aDmIn;jsessionid=1/./secret", 401, ""},
	{"/x/..;/admin/secret", 400, ""},
	{"/x/..%3b/admin/secret", 400, ""},
	{"/admin./secret", 401, ""},
	{"/admin..;/secret", 401, ""},
	{"/admin%20/secret", 401, ""},
	{"/admin%E3%80%80/secret", 401, ""}, // ideographic space
	{"/admin::$INDEX_ALLOCATION/secret", 401, ""},
	{"/admin:$i30:$INDEX_ALLOCATION/secret", 401, ""},
	{"/%c0%afadmin/secret", 400, ""},
	{"/x/..%c0%afadmin/secret", 400, ""},
	{"/%e0%80%afadmin/secret", 400, ""},
	{"/admin%ff/secret", 400, ""},
	{"/%2e%2e/admin/secret", 401, ""},
	{"/x/%2e%2e/admin/secret", 401, ""},
	{"/x/%252e%252e/admin/secret", 400, ""},
	{"/%2561dmin/secret", 401, ""},
	{"/admin%2fsecret", 401, ""},
	{"/admin%252fsecret", 401, ""},
	{"/x%2f..%2fadmin/secret", 400, ""},
	{"/admin\\secret", 400, ""},
	{"/x/..%5cadmin/secret", 400, ""},
	{"//admin/secret", 401, ""},
	{"/./admin/secret", 401, ""},
	{"/%41DMIN/secret", 401, ""},
	{"/%EF%BD%81%EF%BD%84%EF%BD%8D%EF%BD%89%EF%BD%8E/secret", 401, ""}, // fullwidth admin
	{"/ａｄｍｉｎ/secret", 401, ""},
	{"/admin%EF%BC%8Fsecret", 401, ""}, // fullwidth solidus
	{"/x/%EF%BC%8E%EF%BC%8E/admin/secret", 400, ""},
	{"/ADM%C4%B0N/secret", 401, ""}, // İ, which folds to i
	{"/admin%09/secret", 400, ""},
	{"/admin%00/secret", 400, ""},
	{"/admin%2500/secret", 400, ""},
}

// honestPaths are what honest clients send (git's smart HTTP, feed
// readers, ACME and security.txt, wikis with UTF-8 titles, Java sessions
// in ";" parameters on a route without a password): each reaches the
// upstream exactly as sent.
var honestPaths = []string{
	"/public/x",
	"/repo.git/info/refs?service=git-upload-pack",
	"/repo.git/git-upload-pack",
	"/feed.xml", "/blog/index.rss", "/atom.xml?tag=go",
	"/.well-known/security.txt", "/.well-known/openid-configuration",
	"/wiki/%E6%97%A5%E6%9C%AC",
	"/wiki/%E6%97%A5%E6%9C%AC%EF%BC%88%E6%98%A0%E7%94%BB%EF%BC%89", // fullwidth parentheses
	"/wiki/Washington,_D.C.",
	"/wiki/Special:Random",
	"/app/page;jsessionid=0123ABCD",
	"/app;v=1/x",
	"/shop/item;color=red",
	"/administrator", "/admin-panel/", "/Admin.html",
	"/search/100%25",
	"/files/a%20b.txt",
}

// pathGet sends GET path (a request target as written) to the edge over
// proto and returns the status and Location.
func pathGet(t *testing.T, e *testEdge, c *http.Client, proto, target string) (int, string) {
	t.Helper()
	if proto == "h1" {
		res, _ := rawTLSExchange(t, e, "GET "+target+" HTTP/1.1\r\nHost: localhost\r\nUser-Agent: Go-http-client/1.1\r\nConnection: close\r\n\r\n")
		return res.StatusCode, res.Header.Get("Location")
	}
	req, err := http.NewRequest(http.MethodGet, e.url("/"), nil)
	if err != nil {
		t.Fatal(err)
	}
	path, query, _ := strings.Cut(target, "?")
	if strings.HasPrefix(path, "//") {
		req.URL.Path = path // RequestURI would make an Opaque "//x" absolute
	} else {
		req.URL.Opaque = path // sent as written
	}
	req.URL.RawQuery = query
	req.Host = "localhost"
	req.Header.Set("User-Agent", "Go-http-client/1.1")
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", proto, target, err)
	}
	res.Body.Close()
	return res.StatusCode, res.Header.Get("Location")
}

// TestPathSpellingsGuarded: every spelling of a place under /admin/ (a
// route with basic_auth) gets 401, 400 or the redirect to /admin/, over
// HTTP/1.1, HTTP/2 and HTTP/3 through a real edge, and neither upstream sees
// any of them; every honest path reaches the upstream exactly as sent.
func TestPathSpellingsGuarded(t *testing.T) {
	t.Parallel()
	up, adm := newRawUpstream(t), newRawUpstream(t)
	e := startEdge(t, pathsSite(t, up.URL, adm.URL))
	var mu sync.Mutex
	var want []string // request lines up must get
	t.Run("protocols", func(t *testing.T) {
		for _, proto := range []string{"h1", "h2", "h3"} {
			t.Run(proto, func(t *testing.T) {
				t.Parallel()
				var c *http.Client
				if proto != "h1" {
					c = e.client(t, proto)
				}
				for _, g := range guardedSpellings {
					status, loc := pathGet(t, e, c, proto, g.path)
					if status != g.status || loc != g.loc {
						t.Errorf("%s %s: %d %q, want %d %q", proto, g.path, status, loc, g.status, g.loc)
					}
				}
				for _, p := range honestPaths {
					if status, _ := pathGet(t, e, c, proto, p); status != http.StatusOK {
						t.Errorf("%s %s: %d, want 200", proto, p, status)
					}
					mu.Lock()
					want = append(want, "GET "+p+" HTTP/1.1")
					mu.Unlock()
				}
			})
		}
	})
	if heads := adm.heads(); len(heads) != 0 {
		t.Errorf("the guarded route's upstream got %d requests:\n%s", len(heads), strings.Join(heads, "\n"))
	}
	var got []string
	for _, head := range up.heads() {
		got = append(got, requestLine(head))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("the upstream got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

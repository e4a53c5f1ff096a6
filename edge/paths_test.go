package edge

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/maatproxy/maat/urlpath"
)

// getRaw sends GET target (as written on the wire) to h, with optional
// header lines.
func getRaw(t *testing.T, h http.Handler, target string, hdr ...string) (int, http.Header) {
	t.Helper()
	w := serveRaw(t, h, "GET "+target+" HTTP/1.1\r\nHost: localhost\r\nUser-Agent: Go-http-client/1.1\r\n"+strings.Join(hdr, "")+"\r\n")
	return w.Code, w.Header()
}

// TestGuardedSpellingsWithPassword: with the password, each spelling the
// edge asks a password for reaches the guarded route's upstream, and the
// upstream gets the request's normal form, as it did before the path model:
// the model decides, it does not rewrite.
func TestGuardedSpellingsWithPassword(t *testing.T) {
	t.Parallel()
	up, adm := newRawUpstream(t), newRawUpstream(t)
	h := newTestHandler(t, pathsSite(t, up.URL, adm.URL))
	var want []string
	for _, g := range guardedSpellings {
		if g.status != http.StatusUnauthorized {
			continue
		}
		status, _ := getRaw(t, h, g.path, "Authorization: Basic YWxpY2U6cHc=\r\n")
		if status != http.StatusOK {
			t.Errorf("%s with the password: %d", g.path, status)
		}
		norm, dec, err := urlpath.Normalize(g.path)
		if err != nil {
			t.Fatal(err)
		}
		// net/url escapes what was sent raw (UTF-8).
		want = append(want, "GET "+(&url.URL{Path: dec, RawPath: norm}).EscapedPath()+" HTTP/1.1")
	}
	var got []string
	for _, head := range adm.heads() {
		got = append(got, requestLine(head))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the guarded upstream got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if n := len(up.heads()); n != 0 {
		t.Errorf("the site's upstream got %d requests", n)
	}
}

// TestRouteMatchCase: a route with basic_auth matches in any case unless
// match_case: true; a route without matches in its case unless
// match_case: false; every route matches on the path's model.
func TestRouteMatchCase(t *testing.T) {
	t.Parallel()
	hash, _ := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	site := echoUpstream(t, "site").URL
	h := newTestHandler(t, fmt.Sprintf(`
policy: ""
sites:
  - hosts: [localhost]
    upstream: %s
    compress: false
    routes:
      - { path: /admin/, upstream: %s, basic_auth: { users: { alice: %q } } }
      - { path: /Staff/, upstream: %[2]s, match_case: true, basic_auth: { users: { alice: %[3]q } } }
      - { path: /api/, upstream: %s }
      - { path: /Docs/, upstream: %s, match_case: false }
`, site, echoUpstream(t, "admin").URL, hash, echoUpstream(t, "api").URL, echoUpstream(t, "docs").URL))
	for _, tt := range []struct {
		path, upstream string
		status         int
	}{
		{"/ADMIN/x", "", 401},
		{"/Staff/x", "", 401},
		{"/staff/x", "site", 200},
		{"/Staff;x/y", "", 401},
		{"/api/x", "api", 200},
		{"/API/x", "site", 200},
		{"/api;v=1/x", "api", 200},
		{"/api./x", "api", 200},
		{"/docs/x", "docs", 200},
		{"/DOCS./x", "docs", 200},
		{"/Docs/x", "docs", 200},
	} {
		t.Run(tt.path, func(t *testing.T) {
			t.Parallel()
			status, hdr := getRaw(t, h, tt.path)
			if status != tt.status || hdr.Get("X-Upstream") != tt.upstream {
				t.Errorf("%d from %q, want %d from %q", status, hdr.Get("X-Upstream"), tt.status, tt.upstream)
			}
		})
	}
}

// TestPolicySeesModel: a path rule of the policy holds for every spelling
// an upstream reads as its path, and sees the path in lower case on a
// route that matches in any case.
func TestPolicySeesModel(t *testing.T) {
	t.Parallel()
	pol := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(pol, []byte(`bots:
  - {name: no-secret, path_regex: ^/secret/, action: DENY}
  - {name: no-private, path_regex: ^/files/private/, action: DENY}
  - {name: robots, path_regex: ^/robots\.txt$, action: ALLOW}
  - {name: rest, path_regex: ., action: CHALLENGE}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	up := newRawUpstream(t)
	h := newTestHandler(t, fmt.Sprintf(`
policy: %s
sites:
  - hosts: [localhost]
    upstream: %s
    compress: false
    routes: [{ path: /files/, upstream: %[2]s, match_case: false }]
`, pol, up.URL))
	for _, tt := range []struct {
		path   string
		status int
		rule   string
	}{
		{"/secret/a", 403, "no-secret"},
		{"/secret;x/a", 403, "no-secret"},
		{"/secret./a", 403, "no-secret"},
		{"/secret%20/a", 403, "no-secret"},
		{"/%2573ecret/a", 403, "no-secret"},
		{"/x/..;/secret/a", 400, ""},
		{"/SECRET/a", 403, "challenge"}, // the default route matches in its case: so does the policy
		{"/FILES/Private/x", 403, "no-private"},
		{"/files/PRIVATE./x", 403, "no-private"},
		{"/robots.txt", 200, ""},
		{"/robots.txt;x", 200, ""},
		{"/robots.txt/..;/secret/a", 400, ""},
		{"/robots.txt%3b/../secret/a", 403, "no-secret"},
	} {
		t.Run(tt.path, func(t *testing.T) {
			t.Parallel()
			w := serveRaw(t, h, "GET "+tt.path+" HTTP/1.1\r\nHost: localhost\r\nUser-Agent: Go-http-client/1.1\r\n\r\n")
			if tt.rule == "challenge" {
				if w.Code != tt.status || w.Header().Get("Maat-Mitigated") != "challenge" {
					t.Errorf("%d %q, want %d and a challenge", w.Code, w.Header().Get("Maat-Mitigated"), tt.status)
				}
				return
			}
			if w.Code != tt.status || tt.rule != "" && !strings.Contains(w.Body.String(), tt.rule) {
				t.Errorf("%d, want %d by %q:\n%s", w.Code, tt.status, tt.rule, w.Body)
			}
		})
	}
}

// TestRedirectsReadModel: a redirect matches the path as forwarded or as
// read by lenient upstreams; the rest of a prefix comes from the path as
// forwarded when it matches (params and trailing dots kept); on a route
// that matches in any case a redirect does too, and never to the
// request's own path.
func TestRedirectsReadModel(t *testing.T) {
	t.Parallel()
	hash, _ := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	up := newRawUpstream(t)
	h := newTestHandler(t, fmt.Sprintf(`
policy: ""
sites:
  - hosts: [localhost]
    upstream: %s
    compress: false
    redirects:
      - { from: /old/, to: /new/ }
      - { from: /page, to: /other }
      - { from: /Admin/, to: /admin/ }
    routes:
      - { path: /admin/, upstream: %[1]s, basic_auth: { users: { alice: %q } } }
`, up.URL, hash))
	for _, tt := range []struct {
		path, loc string
		status    int
	}{
		{"/old/a", "/new/a", 301},
		{"/old/a;b", "/new/a;b", 301},
		{"/old/Washington,_D.C.", "/new/Washington,_D.C.", 301},
		{"/old;x/a", "/new/a", 301},
		{"/old./a", "/new/a", 301},
		{"/OLD/a", "", 200}, // the site's upstream matches in its case
		{"/page", "/other", 301},
		{"/page.", "/other", 301},
		{"/page;x?q=1", "/other?q=1", 301},
		{"/Admin/x", "/admin/x", 301},
		{"/ADMIN/x", "/admin/x", 301},
		{"/admin/x", "", 401},
		{"/admin", "/admin/", 301},
	} {
		t.Run(tt.path, func(t *testing.T) {
			t.Parallel()
			status, hdr := getRaw(t, h, tt.path)
			if status != tt.status || hdr.Get("Location") != tt.loc {
				t.Errorf("%d to %q, want %d to %q", status, hdr.Get("Location"), tt.status, tt.loc)
			}
		})
	}
}

// TestStaticRootGuarded: a static root under a route with basic_auth is
// guarded for every spelling of its place, even where the site's own root
// holds the same files.
func TestStaticRootGuarded(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "private"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "private", "secret.txt"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "index.html"), []byte("home"), 0o644); err != nil {
		t.Fatal(err)
	}
	hash, _ := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	h := newTestHandler(t, fmt.Sprintf(`
policy: ""
sites:
  - hosts: [localhost]
    root: %s
    compress: false
    routes:
      - { path: /private/, root: %[1]s, basic_auth: { users: { alice: %q } } }
`, root, hash))
	for _, p := range []string{"/private/secret.txt", "/PRIVATE/secret.txt", "/private;x/secret.txt", "/private./secret.txt", "/private%20/secret.txt", "/;/private/secret.txt"} {
		if status, _ := getRaw(t, h, p); status != http.StatusUnauthorized {
			t.Errorf("%s: %d, want 401", p, status)
		}
	}
	if status, _ := getRaw(t, h, "/private/secret.txt", "Authorization: Basic YWxpY2U6cHc=\r\n"); status != http.StatusOK {
		t.Errorf("with the password: %d", status)
	}
	if status, _ := getRaw(t, h, "/"); status != http.StatusOK {
		t.Errorf("the site's root: %d", status)
	}
}

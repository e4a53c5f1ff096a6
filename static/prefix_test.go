package static_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maatproxy/maat/static"
)

// writeTree writes files (name → content; a name ending in "/" is a
// directory) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if strings.HasSuffix(name, "/") {
			must(t, os.MkdirAll(p, 0o755))
			continue
		}
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(content), 0o644))
	}
}

// TestStripPrefix serves a route "/docs/" as nginx's alias (StripPrefix)
// and as nginx's root (the whole path under the root), with the handler
// as the server's own handler: paths reach it as sent. Redirects to a
// directory's slash keep the route's prefix.
func TestStripPrefix(t *testing.T) {
	t.Parallel()
	tree := map[string]string{"a.html": "<p>a", "sub/index.html": "<p>sub", "empty/": ""}
	alias := t.TempDir() // /srv/docs: the route's own files
	writeTree(t, alias, tree)
	site := t.TempDir() // /srv/site: the route's files under docs/
	writeTree(t, filepath.Join(site, "docs"), tree)
	writeTree(t, site, map[string]string{"top.html": "<p>top"})

	tests := []struct {
		name, strip, root, path string
		status                  int
		body, location          string // location: the path it resolves to
	}{
		{"alias file", "/docs/", alias, "/docs/a.html", 200, "<p>a", ""},
		{"alias index", "/docs/", alias, "/docs/sub/", 200, "<p>sub", ""},
		{"alias route index missing", "/docs/", alias, "/docs/", 404, "", ""},
		{"alias bare route", "/docs/", alias, "/docs", 301, "", "/docs/"},
		{"alias bare route query", "/docs/", alias, "/docs?x=1", 301, "", "/docs/?x=1"},
		{"alias dir", "/docs/", alias, "/docs/sub", 301, "", "/docs/sub/"},
		{"alias without slash", "/docs", alias, "/docs/a.html", 200, "<p>a", ""},
		{"alias without slash bare", "/docs", alias, "/docs", 301, "", "/docs/"},
		{"alias not a segment", "/docs", alias, "/docsa.html", 404, "", ""},
		{"alias not a segment slash", "/docs/", alias, "/docsx/a.html", 404, "", ""},
		{"alias outside", "/docs/", alias, "/a.html", 404, "", ""},
		{"alias dot dot", "/docs/", alias, "/docs/../docs/a.html", 404, "", ""},
		{"alias double slash", "/docs/", alias, "/docs//a.html", 404, "", ""},
		{"alias slash prefix", "/", alias, "/sub", 301, "", "/sub/"},
		{"root file", "", site, "/docs/a.html", 200, "<p>a", ""},
		{"root other file", "", site, "/top.html", 200, "<p>top", ""},
		{"root dir", "", site, "/docs/sub", 301, "", "/docs/sub/"},
		{"root route", "", site, "/docs", 301, "", "/docs/"},
		{"root route slash", "", site, "/docs/", 404, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, err := static.New(static.Config{Root: tt.root, StripPrefix: tt.strip})
			must(t, err)
			srv := httptest.NewServer(h)
			defer srv.Close()
			req, err := http.NewRequest("GET", srv.URL, nil)
			must(t, err)
			req.URL.Opaque = tt.path // sent as written
			resp, err := http.DefaultTransport.RoundTrip(req)
			must(t, err)
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			must(t, err)
			if resp.StatusCode != tt.status {
				t.Fatalf("GET %s = %d, want %d", tt.path, resp.StatusCode, tt.status)
			}
			if tt.body != "" && string(body) != tt.body {
				t.Fatalf("GET %s: body %q, want %q", tt.path, body, tt.body)
			}
			if tt.location == "" {
				return
			}
			loc, err := url.Parse(resp.Header.Get("Location"))
			must(t, err)
			if loc.IsAbs() || loc.Host != "" || strings.HasPrefix(loc.String(), "//") {
				t.Fatalf("Location %q is not a path on the site", loc)
			}
			base, err := url.Parse(srv.URL + tt.path)
			must(t, err)
			got := base.ResolveReference(loc)
			if got.RequestURI() != tt.location {
				t.Fatalf("GET %s: Location %q resolves to %s, want %s", tt.path, loc, got.RequestURI(), tt.location)
			}
		})
	}
}

package edge

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStaticRoutes serves files from root: routes: the
// prefix is taken off, conditionals, ranges and precompressed siblings work,
// and nothing outside the root is reachable.
func TestStaticRoutes(t *testing.T) {
	t.Parallel()
	up := echoUpstream(t, "a")
	dir := t.TempDir()
	root := filepath.Join(dir, "docs")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "sub"), 0o755))
	must(os.WriteFile(filepath.Join(root, "index.html"), []byte("<h1>docs</h1>"), 0o644))
	page := bytes.Repeat([]byte("static text, "), 200)
	must(os.WriteFile(filepath.Join(root, "page.txt"), page, 0o644))
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(page)
	_ = zw.Close()
	must(os.WriteFile(filepath.Join(root, "page.txt.gz"), gz.Bytes(), 0o644))
	must(os.WriteFile(filepath.Join(dir, "secret.txt"), []byte("outside"), 0o644))
	must(os.Symlink(filepath.Join(dir, "secret.txt"), filepath.Join(root, "escape.txt")))

	// /docs/ strips its prefix (nginx alias); /site/ looks the whole path
	// up under its root (nginx root, the default) and has a 404 page.
	www := filepath.Join(dir, "www")
	must(os.MkdirAll(filepath.Join(www, "site"), 0o755))
	must(os.WriteFile(filepath.Join(www, "site", "a.txt"), []byte("whole path"), 0o644))
	must(os.WriteFile(filepath.Join(www, "missing.html"), []byte("<h1>not here</h1>"), 0o644))
	h := newTestHandler(t, "sites: [{hosts: [localhost], upstream: "+up.URL+", security_headers: true, routes: ["+
		"{path: /docs/, root: "+root+", strip_prefix: true},"+
		"{path: /site/, root: "+www+", errors: {404: /missing.html}}]}]\n")
	c := handlerClient(h, "h2")
	do := func(path string, hdr ...string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest("GET", handlerURL(path), nil)
		req.Host = "localhost"
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		res, err := c.Do(req)
		must(err)
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, b
	}
	res, body := do("/docs/")
	if res.StatusCode != 200 || string(body) != "<h1>docs</h1>" || res.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("index: %d %q %v", res.StatusCode, body, res.Header)
	}
	res, body = do("/docs/page.txt")
	if res.StatusCode != 200 || !bytes.Equal(body, page) || res.Header.Get("ETag") == "" {
		t.Fatalf("file: %d, %d bytes", res.StatusCode, len(body))
	}
	if res, _ := do("/docs/page.txt", "If-None-Match", res.Header.Get("ETag")); res.StatusCode != 304 {
		t.Errorf("conditional: %d, want 304", res.StatusCode)
	}
	if res, body := do("/docs/page.txt", "Range", "bytes=0-5"); res.StatusCode != 206 || string(body) != "static" {
		t.Errorf("range: %d %q", res.StatusCode, body)
	}
	res, body = do("/docs/page.txt", "Accept-Encoding", "gzip")
	if res.Header.Get("Content-Encoding") != "gzip" || !bytes.Equal(body, gz.Bytes()) ||
		!strings.HasPrefix(res.Header.Get("Content-Type"), "text/plain") {
		t.Errorf("precompressed sibling: %q %q, %d bytes", res.Header.Get("Content-Encoding"), res.Header.Get("Content-Type"), len(body))
	}
	// Dot segments are resolved before the route is chosen: they leave the
	// /docs/ route for the upstream's /secret.txt, never the static root;
	// encoded slashes that would hide them are refused.
	for _, tt := range []struct {
		path, upstream string
		status         int
	}{
		{"/docs/../secret.txt", "/secret.txt", 200},
		{"/docs/%2e%2e/secret.txt", "/secret.txt", 200},
		{"/docs/escape.txt", "", 403}, // static refuses a symlink out of its root
		{"/docs/sub/..%2f..%2fsecret.txt", "", 400},
	} {
		res, body := do(tt.path)
		if bytes.Contains(body, []byte("outside")) || res.StatusCode != tt.status ||
			tt.upstream != "" && !strings.Contains(string(body), "Path="+tt.upstream+"\n") {
			t.Errorf("%s: %d %q, want %d from the upstream's %q", tt.path, res.StatusCode, body, tt.status, tt.upstream)
		}
	}
	if res, body := do("/site/a.txt"); res.StatusCode != 200 || string(body) != "whole path" {
		t.Errorf("a root that keeps the prefix: %d %q", res.StatusCode, body)
	}
	if res, body := do("/site/nothing"); res.StatusCode != 404 || string(body) != "<h1>not here</h1>" ||
		!strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		t.Errorf("the error page: %d %q %q", res.StatusCode, body, res.Header.Get("Content-Type"))
	}
	if res, body := do("/other"); res.StatusCode != 200 || !strings.Contains(string(body), "Path=/other") {
		t.Errorf("the upstream route: %d %q", res.StatusCode, body)
	}
}

// TestStaticNotFoundPage: a 404.html at the top of a static root answers
// that root's 404s, and only its 404s; errors: {404: …} wins over it; a
// 404.html outside the root (above it, or behind a symbolic link out of
// it) is never served, whatever the path.
func TestStaticNotFoundPage(t *testing.T) {
	t.Parallel()
	up := echoUpstream(t, "a")
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("404.html", "outside the roots")
	write("a/404.html", "<h1>A is not here</h1>")
	write("a/page.txt", "a page")
	write("b/404.html", "<h1>B default</h1>")
	write("b/custom.html", "<h1>B custom</h1>")
	write("c/page.txt", "c has no 404.html")
	write("d/page.txt", "d links to the outside 404.html")
	write("e/404.html", "<h1>E is not here</h1>")
	write("e/e/page.txt", "whole path")
	write("f/404.html", "<h1>F 404</h1>")
	write("f/405.html", "<h1>F 405</h1>")
	if err := os.Symlink(filepath.Join(dir, "404.html"), filepath.Join(dir, "d", "404.html")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "404.html"), filepath.Join(dir, "a", "escape.html")); err != nil {
		t.Fatal(err)
	}
	route := func(name, more string) string {
		return "{path: /" + name + "/, root: " + filepath.Join(dir, name) + more + "}"
	}
	h := newTestHandler(t, "sites: [{hosts: [localhost], upstream: "+up.URL+", routes: ["+
		route("a", ", strip_prefix: true")+", "+route("b", ", strip_prefix: true, errors: {404: /custom.html}")+", "+
		route("c", ", strip_prefix: true")+", "+route("d", ", strip_prefix: true")+", "+route("e", "")+", "+
		route("f", ", strip_prefix: true, errors: {405: /405.html}")+"]}]\n")
	c := handlerClient(h, "h2")
	for _, tt := range []struct {
		name, method, path string
		status             int
		body               string // "" = not a page of ours: the status text or the upstream
	}{
		{"the root's 404.html", "GET", "/a/nothing", 404, "<h1>A is not here</h1>"},
		{"HEAD", "HEAD", "/a/nothing", 404, ""}, // the page's headers, checked below
		{"a root that keeps the prefix", "GET", "/e/nothing", 404, "<h1>E is not here</h1>"},
		{"errors: wins", "GET", "/b/nothing", 404, "<h1>B custom</h1>"},
		{"errors: for another status", "GET", "/f/nothing", 404, "<h1>F 404</h1>"},
		{"errors: for another status, its page", "POST", "/f/nothing", 405, "<h1>F 405</h1>"},
		{"the file itself", "GET", "/a/404.html", 200, "<h1>A is not here</h1>"},
		{"not for 405", "POST", "/a/page.txt", 405, ""},
		{"not for 403", "GET", "/a/escape.html", 403, ""},
		{"not for 400", "GET", "/a/x/..%2f..%2fpage.txt", 400, ""},
		{"none in the root", "GET", "/c/nothing", 404, ""},
		{"a link out of the root", "GET", "/d/nothing", 404, ""},
		{"dot segments", "GET", "/c/../404.html", 200, ""},
		{"encoded dot segments", "GET", "/c/%2e%2e/404.html", 200, ""},
		{"an encoded slash", "GET", "/c/..%2f404.html", 400, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req, _ := http.NewRequest(tt.method, handlerURL(tt.path), nil)
			req.Host = "localhost"
			res, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			body := string(b)
			if res.StatusCode != tt.status || strings.Contains(body, "outside the roots") {
				t.Fatalf("%d %q, want %d", res.StatusCode, body, tt.status)
			}
			switch {
			case tt.body != "" && (body != tt.body || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html")):
				t.Errorf("%q (%s), want %q", body, res.Header.Get("Content-Type"), tt.body)
			case tt.body == "" && strings.Contains(body, "<h1>"):
				t.Errorf("a page answered: %q", body)
			case tt.method == "HEAD" && (res.ContentLength != int64(len("<h1>A is not here</h1>")) ||
				!strings.HasPrefix(res.Header.Get("Content-Type"), "text/html")):
				t.Errorf("HEAD: Content-Length %d, Content-Type %q: not the page's", res.ContentLength, res.Header.Get("Content-Type"))
			}
		})
	}
}

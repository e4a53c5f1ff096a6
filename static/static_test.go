package static_test

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maatproxy/maat/static"
)

// modTime is the modification time of every fixture file.
var modTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// site is a served temporary directory: root holds the files, and a secret
// lies next to root, outside it.
type site struct {
	dir, root string
	url       string // the server's URL with the route prefix "/site"
	client    *http.Client
}

// newSite writes files (name → content; a name ending in "/" is a
// directory) under a new root and serves it at /site/ on 127.0.0.1, with the
// prefix stripped: by the handler if cfg.StripPrefix is set (it must be
// "/site/" or "/site"), else by http.StripPrefix.
func newSite(t *testing.T, cfg static.Config, files map[string]string) *site {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	must(t, os.Mkdir(root, 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "secret.txt"), []byte("TOP SECRET"), 0o644))
	for name, content := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if strings.HasSuffix(name, "/") {
			must(t, os.MkdirAll(p, 0o755))
			continue
		}
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(content), 0o644))
		must(t, os.Chtimes(p, modTime, modTime))
	}
	cfg.Root = root
	h, err := static.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var handler http.Handler = h // no ServeMux: paths reach it as sent
	if cfg.StripPrefix == "" {
		handler = http.StripPrefix("/site", h)
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	// DisableCompression: the test sees Content-Encoding and the raw bytes.
	client := &http.Client{
		Transport:     &http.Transport{DisableCompression: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	t.Cleanup(client.CloseIdleConnections)
	return &site{dir: dir, root: root, url: srv.URL + "/site", client: client}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// get sends method to the raw request target path (sent as written, not
// cleaned by the client) with the given header lines "Key: value".
func (s *site) do(t *testing.T, method, path string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, s.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.URL.Opaque = strings.TrimPrefix(s.url, "http://"+req.URL.Host) + path
	for _, h := range header {
		k, v, _ := strings.Cut(h, ":")
		req.Header.Add(k, strings.TrimSpace(v))
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode >= 400 && bytes.Contains(body, []byte(s.dir)) {
		t.Errorf("%s %s: error body shows an internal path: %q", method, path, body)
	}
	return resp, body
}

func gz(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, err := zw.Write([]byte(s))
	must(t, err)
	must(t, zw.Close())
	return b.String()
}

const (
	helloHTML = "<!doctype html><title>hello</title>hello, world\n"
	appJS     = "console.log('the original, not compressed');\n"
)

func fixture(t *testing.T) map[string]string {
	return map[string]string{
		"index.html":                helloHTML,
		"hello.txt":                 "hello, world\n",
		"blob":                      "plain words without an extension\n",
		"bin":                       "\x00\x01\x02\x03binary",
		"blob.gz":                   gz(t, "plain words without an extension\n"),
		"app.js":                    appJS,
		"app.js.gz":                 gz(t, appJS),
		"app.js.zst":                "ZSTD BYTES",
		"style.css":                 "body{}",
		"style.css.br":              "BROTLI BYTES",
		"logo.png":                  "\x89PNG\r\n\x1a\nimage",
		"logo.png.gz":               "never served",
		"sub/index.html":            "<p>sub index</p>",
		"sub/page.html":             "<p>page</p>",
		"empty/":                    "",
		".env":                      "PASSWORD=x",
		".git/config":               "[core]",
		".well-known/security.txt":  "Contact: mailto:security@example.org\n",
		"docs/a <b>&'\".txt":        "a",
		"docs/b.txt":                "b",
		"docs/dir/":                 "",
		"docs/.hidden":              "h",
		"with space/file name.html": "spaced",
	}
}

type want struct {
	status int
	header map[string]string // "" means the header must be absent
	body   string            // compared when not empty
	in     string            // the body must contain it, when not empty
	not    string            // the body must not contain it, when not empty
}

func check(t *testing.T, resp *http.Response, body []byte, w want) {
	t.Helper()
	if resp.StatusCode != w.status {
		t.Errorf("status = %d, want %d (body %q)", resp.StatusCode, w.status, body)
	}
	for k, v := range w.header {
		if got := resp.Header.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if w.body != "" && string(body) != w.body {
		t.Errorf("body = %q, want %q", body, w.body)
	}
	if w.in != "" && !strings.Contains(string(body), w.in) {
		t.Errorf("body %q does not contain %q", body, w.in)
	}
	if w.not != "" && strings.Contains(string(body), w.not) {
		t.Errorf("body %q contains %q", body, w.not)
	}
}

// TestServe serves the fixture under the route /site/ with the prefix
// stripped by the caller (http.StripPrefix), and by the handler
// (Config.StripPrefix, with and without its trailing slash): the answers
// are the same.
func TestServe(t *testing.T) {
	t.Parallel()
	for _, strip := range []string{"", "/site/", "/site"} {
		t.Run("strip="+strip, func(t *testing.T) {
			t.Parallel()
			testServe(t, static.Config{Precompressed: true, StripPrefix: strip})
		})
	}
}

func testServe(t *testing.T, cfg static.Config) {
	s := newSite(t, cfg, fixture(t))
	must(t, os.Symlink("hello.txt", filepath.Join(s.root, "alias.txt")))
	must(t, os.Symlink("../secret.txt", filepath.Join(s.root, "out.txt")))
	must(t, os.Symlink("..", filepath.Join(s.root, "up")))
	must(t, os.Symlink(s.dir, filepath.Join(s.root, "abs")))
	lastMod := modTime.Format(http.TimeFormat)

	tests := []struct {
		name, method, path string
		header             []string
		want               want
	}{
		{name: "file", path: "/hello.txt", want: want{status: 200, body: "hello, world\n", header: map[string]string{
			"Content-Type": "text/plain; charset=utf-8", "Last-Modified": lastMod, "Content-Length": "13", "Accept-Ranges": "bytes"}}},
		{name: "html", path: "/sub/page.html", want: want{status: 200, body: "<p>page</p>", header: map[string]string{
			"Content-Type": "text/html; charset=utf-8"}}},
		{name: "css", path: "/style.css", want: want{status: 200, body: "body{}", header: map[string]string{
			"Content-Type": "text/css; charset=utf-8", "Vary": "Accept-Encoding", "Content-Encoding": ""}}},
		{name: "sniffed text", path: "/blob", want: want{status: 200, header: map[string]string{
			"Content-Type": "text/plain; charset=utf-8"}}},
		{name: "sniffed original of a sibling", path: "/blob", header: []string{"Accept-Encoding: gzip"}, want: want{status: 200, header: map[string]string{
			"Content-Type": "text/plain; charset=utf-8", "Content-Encoding": "gzip"}}},
		{name: "sniffed binary", path: "/bin", want: want{status: 200, header: map[string]string{
			"Content-Type": "application/octet-stream"}}},
		{name: "head", method: "HEAD", path: "/hello.txt", want: want{status: 200, header: map[string]string{
			"Content-Length": "13"}}},
		{name: "head precompressed", method: "HEAD", path: "/app.js", header: []string{"Accept-Encoding: zstd"}, want: want{status: 200, header: map[string]string{
			"Content-Length": "10", "Content-Encoding": "zstd", "Content-Type": "text/javascript; charset=utf-8"}}},
		{name: "root index", path: "/", want: want{status: 200, body: helloHTML}},
		{name: "route without slash", path: "", want: want{status: 301, header: map[string]string{"Location": "./site/"}}},
		{name: "route without slash query", path: "?x=1", want: want{status: 301, header: map[string]string{"Location": "./site/?x=1"}}},
		{name: "dir index", path: "/sub/", want: want{status: 200, body: "<p>sub index</p>", header: map[string]string{
			"Content-Type": "text/html; charset=utf-8"}}},
		{name: "dir redirect", path: "/sub", want: want{status: 301, header: map[string]string{"Location": "./sub/"}}},
		{name: "dir redirect query", path: "/sub?a=1&b", want: want{status: 301, header: map[string]string{"Location": "./sub/?a=1&b"}}},
		{name: "dir redirect escaped", path: "/with%20space", want: want{status: 301, header: map[string]string{"Location": "./with%20space/"}}},
		{name: "escaped name", path: "/with%20space/file%20name.html", want: want{status: 200, body: "spaced"}},
		{name: "file with slash", path: "/hello.txt/", want: want{status: 404}},
		{name: "missing", path: "/nope.html", want: want{status: 404, body: "404 Not Found\n"}},
		{name: "under a file", path: "/hello.txt/x", want: want{status: 404}},
		{name: "no index no listing", path: "/empty/", want: want{status: 404}},
		{name: "post", method: "POST", path: "/hello.txt", want: want{status: 405, header: map[string]string{"Allow": "GET, HEAD"}}},
		{name: "delete", method: "DELETE", path: "/", want: want{status: 405, header: map[string]string{"Allow": "GET, HEAD"}}},

		{name: "symlink inside", path: "/alias.txt", want: want{status: 200, body: "hello, world\n"}},
		{name: "dotfile", path: "/.env", want: want{status: 404, not: "PASSWORD"}},
		{name: "dot dir", path: "/.git/config", want: want{status: 404}},
		{name: "encoded dotfile", path: "/%2eenv", want: want{status: 404}},
		{name: "well-known", path: "/.well-known/security.txt", want: want{status: 200, in: "Contact:"}},

		{name: "traversal plain", path: "/../secret.txt", want: want{status: 404, not: "SECRET"}},
		{name: "traversal deep", path: "/sub/../../secret.txt", want: want{status: 404, not: "SECRET"}},
		{name: "traversal encoded", path: "/%2e%2e/secret.txt", want: want{status: 404, not: "SECRET"}},
		{name: "traversal encoded upper", path: "/%2E%2E/secret.txt", want: want{status: 404, not: "SECRET"}},
		{name: "traversal encoded slash", path: "/..%2fsecret.txt", want: want{status: 404, not: "SECRET"}},
		{name: "traversal double encoded", path: "/%252e%252e/secret.txt", want: want{status: 404, not: "SECRET"}},
		{name: "traversal double encoded slash", path: "/..%252fsecret.txt", want: want{status: 404, not: "SECRET"}},
		{name: "traversal backslash", path: `/..%5csecret.txt`, want: want{status: 404, not: "SECRET"}},
		{name: "traversal double slash", path: "//secret.txt", want: want{status: 404, not: "SECRET"}},
		{name: "nul", path: "/hello.txt%00.html", want: want{status: 400}},
		{name: "symlink file out", path: "/out.txt", want: want{status: 403, not: "SECRET"}},
		{name: "symlink dir out", path: "/up/secret.txt", want: want{status: 403, not: "SECRET"}},
		{name: "symlink absolute out", path: "/abs/secret.txt", want: want{status: 403, not: "SECRET"}},
		{name: "symlink out as dir", path: "/up/", want: want{status: 403}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			method := cmpOr(tt.method, "GET")
			resp, body := s.do(t, method, tt.path, tt.header...)
			check(t, resp, body, tt.want)
		})
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// TestVaryOnce: a Vary that a header rule set before the handler is kept,
// and Accept-Encoding is not repeated.
func TestVaryOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "a.css"), []byte("a{}"), 0o644))
	h, err := static.New(static.Config{Root: dir, Precompressed: true})
	must(t, err)
	for _, tt := range []struct {
		name         string
		before, want []string
	}{
		{"none", nil, []string{"Accept-Encoding"}},
		{"other", []string{"Origin"}, []string{"Origin", "Accept-Encoding"}},
		{"there", []string{"origin, accept-encoding"}, []string{"origin, accept-encoding"}},
		{"star", []string{"*"}, []string{"*"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := httptest.NewRecorder()
			rec.Header()["Vary"] = tt.before
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/a.css", nil))
			if got := rec.Header()["Vary"]; strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("Vary %q → %q, want %q", tt.before, got, tt.want)
			}
		})
	}
}

func TestConditional(t *testing.T) {
	t.Parallel()
	s := newSite(t, static.Config{Precompressed: true}, fixture(t))
	first, _ := s.do(t, "GET", "/hello.txt")
	etag := first.Header.Get("Etag")
	if !strings.HasPrefix(etag, `"`) || !strings.HasSuffix(etag, `"`) || len(etag) < 4 {
		t.Fatalf("ETag = %q, want a strong tag", etag)
	}
	gzFirst, _ := s.do(t, "GET", "/app.js", "Accept-Encoding: gzip")
	gzTag := gzFirst.Header.Get("Etag")
	if gzTag == "" || gzTag == etag {
		t.Fatalf("precompressed ETag = %q, want its own", gzTag)
	}
	before := modTime.Add(-time.Hour).Format(http.TimeFormat)
	after := modTime.Add(time.Hour).Format(http.TimeFormat)

	tests := []struct {
		name   string
		path   string
		header []string
		status int
	}{
		{"if-none-match hit", "/hello.txt", []string{"If-None-Match: " + etag}, 304},
		{"if-none-match list", "/hello.txt", []string{`If-None-Match: "x", ` + etag}, 304},
		{"if-none-match star", "/hello.txt", []string{"If-None-Match: *"}, 304},
		{"if-none-match miss", "/hello.txt", []string{`If-None-Match: "other"`}, 200},
		{"if-modified-since same", "/hello.txt", []string{"If-Modified-Since: " + modTime.Format(http.TimeFormat)}, 304},
		{"if-modified-since after", "/hello.txt", []string{"If-Modified-Since: " + after}, 304},
		{"if-modified-since before", "/hello.txt", []string{"If-Modified-Since: " + before}, 200},
		{"if-none-match wins over if-modified-since", "/hello.txt", []string{`If-None-Match: "other"`, "If-Modified-Since: " + after}, 200},
		{"if-match hit", "/hello.txt", []string{"If-Match: " + etag}, 200},
		{"if-match miss", "/hello.txt", []string{`If-Match: "other"`}, 412},
		{"if-unmodified-since before", "/hello.txt", []string{"If-Unmodified-Since: " + before}, 412},
		{"if-unmodified-since after", "/hello.txt", []string{"If-Unmodified-Since: " + after}, 200},
		{"precompressed 304", "/app.js", []string{"Accept-Encoding: gzip", "If-None-Match: " + gzTag}, 304},
		{"precompressed tag for identity", "/app.js", []string{"If-None-Match: " + gzTag}, 200},
		{"index 304", "/", []string{"If-None-Match: " + mustTag(t, s, "/")}, 304},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp, body := s.do(t, "GET", tt.path, tt.header...)
			if resp.StatusCode != tt.status {
				t.Fatalf("status = %d, want %d", resp.StatusCode, tt.status)
			}
			if tt.status == 304 {
				if len(body) != 0 {
					t.Errorf("304 with a body: %q", body)
				}
				if resp.Header.Get("Etag") == "" {
					t.Errorf("304 without ETag")
				}
				if resp.Header.Get("Vary") != "Accept-Encoding" {
					t.Errorf("304 Vary = %q", resp.Header.Get("Vary"))
				}
			}
		})
	}
}

func mustTag(t *testing.T, s *site, path string) string {
	t.Helper()
	resp, _ := s.do(t, "GET", path)
	tag := resp.Header.Get("Etag")
	if tag == "" {
		t.Fatalf("GET %s: no ETag", path)
	}
	return tag
}

func TestRange(t *testing.T) {
	t.Parallel()
	s := newSite(t, static.Config{Precompressed: true}, fixture(t))
	const text = "hello, world\n"
	etag := mustTag(t, s, "/hello.txt")

	t.Run("single", func(t *testing.T) {
		t.Parallel()
		resp, body := s.do(t, "GET", "/hello.txt", "Range: bytes=7-11")
		check(t, resp, body, want{status: 206, body: "world", header: map[string]string{
			"Content-Range": "bytes 7-11/13", "Content-Length": "5", "Content-Type": "text/plain; charset=utf-8"}})
	})
	t.Run("suffix", func(t *testing.T) {
		t.Parallel()
		resp, body := s.do(t, "GET", "/hello.txt", "Range: bytes=-6")
		check(t, resp, body, want{status: 206, body: "world\n", header: map[string]string{"Content-Range": "bytes 7-12/13"}})
	})
	t.Run("if-range match", func(t *testing.T) {
		t.Parallel()
		resp, body := s.do(t, "GET", "/hello.txt", "Range: bytes=0-4", "If-Range: "+etag)
		check(t, resp, body, want{status: 206, body: "hello"})
	})
	t.Run("if-range stale", func(t *testing.T) {
		t.Parallel()
		resp, body := s.do(t, "GET", "/hello.txt", "Range: bytes=0-4", `If-Range: "old"`)
		check(t, resp, body, want{status: 200, body: text})
	})
	t.Run("unsatisfiable", func(t *testing.T) {
		t.Parallel()
		resp, body := s.do(t, "GET", "/hello.txt", "Range: bytes=100-200")
		check(t, resp, body, want{status: 416, header: map[string]string{"Content-Range": "bytes */13"}})
	})
	t.Run("multiple", func(t *testing.T) {
		t.Parallel()
		resp, body := s.do(t, "GET", "/hello.txt", "Range: bytes=0-4,7-11")
		if resp.StatusCode != 206 {
			t.Fatalf("status = %d, want 206", resp.StatusCode)
		}
		mt, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
		if err != nil || mt != "multipart/byteranges" {
			t.Fatalf("Content-Type = %q, want multipart/byteranges", resp.Header.Get("Content-Type"))
		}
		mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
		var parts []string
		for {
			p, err := mr.NextPart()
			if errors.Is(err, io.EOF) {
				break
			}
			must(t, err)
			b, err := io.ReadAll(p)
			must(t, err)
			if ct := p.Header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
				t.Errorf("part Content-Type = %q", ct)
			}
			parts = append(parts, p.Header.Get("Content-Range")+" "+string(b))
		}
		if got, want := strings.Join(parts, "|"), "bytes 0-4/13 hello|bytes 7-11/13 world"; got != want {
			t.Errorf("parts = %q, want %q", got, want)
		}
	})
	t.Run("precompressed range", func(t *testing.T) {
		t.Parallel()
		resp, body := s.do(t, "GET", "/app.js", "Accept-Encoding: zstd", "Range: bytes=0-3")
		check(t, resp, body, want{status: 206, body: "ZSTD", header: map[string]string{
			"Content-Encoding": "zstd", "Content-Range": "bytes 0-3/10"}})
	})
}

func TestPrecompressed(t *testing.T) {
	t.Parallel()
	on := newSite(t, static.Config{Precompressed: true}, fixture(t))
	off := newSite(t, static.Config{}, fixture(t))
	const js = "text/javascript; charset=utf-8"
	zst := len("ZSTD BYTES")

	tests := []struct {
		name string
		s    *site
		path string
		ae   string
		enc  string // expected Content-Encoding, "" = identity
		vary string
	}{
		{"gzip", on, "/app.js", "gzip", "gzip", "Accept-Encoding"},
		{"zstd preferred on a tie", on, "/app.js", "gzip, deflate, br, zstd", "zstd", "Accept-Encoding"},
		{"q-value decides", on, "/app.js", "zstd;q=0.5, gzip", "gzip", "Accept-Encoding"},
		{"refused coding", on, "/app.js", "zstd;q=0, gzip;q=0", "", "Accept-Encoding"},
		{"star", on, "/app.js", "*", "zstd", "Accept-Encoding"},
		{"no sibling for coding", on, "/app.js", "br", "", "Accept-Encoding"},
		{"brotli", on, "/style.css", "br, gzip", "br", "Accept-Encoding"},
		{"no accept-encoding", on, "/app.js", "", "", "Accept-Encoding"},
		{"off", off, "/app.js", "gzip, zstd", "", ""},
		{"compressed format", on, "/logo.png", "gzip", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var hdr []string
			if tt.ae != "" {
				hdr = append(hdr, "Accept-Encoding: "+tt.ae)
			}
			resp, body := tt.s.do(t, "GET", tt.path, hdr...)
			if resp.StatusCode != 200 {
				t.Fatalf("status = %d", resp.StatusCode)
			}
			if got := resp.Header.Get("Content-Encoding"); got != tt.enc {
				t.Errorf("Content-Encoding = %q, want %q", got, tt.enc)
			}
			if got := resp.Header.Get("Vary"); got != tt.vary {
				t.Errorf("Vary = %q, want %q", got, tt.vary)
			}
			if resp.ContentLength != int64(len(body)) {
				t.Errorf("Content-Length = %d, body %d bytes", resp.ContentLength, len(body))
			}
			if tt.path != "/app.js" {
				return
			}
			if got := resp.Header.Get("Content-Type"); got != js {
				t.Errorf("Content-Type = %q, want the original's %q", got, js)
			}
			switch tt.enc {
			case "gzip":
				zr, err := gzip.NewReader(bytes.NewReader(body))
				must(t, err)
				plain, err := io.ReadAll(zr)
				must(t, err)
				if string(plain) != appJS {
					t.Errorf("decompressed = %q, want %q", plain, appJS)
				}
			case "zstd":
				if len(body) != zst {
					t.Errorf("body = %q, want the .zst file", body)
				}
			case "":
				if string(body) != appJS {
					t.Errorf("body = %q, want the original", body)
				}
			}
		})
	}
}

func TestIndexFiles(t *testing.T) {
	t.Parallel()
	files := map[string]string{"a/index.htm": "htm", "a/default.html": "default", "b/index.html": "html"}
	tests := []struct {
		name  string
		index []string
		path  string
		want  want
	}{
		{"default", nil, "/b/", want{status: 200, body: "html"}},
		{"default misses", nil, "/a/", want{status: 404}},
		{"first found", []string{"index.html", "index.htm", "default.html"}, "/a/", want{status: 200, body: "htm",
			header: map[string]string{"Content-Type": "text/html; charset=utf-8"}}},
		{"disabled", []string{}, "/b/", want{status: 404}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newSite(t, static.Config{Index: tt.index}, files)
			resp, body := s.do(t, "GET", tt.path)
			check(t, resp, body, tt.want)
		})
	}
}

// TestRootSwap shows that the root is opened per request: a deployment that
// repoints a symbolic link is served at once.
func TestRootSwap(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, r := range []string{"v1", "v2"} {
		must(t, os.MkdirAll(filepath.Join(dir, r), 0o755))
		must(t, os.WriteFile(filepath.Join(dir, r, "index.html"), []byte(r), 0o644))
	}
	cur := filepath.Join(dir, "current")
	must(t, os.Symlink("v1", cur))
	h, err := static.New(static.Config{Root: cur})
	must(t, err)
	get := func() string {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		return rec.Body.String()
	}
	if got := get(); got != "v1" {
		t.Fatalf("before = %q", got)
	}
	must(t, os.Symlink("v2", cur+".new"))
	must(t, os.Rename(cur+".new", cur))
	if got := get(); got != "v2" {
		t.Fatalf("after = %q", got)
	}
	must(t, os.RemoveAll(filepath.Join(dir, "v2")))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != 404 || strings.Contains(rec.Body.String(), dir) {
		t.Errorf("root gone: %d %q", rec.Code, rec.Body)
	}
}

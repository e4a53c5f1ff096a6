package static_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/maatproxy/maat/static"
)

const (
	notFoundHTML  = "<!doctype html><title>Not here</title><h1>Nothing here</h1>\n"
	forbiddenHTML = "<!doctype html><h1>Not for you</h1>\n"
)

func TestErrorPages(t *testing.T) {
	t.Parallel()
	files := fixture(t)
	files["404.html"] = notFoundHTML
	files["errors/403.html"] = forbiddenHTML
	cfg := static.Config{Precompressed: true, StripPrefix: "/site/", ErrorPages: map[int]string{
		404: "404.html", 403: "/errors/403.html",
	}}
	s := newSite(t, cfg, files)
	must(t, os.Symlink("../secret.txt", filepath.Join(s.root, "out.txt")))
	page := func(status int, body string) want {
		return want{status: status, body: body, header: map[string]string{
			"Content-Type": "text/html; charset=utf-8", "Content-Length": strconv.Itoa(len(body)),
			"Etag": "", "Last-Modified": "", "Content-Encoding": "", "Content-Range": "",
		}}
	}
	tests := []struct {
		name, method, path string
		header             []string
		want               want
	}{
		{name: "missing", path: "/nope.html", want: page(404, notFoundHTML)},
		{name: "missing head", method: "HEAD", path: "/nope.html", want: want{status: 404, header: map[string]string{
			"Content-Type": "text/html; charset=utf-8", "Content-Length": strconv.Itoa(len(notFoundHTML))}}},
		{name: "missing with range", path: "/nope.html", header: []string{"Range: bytes=0-3"}, want: page(404, notFoundHTML)},
		{name: "missing conditional", path: "/nope.html", header: []string{"If-None-Match: *"}, want: page(404, notFoundHTML)},
		{name: "missing accepting gzip", path: "/nope.js", header: []string{"Accept-Encoding: gzip"}, want: page(404, notFoundHTML)},
		{name: "dotfile", path: "/.env", want: page(404, notFoundHTML)},
		{name: "traversal", path: "/../secret.txt", want: page(404, notFoundHTML)},
		{name: "outside the prefix", path: "x/hello.txt", want: page(404, notFoundHTML)}, // /sitex/hello.txt
		{name: "dir without index", path: "/empty/", want: page(404, notFoundHTML)},
		{name: "file with slash", path: "/hello.txt/", want: page(404, notFoundHTML)},
		{name: "symlink out", path: "/out.txt", want: page(403, forbiddenHTML)},
		{name: "no page for 405", method: "POST", path: "/hello.txt", want: want{status: 405, body: "405 Method Not Allowed\n",
			header: map[string]string{"Allow": "GET, HEAD", "Content-Type": "text/plain; charset=utf-8"}}},
		{name: "no page for 400", path: "/a%00b", want: want{status: 400, body: "400 Bad Request\n"}},
		{name: "the page itself", path: "/404.html", want: want{status: 200, body: notFoundHTML}},
		{name: "found", path: "/hello.txt", want: want{status: 200, body: "hello, world\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp, body := s.do(t, cmpOr(tt.method, "GET"), tt.path, tt.header...)
			check(t, resp, body, tt.want)
			if tt.method == "HEAD" && len(body) != 0 {
				t.Errorf("HEAD with a body: %q", body)
			}
		})
	}
}

// TestErrorPageGone: an error page that disappears, turns into a
// directory or a link out of the root after New is not served, and does not
// send the handler looking for an error page of its own: the status text
// answers.
func TestErrorPageGone(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		spoil func(t *testing.T, s *site, page string)
	}{
		{"removed", func(t *testing.T, _ *site, page string) { must(t, os.Remove(page)) }},
		{"directory", func(t *testing.T, _ *site, page string) {
			must(t, os.Remove(page))
			must(t, os.Mkdir(page, 0o755))
		}},
		{"link out", func(t *testing.T, _ *site, page string) {
			must(t, os.Remove(page))
			must(t, os.Symlink("../secret.txt", page))
		}},
		{"link to a missing file", func(t *testing.T, s *site, page string) {
			must(t, os.Remove(page))
			must(t, os.Symlink("nope.html", page))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			files := map[string]string{"404.html": notFoundHTML, "a.txt": "a"}
			s := newSite(t, static.Config{ErrorPages: map[int]string{404: "404.html"}}, files)
			if resp, body := s.do(t, "GET", "/nope"); resp.StatusCode != 404 || string(body) != notFoundHTML {
				t.Fatalf("before: %d %q", resp.StatusCode, body)
			}
			tt.spoil(t, s, filepath.Join(s.root, "404.html"))
			resp, body := s.do(t, "GET", "/nope")
			check(t, resp, body, want{status: 404, body: "404 Not Found\n", not: "SECRET",
				header: map[string]string{"Content-Type": "text/plain; charset=utf-8"}})
		})
	}
}

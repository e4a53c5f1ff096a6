package static_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maatproxy/maat/static"
)

func TestListing(t *testing.T) {
	t.Parallel()
	on := newSite(t, static.Config{Listing: true}, fixture(t))
	must(t, os.Symlink("../../secret.txt", filepath.Join(on.root, "docs", "out.txt")))
	off := newSite(t, static.Config{}, fixture(t))

	resp, body := on.do(t, "GET", "/docs/")
	check(t, resp, body, want{status: 200, header: map[string]string{"Content-Type": "text/html; charset=utf-8"}})
	page := string(body)
	for _, s := range []string{
		`<a href="../">`,
		`href="./dir/">dir/</a>`,
		`a &lt;b&gt;&amp;&#39;&#34;.txt</a>`,
		`href="./a%20%3Cb%3E&amp;%27%22.txt"`,
		`href="./b.txt">b.txt</a>`,
	} {
		if !strings.Contains(page, s) {
			t.Errorf("listing lacks %q:\n%s", s, page)
		}
	}
	for _, s := range []string{".hidden", "out.txt", "<b>", on.dir} {
		if strings.Contains(page, s) {
			t.Errorf("listing shows %q:\n%s", s, page)
		}
	}
	// Directories first, then files by name.
	if d, a, b := strings.Index(page, "dir/<"), strings.Index(page, "a &lt;b"), strings.Index(page, ">b.txt<"); !(d < a && a < b) {
		t.Errorf("listing order: dir at %d, a at %d, b at %d", d, a, b)
	}

	t.Run("index wins", func(t *testing.T) {
		t.Parallel()
		resp, body := on.do(t, "GET", "/sub/")
		check(t, resp, body, want{status: 200, body: "<p>sub index</p>"})
	})
	t.Run("empty dir", func(t *testing.T) {
		t.Parallel()
		resp, body := on.do(t, "GET", "/empty/")
		check(t, resp, body, want{status: 200, not: "<a href=\"./"})
	})
	t.Run("head", func(t *testing.T) {
		t.Parallel()
		resp, body := on.do(t, "HEAD", "/docs/")
		check(t, resp, body, want{status: 200, header: map[string]string{"Content-Type": "text/html; charset=utf-8"}})
	})
	t.Run("off", func(t *testing.T) {
		t.Parallel()
		resp, body := off.do(t, "GET", "/docs/")
		check(t, resp, body, want{status: 404, not: "b.txt"})
	})
	t.Run("dotdir", func(t *testing.T) {
		t.Parallel()
		resp, body := on.do(t, "GET", "/.git/")
		check(t, resp, body, want{status: 404})
	})
}

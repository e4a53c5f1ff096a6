//go:build unix

package static_test

import (
	"path/filepath"
	"syscall"
	"testing"

	"github.com/maatproxy/maat/static"
)

// TestSpecialFiles: a FIFO in the root is 404 and does not block the
// request (opening it would wait for a writer).
func TestSpecialFiles(t *testing.T) {
	t.Parallel()
	s := newSite(t, static.Config{Listing: true}, map[string]string{"d/": ""})
	must(t, syscall.Mkfifo(filepath.Join(s.root, "fifo"), 0o644))
	must(t, syscall.Mkfifo(filepath.Join(s.root, "d", "index.html"), 0o644))
	for _, p := range []string{"/fifo", "/fifo/"} {
		resp, body := s.do(t, "GET", p)
		check(t, resp, body, want{status: 404})
	}
	// An index that is not a regular file is skipped: the listing is shown.
	resp, body := s.do(t, "GET", "/d/")
	check(t, resp, body, want{status: 200, in: "index.html"})
}

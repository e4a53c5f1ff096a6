package static_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/maatproxy/maat/static"
)

func TestValidate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	must(t, os.WriteFile(file, nil, 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "404.html"), nil, 0o644))
	must(t, os.MkdirAll(filepath.Join(dir, "errors", "dir"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "errors", "500.html"), nil, 0o644))
	must(t, os.WriteFile(filepath.Join(dir, ".hidden.html"), nil, 0o644))
	must(t, os.Symlink(filepath.Join(t.TempDir(), "secret.html"), filepath.Join(dir, "out.html")))
	pages := func(m map[int]string) static.Config { return static.Config{Root: dir, ErrorPages: m} }
	tests := []struct {
		name string
		cfg  static.Config
		errs []error
	}{
		{"ok", static.Config{Root: dir}, nil},
		{"ok index", static.Config{Root: dir, Index: []string{"index.html", "index.htm"}}, nil},
		{"no root", static.Config{}, []error{static.ErrNoRoot}},
		{"missing root", static.Config{Root: filepath.Join(dir, "nope")}, []error{static.ErrRoot, fs.ErrNotExist}},
		{"root is a file", static.Config{Root: file}, []error{static.ErrRoot}},
		{"bad index and root together", static.Config{Root: file, Index: []string{"../x", ".env", "", "a/b"}},
			[]error{static.ErrRoot, static.ErrBadIndex}},
		{"strip prefix", static.Config{Root: dir, StripPrefix: "/docs/"}, nil},
		{"strip prefix without slash", static.Config{Root: dir, StripPrefix: "/docs"}, nil},
		{"strip prefix slash", static.Config{Root: dir, StripPrefix: "/"}, nil},
		{"strip prefix relative", static.Config{Root: dir, StripPrefix: "docs/"}, []error{static.ErrStripPrefix}},
		{"strip prefix dot dot", static.Config{Root: dir, StripPrefix: "/docs/../x/"}, []error{static.ErrStripPrefix}},
		{"strip prefix double slash", static.Config{Root: dir, StripPrefix: "/docs//"}, []error{static.ErrStripPrefix}},
		{"max ranges", static.Config{Root: dir, MaxRanges: 5}, nil},
		{"max ranges negative", static.Config{Root: dir, MaxRanges: -1}, []error{static.ErrMaxRanges}},
		{"error pages", pages(map[int]string{404: "404.html", 500: "/errors/500.html", 403: "404.html"}), nil},
		{"error page missing", pages(map[int]string{404: "nope.html"}), []error{static.ErrErrorPage, fs.ErrNotExist}},
		{"error page status", pages(map[int]string{502: "404.html"}), []error{static.ErrErrorPage}},
		{"error page out of the root", pages(map[int]string{404: "../404.html"}), []error{static.ErrErrorPage}},
		{"error page link out of the root", pages(map[int]string{404: "out.html"}), []error{static.ErrErrorPage}},
		{"error page directory", pages(map[int]string{404: "errors/dir"}), []error{static.ErrErrorPage}},
		{"error page dotfile", pages(map[int]string{404: ".hidden.html"}), []error{static.ErrErrorPage}},
		{"error page root", pages(map[int]string{404: "/"}), []error{static.ErrErrorPage}},
		{"everything wrong", static.Config{Root: dir, StripPrefix: "x", MaxRanges: -2, ErrorPages: map[int]string{200: "404.html"}},
			[]error{static.ErrStripPrefix, static.ErrMaxRanges, static.ErrErrorPage}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.cfg.Validate()
			if (err == nil) != (len(tt.errs) == 0) {
				t.Fatalf("Validate() = %v, want %v", err, tt.errs)
			}
			for _, e := range tt.errs {
				if !errors.Is(err, e) {
					t.Errorf("Validate() = %v, want it to match %v", err, e)
				}
			}
			h, nerr := static.New(tt.cfg)
			if (nerr == nil) != (err == nil) || (h == nil) == (nerr == nil) {
				t.Errorf("New() = %v, %v; Validate() = %v", h, nerr, err)
			}
		})
	}
}

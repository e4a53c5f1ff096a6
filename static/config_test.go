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

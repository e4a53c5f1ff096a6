package static

import (
	"io/fs"
	"net/http"
	"strings"
	"testing"
)

func TestCleanPath(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
		dir            bool
		status         int
	}{
		{name: "empty", in: "", want: ".", dir: true},
		{name: "root", in: "/", want: ".", dir: true},
		{name: "file", in: "/a.html", want: "a.html"},
		{name: "no leading slash", in: "a/b.css", want: "a/b.css"},
		{name: "dir", in: "/a/b/", want: "a/b", dir: true},
		{name: "well-known", in: "/.well-known/security.txt", want: ".well-known/security.txt"},
		{name: "decoded percent kept", in: "/%2e%2e/x", want: "%2e%2e/x"},
		{name: "dotdot", in: "/../etc/passwd", status: http.StatusNotFound},
		{name: "dotdot inside", in: "/a/../../x", status: http.StatusNotFound},
		{name: "dotdot last", in: "/a/..", status: http.StatusNotFound},
		{name: "dot", in: "/./a", status: http.StatusNotFound},
		{name: "double slash", in: "//etc/passwd", status: http.StatusNotFound},
		{name: "inner double slash", in: "/a//b", status: http.StatusNotFound},
		{name: "backslash", in: `/..\..\x`, status: http.StatusNotFound},
		{name: "dotfile", in: "/.env", status: http.StatusNotFound},
		{name: "dot dir", in: "/.git/config", status: http.StatusNotFound},
		{name: "nested dotfile", in: "/a/.htpasswd", status: http.StatusNotFound},
		{name: "nested well-known", in: "/a/.well-known/x", status: http.StatusNotFound},
		{name: "invalid utf-8", in: "/caf\xe9.html", status: http.StatusNotFound},
		{name: "utf-8", in: "/café.html", want: "café.html"},
		{name: "nul", in: "/a\x00.html", status: http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, dir, status := cleanPath(tt.in)
			if got != tt.want || dir != tt.dir || status != tt.status {
				t.Errorf("cleanPath(%q) = %q, %v, %d; want %q, %v, %d",
					tt.in, got, dir, status, tt.want, tt.dir, tt.status)
			}
		})
	}
}

// FuzzCleanPath checks that every accepted name is a valid fs path with no
// way up and no dotfile. (It belongs in fuzz/static once deps_test.go lists
// static as a leaf.)
func FuzzCleanPath(f *testing.F) {
	for _, s := range []string{"/", "/a/b/", "/../x", "/.env", "/.well-known/x", "/a\\b", "//x", "/a/./b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		name, _, status := cleanPath(p)
		if status != 0 {
			return
		}
		if !fs.ValidPath(name) {
			t.Fatalf("cleanPath(%q) = %q, not a valid path", p, name)
		}
		for i, seg := range strings.Split(name, "/") {
			if name != "." && strings.HasPrefix(seg, ".") && (i > 0 || seg != wellKnown) {
				t.Fatalf("cleanPath(%q) = %q: dot segment %q", p, name, seg)
			}
		}
	})
}

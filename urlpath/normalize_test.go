package urlpath

import (
	"errors"
	"testing"
)

func TestNormalize(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in, want, dec string
		err           error
	}{
		{"/", "/", "/", nil},
		{"/a/b", "/a/b", "/a/b", nil},
		{"/a/b/", "/a/b/", "/a/b/", nil},
		{"//admin/secret", "/admin/secret", "/admin/secret", nil},
		{"/x/../admin/secret", "/admin/secret", "/admin/secret", nil},
		{"/./admin/secret", "/admin/secret", "/admin/secret", nil},
		{"/%2e/admin/secret", "/admin/secret", "/admin/secret", nil},
		{"/%2E%2e/admin/secret", "/admin/secret", "/admin/secret", nil},
		{"/a/%2e%2E/%2E", "/", "/", nil},
		{"/../../etc/passwd", "/etc/passwd", "/etc/passwd", nil},
		{"/a/.", "/a/", "/a/", nil},
		{"/a/..", "/", "/", nil},
		{"/a//b///c", "/a/b/c", "/a/b/c", nil},
		{"/%61dmin/%7Euser/%5F", "/admin/~user/_", "/admin/~user/_", nil},
		{"/a%2fb", "/a%2Fb", "/a/b", nil},
		{"/caf%c3%a9", "/caf%C3%A9", "/café", nil},
		{"/a%20b", "/a%20b", "/a b", nil},
		{"/.well-known/x", "/.well-known/x", "/.well-known/x", nil},
		{"/a/..b/.c", "/a/..b/.c", "/a/..b/.c", nil},
		{"/a;b/..;/c", "/a;b/..;/c", "/a;b/..;/c", nil}, // not dot segments in RFC 3986
		{"", "", "", ErrNotAbsolute},
		{"a", "", "", ErrNotAbsolute},
		{"/a\\b", "", "", ErrBackslash},
		{"/a%5cb", "", "", ErrBackslash},
		{"/a%zz", "", "", ErrEscape},
		{"/a%2", "", "", ErrEscape},
		{"/a%u0061", "", "", ErrEscape},
		{"/a\x00", "", "", ErrControl},
		{"/a%0d%0ab", "", "", ErrControl},
		{"/a%2F..%2Fb", "", "", ErrEncodedSlash},
		{"/a/%2F/b", "", "", ErrEncodedSlash},
	} {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, dec, err := Normalize(tt.in)
			if !errors.Is(err, tt.err) || got != tt.want || dec != tt.dec {
				t.Fatalf("Normalize(%q) = %q, %q, %v; want %q, %q, %v", tt.in, got, dec, err, tt.want, tt.dec, tt.err)
			}
			if err != nil {
				return
			}
			if again, _, _ := Normalize(got); again != got {
				t.Errorf("not idempotent: %q → %q", got, again)
			}
		})
	}
}

func TestNormalizeDoesNotAllocate(t *testing.T) {
	// Not parallel: AllocsPerRun.
	for _, p := range []string{"/", "/wiki/Main_Page", "/repo.git/info/refs", "/a/b.c/"} {
		if n := testing.AllocsPerRun(100, func() { _, _, _ = Normalize(p); _, _ = Model(p) }); n != 0 {
			t.Errorf("%q: %v allocations", p, n)
		}
	}
}

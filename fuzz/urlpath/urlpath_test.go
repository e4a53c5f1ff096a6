// Package urlpathfuzz holds the fuzz target of package urlpath.
package urlpathfuzz

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/maatproxy/maat/urlpath"
)

// FuzzModel reads any path. Nothing panics; a path with a model has a
// normal form (Normalize agrees with Parse); the model starts with "/",
// holds no dot and no empty segment, and is idempotent: spelled again as an
// escaped path, its model is itself, and folding it twice is folding it
// once. And the model never takes a path out of a prefix: every
// segment-boundary prefix of the decoded normal form (the strict reading)
// that is its own model is a prefix of the model, folded or not.
func FuzzModel(f *testing.F) {
	for _, s := range []string{
		"/", "/admin/", "/ADMIN/", "/admin", "/admin;x/", "/;/admin/", "/x/..;/admin/", "/admin./", "/admin%20/",
		"/%c0%afadmin/", "/%e0%80%afadmin/", "/%2e%2e/admin/", "/admin%2fx", "/x%2f..%2fadmin/", "//admin/",
		"/./admin/", "/%EF%BD%81%EF%BD%84%EF%BD%8D%EF%BD%89%EF%BD%8E/", "/%41DMIN/", "/aDmIn;jsessionid=1/./x",
		"/admin::$INDEX_ALLOCATION/", "/%2561dmin/", "/%25252561", "/wiki/%E6%97%A5%E6%9C%AC", "/wiki/Washington,_D.C.",
		"/repo.git/info/refs", "/100%25", "/%EF%BC%85%EF%BC%94%EF%BC%91", "/caf%E9", "/a\\b", "/x/..%20/y",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		p, err := urlpath.Parse(in)
		norm, dec, nerr := urlpath.Normalize(in)
		if err != nil {
			if nerr != nil && !errors.Is(err, nerr) {
				t.Fatalf("Parse(%q): %v; Normalize: %v", in, err, nerr)
			}
			return
		}
		if nerr != nil || norm != p.Normal || dec != p.Decoded {
			t.Fatalf("Parse(%q) = %+v; Normalize = %q, %q, %v", in, p, norm, dec, nerr)
		}
		m := p.Model
		if !strings.HasPrefix(m, "/") {
			t.Fatalf("model of %q: %q does not start with /", in, m)
		}
		for i, seg := range strings.Split(m[1:], "/") {
			if seg == "." || seg == ".." || seg == "" && i < strings.Count(m, "/")-1 {
				t.Fatalf("model of %q: %q has a dot or empty segment", in, m)
			}
		}
		esc := (&url.URL{Path: m}).EscapedPath()
		if again, err := urlpath.Model(esc); again != m || err != nil {
			t.Fatalf("model of %q is %q; spelled %q its model is %q, %v", in, m, esc, again, err)
		}
		if f := urlpath.Fold(m); urlpath.Fold(f) != f || !urlpath.Equal(m, f, true) {
			t.Fatalf("Fold(%q) = %q, Fold again %q", m, f, urlpath.Fold(f))
		}
		for i := 1; i < len(dec); i++ {
			if dec[i-1] != '/' {
				continue
			}
			prefix := dec[:i]
			if pm, err := urlpath.Model((&url.URL{Path: prefix}).EscapedPath()); err != nil || pm != prefix {
				continue // not a prefix a route may have
			}
			if !urlpath.HasPrefix(m, prefix, false) || !urlpath.HasPrefix(urlpath.Fold(m), urlpath.Fold(prefix), false) {
				t.Fatalf("%q is under %q, its model %q is not", dec, prefix, m)
			}
		}
	})
}

package edgefuzz

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"unicode"

	"golang.org/x/crypto/bcrypt"

	"github.com/maatproxy/maat/edge"
	"github.com/maatproxy/maat/edge/config"
)

// guarded are the routes with basic_auth of FuzzGuardedPath, and whether
// each matches in any case.
var guarded = []struct {
	prefix string
	fold   bool
}{{"/admin/", true}, {"/Private/data/", false}}

// FuzzGuardedPath sends any request-target, without credentials, through
// a Handler whose site guards /admin/ (basic_auth, any case) and
// /Private/data/ (basic_auth, match_case: true). The guarded routes'
// upstream never gets a request. A request is refused (400), asks for the
// password (401), is redirected (301: /admin to /admin/), or reaches the
// site's upstream with a path that no common upstream reads as a place
// under a guarded prefix, nor as /admin: each reading below decodes once or
// up to three times, with or without Tomcat's path parameters, with or
// without Windows' rules (backslash, NTFS streams, trailing dots and
// spaces), with or without fullwidth ASCII, and is compared folded on the
// route that matches in any case. The readings are written here apart from
// package urlpath, whose model the edge decides on.
func FuzzGuardedPath(f *testing.F) {
	for _, s := range []string{
		"/admin/", "/ADMIN/", "/Admin/", "/admin", "/admin;x/", "/;/admin/", "/x/..;/admin/", "/admin./", "/admin%20/",
		"/%c0%afadmin/", "/%2e%2e/admin/", "/admin%2fx", "/x%2f..%2fadmin/", "//admin/", "/./admin/", "/%41DMIN/",
		"/%EF%BD%81%EF%BD%84%EF%BD%8D%EF%BD%89%EF%BD%8E/", "/aDmIn;jsessionid=1/./x", "/admin::$INDEX_ALLOCATION/",
		"/%2561dmin/", "/admin%252fx", "/Private/data/x", "/private/data/x", "/Private;x/data/x", "/Private/data./x",
		"/public/x", "/wiki/%E6%97%A5%E6%9C%AC", "/administrator", "/admin-panel/",
	} {
		f.Add(s)
	}
	adm, def := newPathRecorder(f), newPathRecorder(f)
	hash, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		f.Fatal(err)
	}
	cfg, err := config.Parse("fuzz.yaml", []byte(`tls: {mode: self-signed, cache: ""}
sites:
  - hosts: [localhost]
    upstream: `+def.srv.URL+`
    compress: false
    routes:
      - {path: /admin/, upstream: `+adm.srv.URL+`, basic_auth: {users: {alice: "`+string(hash)+`"}}}
      - {path: /Private/data/, upstream: `+adm.srv.URL+`, match_case: true, basic_auth: {users: {alice: "`+string(hash)+`"}}}
`))
	if err != nil {
		f.Fatal(err)
	}
	h, err := edge.NewHandler(cfg, edge.Env{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(h.Close)
	f.Fuzz(func(t *testing.T, target string) {
		if !strings.HasPrefix(target, "/") || strings.ContainsAny(target, "?#") {
			return
		}
		r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(
			"GET " + target + " HTTP/1.1\r\nHost: localhost\r\nUser-Agent: curl/8.5.0\r\n\r\n")))
		if err != nil {
			return
		}
		r.RemoteAddr = "127.0.0.1:1"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		toAdm, toDef := adm.take(), def.take()
		if toAdm != "" {
			t.Fatalf("%q reached a guarded route's upstream as %q without a password (%d)", target, toAdm, w.Code)
		}
		switch w.Code {
		case http.StatusBadRequest, http.StatusUnauthorized:
			return
		case http.StatusMovedPermanently:
			if loc := w.Header().Get("Location"); !strings.HasSuffix(loc, "/") || strings.HasPrefix(loc, "//") {
				t.Fatalf("%q redirected to %q", target, loc)
			}
			return
		case http.StatusOK:
		default:
			t.Fatalf("%q: status %d", target, w.Code)
		}
		if toDef == "" {
			t.Fatalf("%q: 200, but no upstream got it", target)
		}
		for flags := range readAll {
			p, ok := read(toDef, flags)
			if !ok {
				continue
			}
			for _, g := range guarded {
				if under(p, g.prefix, g.fold) || g.fold && equalFold(p+"/", g.prefix) {
					t.Fatalf("%q reached the site's upstream as %q, which reading %04b takes for %q: under %s", target, toDef, flags, p, g.prefix)
				}
			}
		}
	})
}

// The rules a reading applies, as bits of its flags.
const (
	readTwice     = 1 << iota // decode the decoded path again, up to three times in all
	readParams                // drop ";" and what follows in a segment (Tomcat, Jetty, Spring)
	readWindows               // backslash separates; NTFS stream suffixes and trailing dots and spaces go
	readFullwidth             // fullwidth ASCII is ASCII (best-fit, NFKC)
	readAll
)

// read reads an escaped path (as an upstream got it) with the rules of
// flags, and resolves dot segments; ok is false where the reading fails
// (bad escapes).
func read(esc string, flags int) (string, bool) {
	p, err := url.PathUnescape(esc)
	if err != nil {
		return "", false
	}
	if flags&readTwice != 0 {
		for range 2 {
			q, err := url.PathUnescape(p)
			if err != nil {
				break
			}
			p = q
		}
	}
	if flags&readFullwidth != 0 {
		p = strings.Map(func(r rune) rune {
			switch {
			case r == '\u3000':
				return ' '
			case r >= '！' && r <= '～' && r != '％':
				return r - '！' + '!'
			}
			return r
		}, p)
	}
	if flags&readWindows != 0 {
		p = strings.ReplaceAll(p, `\`, "/")
	}
	var out []string
	for _, seg := range strings.Split(p, "/") {
		if flags&readParams != 0 {
			seg, _, _ = strings.Cut(seg, ";")
		}
		if flags&readWindows != 0 {
			if i := strings.Index(seg, ":$"); i >= 0 {
				seg = strings.TrimRight(seg[:i], ":")
			}
			if t := strings.TrimRight(seg, " "); t != "." && t != ".." {
				seg = strings.TrimRight(seg, ". ")
			} else {
				seg = t
			}
		}
		switch seg {
		case "", ".":
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		default:
			out = append(out, seg)
		}
	}
	s := "/" + strings.Join(out, "/")
	if strings.HasSuffix(p, "/") && len(out) > 0 {
		s += "/"
	}
	return s, true
}

func under(p, prefix string, fold bool) bool {
	if fold {
		return len(p) >= len(prefix) && equalFold(p[:len(prefix)], prefix) ||
			strings.HasPrefix(strings.Map(unicode.ToLower, strings.Map(unicode.ToUpper, p)), strings.ToLower(prefix))
	}
	return strings.HasPrefix(p, prefix)
}

func equalFold(a, b string) bool {
	return strings.EqualFold(a, b) ||
		strings.Map(unicode.ToLower, strings.Map(unicode.ToUpper, a)) == strings.ToLower(b)
}

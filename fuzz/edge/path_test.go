// Package edgefuzz holds the fuzz targets for the parsers of untrusted bytes
// that live in package edge.
package edgefuzz

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/maatproxy/maat/edge"
	"github.com/maatproxy/maat/edge/config"
	"github.com/maatproxy/maat/urlpath"
)

// pathRecorder is an upstream that remembers the request-target it
// received last.
type pathRecorder struct {
	mu   sync.Mutex
	last string
	srv  *httptest.Server
}

func newPathRecorder(tb testing.TB) *pathRecorder {
	p := &pathRecorder{}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.last = r.RequestURI
		p.mu.Unlock()
	}))
	tb.Cleanup(p.srv.Close)
	return p
}

func (p *pathRecorder) take() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.last
	p.last = ""
	return s
}

// FuzzRequestPath sends any request-target through a Handler with a /a/
// route and a default upstream. A path is refused (400) or reaches exactly
// one upstream, normalized: it never starts with "//", neither it nor its
// decoded form holds a dot or empty segment, sending it again gives the
// same path (idempotent), and it reached the /a/ route's upstream exactly
// when its model (urlpath: how the most lenient upstream reads it) is under
// /a/.
func FuzzRequestPath(f *testing.F) {
	for _, s := range []string{
		"/", "/a/x", "//a/x", "/x/../a/x", "/%2e/a/x", "/a%2Fx", "/%61/x", "/a/./b/../c/", "/old//evil.example",
		"/%2F%2Fevil", "/a/%2e%2e%2f..%2fx", "/x%2F..%2Fa/y", "/caf%C3%A9", "/a/..%2F", "/.%2e/a/", "/~%7E",
		"/a;x/y", "/;/a/", "/a./y", "/a%20/y", "/x/..;/a/", "/%2561/y", "/%c0%afa/",
	} {
		f.Add(s)
	}
	a, def := newPathRecorder(f), newPathRecorder(f)
	cfg, err := config.Parse("fuzz.yaml", []byte(`tls: {mode: self-signed, cache: ""}
sites:
  - hosts: [localhost]
    upstream: `+def.srv.URL+`
    compress: false
    routes: [{path: /a/, upstream: `+a.srv.URL+`}]
`))
	if err != nil {
		f.Fatal(err)
	}
	h, err := edge.NewHandler(cfg, edge.Env{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(h.Close)
	send := func(target string) (status int, toA, toDef string, ok bool) {
		r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(
			"GET " + target + " HTTP/1.1\r\nHost: localhost\r\nUser-Agent: curl/8.5.0\r\n\r\n")))
		if err != nil {
			return 0, "", "", false
		}
		r.RemoteAddr = "127.0.0.1:1"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code, a.take(), def.take(), true
	}
	f.Fuzz(func(t *testing.T, target string) {
		if !strings.HasPrefix(target, "/") || strings.ContainsAny(target, "?#") {
			return
		}
		status, toA, toDef, ok := send(target)
		if !ok || status == http.StatusBadRequest {
			return
		}
		if status != http.StatusOK {
			t.Fatalf("%q: status %d", target, status)
		}
		if (toA == "") == (toDef == "") {
			t.Fatalf("%q reached /a/ as %q and the default as %q", target, toA, toDef)
		}
		got := toA + toDef
		dec, err := url.PathUnescape(got)
		if err != nil {
			t.Fatalf("%q reached the upstream as %q, which does not decode: %v", target, got, err)
		}
		for _, p := range []string{got, dec} {
			if strings.HasPrefix(p, "//") || strings.Contains(p, "//") {
				t.Fatalf("%q reached the upstream as %q: an empty segment", target, got)
			}
			for seg := range strings.SplitSeq(p, "/") {
				if seg == "." || seg == ".." {
					t.Fatalf("%q reached the upstream as %q: a dot segment", target, got)
				}
			}
		}
		u, err := url.ParseRequestURI(target)
		if err != nil {
			t.Fatalf("%q was forwarded as %q, but does not parse: %v", target, got, err)
		}
		m, err := urlpath.Model(u.EscapedPath()) // as the edge reads it: net/url re-escapes an invalid raw path
		if err != nil {
			t.Fatalf("%q was forwarded as %q, but has no model: %v", target, got, err)
		}
		if under := strings.HasPrefix(m, "/a/"); under != (toA != "") {
			t.Fatalf("%q (read as %q) went to the wrong route: /a/ %v", target, m, toA != "")
		}
		if _, againA, againDef, _ := send(got); againA+againDef != got {
			t.Fatalf("not idempotent: %q → %q → %q", target, got, againA+againDef)
		}
	})
}

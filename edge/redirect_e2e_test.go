package edge

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestRedirectLocationIsOurs: whatever request target and Host a client
// sends to port 80, or in plain HTTP to the TLS port, a redirect's Location
// is an https URL on the site's own host and port, with no userinfo, and
// never a scheme-relative or backslash URL.
func TestRedirectLocationIsOurs(t *testing.T) {
	t.Parallel()
	up := echoUpstream(t, "site")
	e := startEdge(t, "sites: [{hosts: [localhost], upstream: "+up.URL+"}]\n")
	_, port, _ := net.SplitHostPort(e.Addrs().HTTPS)
	targets := []string{"/x?q=1", "//evil.example/", "*", "localhost:1@evil.example", "@evil.example/",
		"http://localhost@evil.example/", "/%2F%2Fevil.example", "/\\evil.example", "/x@evil.example", ":1@evil.example/"}
	hosts := []string{"localhost", "localhost:1@evil.example", "localhost@evil.example", "evil.example\\@localhost", "LOCALHOST."}
	for _, addr := range []string{e.Addrs().HTTP, e.Addrs().HTTPS} {
		for _, target := range targets {
			for _, host := range hosts {
				c, err := net.DialTimeout("tcp", addr, 10*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				_ = c.SetDeadline(time.Now().Add(20 * time.Second))
				fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, host)
				res, err := http.ReadResponse(bufio.NewReader(c), nil)
				c.Close()
				if err != nil {
					continue // refused without an answer
				}
				loc := res.Header.Get("Location")
				if loc == "" {
					continue
				}
				u, err := url.Parse(loc)
				if err != nil || u.Scheme != "https" || u.User != nil || u.Host != "localhost:"+port ||
					!strings.HasPrefix(u.EscapedPath(), "/") || strings.ContainsAny(loc, "\\ ") {
					t.Errorf("%s: GET %q Host %q → %d Location %q: not a URL on https://localhost:%s", addr, target, host, res.StatusCode, loc, port)
				}
			}
		}
	}
}

func TestHTTPSURL(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ port, host, target, want string }{
		{"443", "example.org", "/a?b=c", "https://example.org/a?b=c"},
		{"8443", "Example.ORG.", "/a", "https://example.org:8443/a"},
		{"443", "::1", "/", "https://[::1]/"},
		{"8443", "::1", "/", "https://[::1]:8443/"},
		{"", "192.0.2.1", "*", "https://192.0.2.1/"},
		{"443", "example.org", "localhost:1@evil.example", "https://example.org/"},
		{"443", "a@b", "/", ""},
		{"443", "fe80::1%eth0", "/", ""},
		{"443", "a/b", "/", ""},
		{"443", "", "/", ""},
	} {
		u, err := url.ParseRequestURI(tt.target)
		if err != nil {
			u = &url.URL{Path: tt.target}
		}
		got, ok := httpsURL(tt.port, tt.host, u)
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("httpsURL(%q, %q, %q) = %q, %t, want %q", tt.port, tt.host, tt.target, got, ok, tt.want)
		}
	}
}

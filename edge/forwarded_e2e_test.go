package edge

import (
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/maatproxy/maat/forwarded"
)

// TestForwardedForThroughTrustedProxy: behind a trusted proxy, every
// spelling of a forwarded client's address names that client, a hidden
// one gets an address of its own, and garbage is refused; the proxy itself
// is never taken for the client of a request it forwarded, on any
// protocol.
func TestForwardedForThroughTrustedProxy(t *testing.T) {
	t.Parallel()
	var seen atomic.Int64
	up := echoUpstream(t, "site")
	counting := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen.Add(1); next.ServeHTTP(w, r) })
	}
	up.Config.Handler = counting(up.Config.Handler)
	e := startEdge(t, "trusted_proxies: [127.0.0.0/8]\npolicy: \"\"\nsites: [{hosts: [localhost], upstream: "+up.URL+"}]\n")
	for _, proto := range []string{"h1", "h2", "h3"} {
		t.Run(proto, func(t *testing.T) { // one after the other: seen counts one protocol's requests
			c := e.client(t, proto)
			for _, tt := range []struct {
				xff  string
				want string // X-Real-Ip at the upstream; "" = refused with 400
			}{
				{"1.2.3.4:5678", "1.2.3.4"},
				{"9.9.9.9, 1.2.3.4:5678", "1.2.3.4"},
				{"[2001:db8::7]:443", "2001:db8::7"},
				{"2001:db8::7", "2001:db8::7"},
				{"unknown", forwarded.Hidden("unknown").String()},
				{"_proxy1", forwarded.Hidden("_proxy1").String()},
				{"garbage", ""},
				{"1.2.3.4:5678:9", ""},
			} {
				before := seen.Load()
				res, body := get(t, c, e.url("/who"), "User-Agent", "Go-http-client/1.1", "X-Forwarded-For", tt.xff)
				if tt.want == "" {
					if res.StatusCode != http.StatusBadRequest || seen.Load() != before {
						t.Errorf("X-Forwarded-For %q: %d, upstream reached %t; want 400, not reached", tt.xff, res.StatusCode, seen.Load() != before)
					}
					continue
				}
				if res.StatusCode != http.StatusOK || !strings.Contains(body, "X-Real-Ip="+tt.want+"\n") {
					t.Errorf("X-Forwarded-For %q: %d, want X-Real-Ip=%s:\n%s", tt.xff, res.StatusCode, tt.want, body)
				}
				if strings.Contains(body, "X-Real-Ip=127.0.0.1\n") {
					t.Errorf("X-Forwarded-For %q: the proxy was taken for the client", tt.xff)
				}
			}
		})
	}
	if !netip.MustParsePrefix("100::/64").Contains(forwarded.Hidden("unknown")) {
		t.Error("a hidden client outside 100::/64")
	}
}

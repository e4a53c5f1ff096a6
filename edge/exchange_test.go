package edge

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/maatproxy/maat/internal/testnet"
)

// The upstream transport's own tests (edge/internal/upstream) use it
// alone; these go through the edge.

const okAnswer = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"

func clientSite(up string) string {
	return "policy: \"\"\nsites: [{hosts: [localhost], compress: false, upstream: " + up + "}]\n"
}

const getReq = "GET /%d HTTP/1.1\r\nHost: localhost\r\nUser-Agent: Go-http-client/1.1\r\n\r\n"

// TestCommonExchangeHopHeaders: the fields an upstream's answer names in
// its Connection field, and the hop-by-hop ones, do not reach the client
// of a common exchange; the others do.
func TestCommonExchangeHopHeaders(t *testing.T) {
	t.Parallel()
	up := testnet.NewScripted(t, func(int, string) testnet.Answer {
		return testnet.Answer{Raw: "HTTP/1.1 200 OK\r\nConnection: X-Hop\r\nX-Hop: secret\r\nX-Kept: yes\r\nKeep-Alive: timeout=5\r\nContent-Length: 2\r\n\r\nok"}
	}, nil)
	h := newTestHandler(t, clientSite(up.URL))
	w := serveRaw(t, h, fmt.Sprintf(getReq, 1))
	if w.Code != 200 || w.Body.String() != "ok" {
		t.Fatalf("%d %q", w.Code, w.Body)
	}
	if got := w.Header().Get("X-Kept"); got != "yes" {
		t.Errorf("X-Kept: %q, want yes", got)
	}
	for _, k := range []string{"X-Hop", "Connection", "Keep-Alive"} {
		if v := w.Header().Get(k); v != "" {
			t.Errorf("%s: %q reached the client", k, v)
		}
	}
}

// TestClientCarriesHTTP2Requests: a GET over HTTP/2 reaches the upstream
// through the edge's own client (its connection is then idle in its
// pool), and 103 Early Hints pass to the client.
func TestClientCarriesHTTP2Requests(t *testing.T) {
	t.Parallel()
	up := testnet.NewScripted(t, func(int, string) testnet.Answer {
		return testnet.Answer{Raw: "HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n" + okAnswer}
	}, nil)
	e := startEdge(t, clientSite(up.URL))
	for _, proto := range []string{"h2", "http/1.1"} {
		c, err := tls.Dial("tcp", e.Addrs().HTTPS, e.tlsConfig(proto))
		if err != nil {
			t.Fatal(err)
		}
		var got []int
		if proto == "h2" {
			res, _ := get(t, e.client(t, "h2"), e.url("/"), "User-Agent", "Go-http-client/2.0")
			got = append(got, res.StatusCode)
		} else {
			_, _ = io.WriteString(c, fmt.Sprintf(getReq, 1))
			br := bufio.NewReader(c)
			for {
				res, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, res.StatusCode)
				if res.StatusCode >= 200 {
					break
				}
			}
			if len(got) != 2 || got[0] != 103 {
				t.Errorf("HTTP/1.1 client got %v, want [103 200]", got)
			}
		}
		c.Close()
		if got[len(got)-1] != 200 {
			t.Errorf("%s: %v", proto, got)
		}
	}
	idle := e.Handler().upstream.Idle(strings.TrimPrefix(up.URL, "http://"))
	if idle == 0 || up.Conns() != 1 {
		t.Errorf("%d idle connections in the edge's client, %d made: the requests did not share its pool", idle, up.Conns())
	}
}

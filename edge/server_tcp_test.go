package edge

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
)

// TestTLSResumption: the edge's listener path (the ClientHello reader, the
// recording of the first bytes, the handshake in handleTLS) keeps session
// resumption working: a client back with its ticket resumes, on HTTP/1.1
// and HTTP/2, and its requests still carry the fingerprint of the new
// hello.
func TestTLSResumption(t *testing.T) {
	t.Parallel()
	up := newRawUpstream(t)
	e := startEdge(t, clientSite(up.URL))
	for _, proto := range []string{"http/1.1", "h2"} {
		t.Run(proto, func(t *testing.T) {
			t.Parallel()
			conf := e.tlsConfig(proto)
			conf.ClientSessionCache = tls.NewLRUClientSessionCache(4)
			for i, want := range []bool{false, true, true} {
				c, err := tls.Dial("tcp", e.Addrs().HTTPS, conf)
				if err != nil {
					t.Fatal(err)
				}
				// A request, whose answer also brings the TLS 1.3 tickets.
				if proto == "h2" {
					// net/http's HTTP/2 client on this very connection.
					tr := h2Transport(&http.Transport{DialTLSContext: func(context.Context, string, string) (net.Conn, error) { return c, nil }})
					req, _ := http.NewRequest("GET", "https://localhost/", nil)
					req.Header.Set("User-Agent", "Go-http-client/1.1")
					res, err := tr.RoundTrip(req)
					if err != nil {
						t.Fatal(err)
					}
					_, _ = io.Copy(io.Discard, res.Body)
					res.Body.Close()
					if res.StatusCode != 200 {
						t.Errorf("connection %d: %d", i, res.StatusCode)
					}
					tr.CloseIdleConnections()
				} else {
					_, _ = io.WriteString(c, fmt.Sprintf(getReq, i))
					res, err := http.ReadResponse(bufio.NewReader(c), nil)
					if err != nil {
						t.Fatal(err)
					}
					_, _ = io.Copy(io.Discard, res.Body)
					if res.StatusCode != 200 {
						t.Errorf("connection %d: %d", i, res.StatusCode)
					}
				}
				if got := c.ConnectionState().DidResume; got != want {
					t.Errorf("connection %d resumed: %v, want %v", i, got, want)
				}
				c.Close()
			}
		})
	}
}

package edge

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/quic-go/http3"

	"github.com/maatproxy/maat/edge/config"
	"github.com/maatproxy/maat/internal/testacme"
)

func TestMain(m *testing.M) {
	testacme.SetEnv()
	// The QUIC tests' deaf clients hide their UDP sockets on purpose.
	os.Setenv("QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING", "true")
	os.Exit(m.Run())
}

// heldPorts binds, on 127.0.0.1, a TCP port whose UDP twin is free too (for
// HTTP/3) and another TCP port, and keeps them bound: New hands them to the
// edge, so no port is free between the test choosing it and the edge
// listening on it.
type heldPorts struct {
	https, http int
	tcp         map[string]net.Listener
	udp         map[string]net.PacketConn
}

func holdPorts(t *testing.T) *heldPorts {
	t.Helper()
	for range 20 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := ln.Addr().(*net.TCPAddr).Port
		u, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: p})
		if err != nil {
			ln.Close()
			continue
		}
		ln2, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		h := ln2.Addr().(*net.TCPAddr).Port
		return &heldPorts{https: p, http: h,
			tcp: map[string]net.Listener{ln.Addr().String(): ln, ln2.Addr().String(): ln2},
			udp: map[string]net.PacketConn{u.LocalAddr().String(): u}}
	}
	t.Fatal("no free ports")
	return nil
}

// TestACMEThroughEdge: the edge in tls.mode acme obtains certificates from
// Pebble through its own listeners (TLS-ALPN-01 on the HTTPS port, HTTP-01
// on the HTTP port), and a client that trusts only Pebble's root reaches the
// upstream over HTTP/1.1, HTTP/2 and HTTP/3. An unconfigured name gets no
// certificate and no order.
func TestACMEThroughEdge(t *testing.T) {
	t.Parallel()
	up := echoUpstream(t, "a")
	held := holdPorts(t)
	httpsPort, httpPort := held.https, held.http
	ca := testacme.Start(t, httpPort, httpsPort, testacme.Options{})
	cache := filepath.Join(t.TempDir(), "certs")
	cfg, err := config.Parse("acme.yaml", []byte(fmt.Sprintf(`
listen: { https: "127.0.0.1:%d", http: "127.0.0.1:%d", admin: "127.0.0.1:0" }
tls:
  mode: acme
  cache: %s
  acme: { email: ops@site.test, directory: %q, ca_roots: %q }
sites: [{hosts: [site.test, www.site.test], upstream: %s}]
`, httpsPort, httpPort, cache, ca.DirURL, ca.RootsFile, up.URL)))
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	s.bound, s.udp0 = held.tcp, held.udp
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	addr := "127.0.0.1:" + strconv.Itoa(httpsPort)
	tlsFor := func(name string, alpn ...string) *tls.Config {
		return &tls.Config{RootCAs: ca.Roots, ServerName: name, NextProtos: alpn}
	}
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	}
	clients := map[string]*http.Client{
		"HTTP/1.1": {Transport: &http.Transport{DialContext: dial, TLSClientConfig: tlsFor("site.test", "http/1.1")}},
		"HTTP/2.0": {Transport: h2Transport(&http.Transport{
			DialTLSContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&tls.Dialer{Config: tlsFor("site.test", "h2")}).DialContext(ctx, "tcp", addr)
			}})},
		"HTTP/3.0": {Transport: &http3.Transport{TLSClientConfig: tlsFor("site.test")}},
	}
	for proto, c := range clients {
		c.Timeout = 60 * time.Second // the first handshake waits for the order
		u := "https://site.test:" + strconv.Itoa(httpsPort) + "/acme"
		if proto == "HTTP/3.0" {
			u = "https://" + addr + "/acme"
		}
		req, _ := http.NewRequest("GET", u, nil)
		req.Host = "site.test"
		res, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", proto, err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || res.Proto != proto || !strings.Contains(string(body), "Path=/acme") {
			t.Errorf("%s: %d %s %q", proto, res.StatusCode, res.Proto, body)
		}
	}
	if n := ca.OrdersFor("site.test"); n != 1 {
		t.Errorf("orders for site.test: %d, want 1", n)
	}
	// An unconfigured name: no certificate, no order.
	conn, err := tls.Dial("tcp", addr, tlsFor("intruder.test"))
	if err == nil {
		conn.Close()
		t.Error("a certificate was served for an unconfigured name")
	}
	if n := ca.OrdersFor("intruder.test"); n != 0 {
		t.Errorf("orders for an unconfigured name: %d", n)
	}
	// readyz names the certificate.
	res, err := http.Get("http://" + s.Addrs().Admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(b), `"site.test"`) {
		t.Errorf("readyz: %d %s", res.StatusCode, b)
	}
}

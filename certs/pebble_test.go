package certs_test

// End-to-end harness: Pebble (the ACME test CA) in process, a DNS server
// that answers 127.0.0.1 for every name, and an edge-like server (HTTPS on
// TCP, HTTP/3 on UDP, HTTP on another port) whose certificates come from a
// certs.Manager. Everything listens on 127.0.0.1 with random ports.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/maatproxy/maat/certs"
	"github.com/maatproxy/maat/internal/testacme"
)

func TestMain(m *testing.M) {
	// Pebble reads these when it starts: no random validation delays, no
	// rejected nonces, and every order validated afresh (no reuse of earlier
	// authorizations), so that each order exercises a challenge.
	testacme.SetEnv()
	os.Exit(m.Run())
}

// testEdge is a server like the edge's front: HTTPS (HTTP/1.1 and HTTP/2)
// and HTTP/3 on one port number, HTTP (ACME http-01) on another.
type testEdge struct {
	tlsPort, httpPort int
	mgr               atomic.Pointer[certs.Manager]
	refuseALPN        map[string]bool // names whose tls-alpn-01 validation fails
	refuseHTTP        map[string]bool // names whose http-01 validation fails
	// onALPN, if set, sees each tls-alpn-01 validation before it is
	// answered; an error fails it.
	onALPN atomic.Pointer[func(name string) error]

	mu         sync.Mutex
	alpnHellos map[string]int // tls-alpn-01 validations per name
	http01     map[string]int // http-01 validations per host
}

// newTestEdge listens without serving yet: its ports are needed to start
// the CA, whose directory the Manager needs.
func newTestEdge(t *testing.T) (*testEdge, net.Listener, net.PacketConn, net.Listener) {
	t.Helper()
	e := &testEdge{alpnHellos: map[string]int{}, http01: map[string]int{},
		refuseALPN: map[string]bool{}, refuseHTTP: map[string]bool{}}
	var tcp net.Listener
	var udp net.PacketConn
	for range 10 { // the UDP port of the same number may be taken
		var err error
		if tcp, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		if udp, err = net.ListenPacket("udp", tcp.Addr().String()); err == nil {
			break
		}
		tcp.Close()
	}
	if udp == nil {
		t.Fatal("no TCP and UDP port pair free")
	}
	plain, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.tlsPort = tcp.Addr().(*net.TCPAddr).Port
	e.httpPort = plain.Addr().(*net.TCPAddr).Port
	return e, tcp, udp, plain
}

// serve starts serving with m's certificates.
func (e *testEdge) serve(t *testing.T, m *certs.Manager, tcp net.Listener, udp net.PacketConn, plain net.Listener) {
	t.Helper()
	e.use(m)
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s", r.TLS.ServerName, r.Proto)
	})
	tlsConf := m.TLSConfig()
	tlsConf.GetCertificate = e.getCertificate
	h12 := &http.Server{Handler: upstream, TLSConfig: tlsConf, ErrorLog: log.New(io.Discard, "", 0)}
	go h12.ServeTLS(tcp, "", "")
	t.Cleanup(func() { h12.Close() })

	h3 := &http3.Server{Handler: upstream, TLSConfig: http3.ConfigureTLSConfig(&tls.Config{GetCertificate: e.getCertificate})}
	go h3.Serve(udp)
	t.Cleanup(func() {
		// http3's Close waits for its connections; do not let a stuck
		// one hold the test.
		closed := make(chan struct{})
		go func() { h3.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(5 * time.Second):
			t.Log("HTTP/3 server still closing after 5s")
		}
		udp.Close()
	})

	h80 := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/.well-known/acme-challenge/") {
			host, _, _ := net.SplitHostPort(r.Host)
			e.mu.Lock()
			e.http01[host]++
			e.mu.Unlock()
			if e.refuseHTTP[host] {
				http.NotFound(w, r)
				return
			}
		}
		e.mgr.Load().HTTPHandler(nil).ServeHTTP(w, r)
	}), ErrorLog: log.New(io.Discard, "", 0)}
	go h80.Serve(plain)
	t.Cleanup(func() { h80.Close() })
}

// use switches the edge to m's certificates.
func (e *testEdge) use(m *certs.Manager) {
	m.HTTPHandler(nil) // port 80 is served: http-01 may be used
	e.mgr.Store(m)
}

func (e *testEdge) getCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	if len(hello.SupportedProtos) == 1 && hello.SupportedProtos[0] == "acme-tls/1" {
		if e.refuseALPN[hello.ServerName] {
			return nil, fmt.Errorf("test: tls-alpn-01 refused for %q", hello.ServerName)
		}
		if f := e.onALPN.Load(); f != nil {
			if err := (*f)(hello.ServerName); err != nil {
				return nil, err
			}
		}
		e.mu.Lock()
		e.alpnHellos[hello.ServerName]++
		e.mu.Unlock()
	}
	return e.mgr.Load().GetCertificate(hello)
}

func (e *testEdge) counts(name string) (alpn, http01 int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.alpnHellos[name], e.http01[name]
}

// get fetches https://name/ from the edge over proto ("1.1", "2" or "3")
// with a new connection, trusting only roots; it returns the body.
func (e *testEdge) get(t *testing.T, roots *x509.CertPool, name, proto string) (string, *x509.Certificate, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	addr := fmt.Sprintf("127.0.0.1:%d", e.tlsPort)
	var rt http.RoundTripper
	switch proto {
	case "3":
		udp, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer udp.Close()
		tr := &http3.Transport{
			TLSClientConfig: &tls.Config{RootCAs: roots},
			Dial: func(ctx context.Context, _ string, tlsCfg *tls.Config, cfg *quic.Config) (*quic.Conn, error) {
				ua, err := net.ResolveUDPAddr("udp", addr)
				if err != nil {
					return nil, err
				}
				return quic.DialEarly(ctx, udp, ua, tlsCfg, cfg)
			},
		}
		defer tr.Close()
		rt = tr
	default:
		tr := &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: roots},
			DisableKeepAlives: true,
			Protocols:         new(http.Protocols),
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, addr)
			},
		}
		if proto == "2" {
			tr.Protocols.SetHTTP2(true)
		} else {
			tr.Protocols.SetHTTP1(true)
		}
		defer tr.CloseIdleConnections()
		rt = tr
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://%s:%d/", name, e.tlsPort), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return "", nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", nil, err
	}
	return string(body), resp.TLS.PeerCertificates[0], nil
}

// underLoad runs f while two clients send requests for name over new
// connections, one after the other; every request must succeed. It returns
// how many did.
func (e *testEdge) underLoad(t *testing.T, roots *x509.CertPool, name string, f func()) int64 {
	t.Helper()
	var served atomic.Int64
	done := make(chan struct{})
	errs := make(chan error, 2)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				if _, _, err := e.get(t, roots, name, "1.1"); err != nil {
					errs <- err
					return
				}
				served.Add(1)
			}
		})
	}
	f()
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("request during the operation failed: %v", err)
	}
	return served.Load()
}

// bounded returns a context for one call that must not outlast an order.
func bounded(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// waitFor polls cond until it holds or the test's patience ends.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ready reports whether m has a valid certificate for name.
func ready(m *certs.Manager, name string) bool {
	for _, s := range m.Status() {
		if s.Name == name {
			return s.Ready(time.Now())
		}
	}
	return false
}

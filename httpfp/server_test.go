package httpfp_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/maatproxy/maat/httpfp"
	"github.com/maatproxy/maat/internal/testclient"
	"golang.org/x/net/http2"
)

// result is what the test server answers: the fingerprint it got.
type result struct {
	Proto, Path string
	Found, TLS  bool
	httpfp.Fingerprint
}

// chanListener hands connections to an http.Server, as the edge does.
type chanListener struct {
	addr net.Addr
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.addr }

// testServer serves HTTPS on loopback the way the edge does: its own accept
// loop and handshake, then x/net/http2 for "h2" and net/http otherwise,
// both over httpfp.NewConn.
type testServer struct {
	addr  string
	mu    sync.Mutex
	conns []*httpfp.Conn
}

// errs returns the tap errors of the server's connections.
func (s *testServer) errs() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, c := range s.conns {
		errs = append(errs, c.Err())
	}
	return errors.Join(errs...)
}

func startServer(t testing.TB, cfg httpfp.Config) *testServer {
	t.Helper()
	h := httpfp.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		res := result{Proto: r.Proto, Path: r.URL.Path, TLS: r.TLS != nil && r.TLS.HandshakeComplete}
		if fp, ok := httpfp.FromRequest(r); ok {
			res.Found, res.Fingerprint = true, *fp
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(res)
	}))
	return startServerWith(t, cfg, true, h)
}

// startServerWith starts a server with handler h, its connections tapped
// or not.
func startServerWith(t testing.TB, cfg httpfp.Config, tap bool, h http.Handler) *testServer {
	t.Helper()
	tlsConf, err := testclient.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &chanListener{addr: ln.Addr(), ch: make(chan net.Conn), done: make(chan struct{})}
	h1 := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if fc, ok := c.(*httpfp.Conn); ok {
				return httpfp.NewContext(ctx, fc)
			}
			return ctx
		},
	}
	// x/net's http2.Server, deprecated for net/http's own, stays here:
	// net/http's (Go 1.26.8), which the edge serves HTTP/2 with through its
	// prior-knowledge entry, races on its HPACK encoder when a client
	// changes SETTINGS_HEADER_TABLE_SIZE while a response is written, as
	// TestHPACKThroughServer's client does; x/net v0.63 defers the change
	// until no frame is being written.
	//lint:ignore SA1019 net/http's own HTTP/2 server races on SETTINGS_HEADER_TABLE_SIZE (above)
	h2 := &http2.Server{}
	s := &testServer{addr: ln.Addr().String()}
	ctx, cancel := context.WithCancel(context.Background())
	go h1.Serve(cl)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				tc := tls.Server(c, tlsConf)
				hctx, hcancel := context.WithTimeout(ctx, 10*time.Second)
				defer hcancel()
				if err := tc.HandshakeContext(hctx); err != nil {
					c.Close()
					return
				}
				proto := httpfp.H1
				if tc.ConnectionState().NegotiatedProtocol == "h2" {
					proto = httpfp.H2
				}
				var conn net.Conn = tc
				cctx := ctx
				if tap {
					fc := httpfp.NewConn(tc, proto, cfg)
					s.mu.Lock()
					s.conns = append(s.conns, fc)
					s.mu.Unlock()
					conn, cctx = fc, httpfp.NewContext(ctx, fc)
				}
				if proto == httpfp.H2 {
					//lint:ignore SA1019 see h2
					h2.ServeConn(conn, &http2.ServeConnOpts{Context: cctx, BaseConfig: h1, Handler: h})
					return
				}
				select {
				case cl.ch <- conn:
				case <-ctx.Done():
					conn.Close()
				}
			}()
		}
	}()
	t.Cleanup(func() {
		cancel()
		ln.Close()
		h1.Close()
		cl.Close()
	})
	return s
}

// BenchmarkServer measures a request over a keep-alive TLS connection to
// a server like the edge's, with and without the tap (and FromRequest in
// the handler): the difference is the tap's cost per request.
func BenchmarkServer(b *testing.B) {
	for _, proto := range []string{"HTTP/1.1", "HTTP/2"} {
		for _, tap := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/tap=%v", proto, tap), func(b *testing.B) {
				h := http.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if tap {
						if _, ok := httpfp.FromRequest(r); !ok {
							b.Error("no fingerprint")
						}
					}
					io.WriteString(w, "ok")
				}))
				if tap {
					h = httpfp.Handler(h)
				}
				s := startServerWith(b, httpfp.Config{}, tap, h)
				tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: proto == "HTTP/2"}
				if proto == "HTTP/1.1" {
					tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
				}
				defer tr.CloseIdleConnections()
				req, _ := http.NewRequest("GET", "https://"+s.addr+"/bench", nil)
				req.Header.Set("Accept", "*/*")
				req.Header.Set("Accept-Language", "en-US,en;q=0.9")
				b.ReportAllocs()
				for b.Loop() {
					resp, err := tr.RoundTrip(req)
					if err != nil {
						b.Fatal(err)
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
		}
	}
}

package httpfp_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
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
	Found       bool
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
	tlsConf, err := testclient.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := httpfp.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		res := result{Proto: r.Proto, Path: r.URL.Path}
		if fp, ok := httpfp.FromRequest(r); ok {
			res.Found, res.Fingerprint = true, *fp
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(res)
	}))
	cl := &chanListener{addr: ln.Addr(), ch: make(chan net.Conn), done: make(chan struct{})}
	h1 := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if fc, ok := c.(*httpfp.Conn); ok {
				return httpfp.NewContext(ctx, fc)
			}
			return ctx
		},
	}
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
				fc := httpfp.NewConn(tc, proto, cfg)
				s.mu.Lock()
				s.conns = append(s.conns, fc)
				s.mu.Unlock()
				if proto == httpfp.H2 {
					h2.ServeConn(fc, &http2.ServeConnOpts{Context: httpfp.NewContext(ctx, fc), BaseConfig: h1, Handler: h})
					return
				}
				select {
				case cl.ch <- fc:
				case <-ctx.Done():
					fc.Close()
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

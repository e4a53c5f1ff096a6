// Package testcapture runs real HTTP clients (Chromium, Firefox ESR, curl,
// Node, Go's net/http and x/net/http2) against an HTTPS server on loopback
// and records what the edge's fingerprinting sees of each request: the JA4
// of the connection's ClientHello (tlsfp), its HTTP/2 fingerprint and the
// header names in wire order (httpfp). The generators of the known-client
// tables (tlsfp/internal/genclients, httpfp/internal/genclients) build rows
// from these records, and tests re-derive the rows from the same clients so
// that a table cannot drift from them silently.
//
// It is a test helper: only tests and generators import it, never the edge
// binary. It imports the leaves tlsfp and httpfp and the test helper
// testclient (a throwaway certificate).
//
// Specifications: RFC 8446 (TLS 1.3), RFC 9113 (HTTP/2), RFC 9112
// (HTTP/1.1); JA4 and the Akamai HTTP/2 fingerprint as tlsfp and httpfp
// document them.
package testcapture

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/maatproxy/maat/httpfp"
	"github.com/maatproxy/maat/internal/testclient"
	"github.com/maatproxy/maat/tlsfp"
	"golang.org/x/net/http2"
)

// Record is what the server saw of one request.
type Record struct {
	// Client names the client that sent it (Client.Name), Family its
	// client family, Version its version and Source the client with its
	// version and the system it ran on, e.g. "curl 7.88.1 --http2, Debian
	// GNU/Linux 12 (bookworm)". Set by Run; empty from Server.Take.
	Client  string `json:"client,omitempty"`
	Family  string `json:"family,omitempty"`
	Version string `json:"version,omitempty"`
	Source  string `json:"source,omitempty"`

	Path      string `json:"path"`
	Proto     string `json:"proto"` // "HTTP/1.1", "HTTP/2.0"
	ALPN      string `json:"alpn,omitempty"`
	JA4       string `json:"ja4"`
	JA4R      string `json:"ja4_r"`
	H2FP      string `json:"h2fp,omitempty"`
	HFP       string `json:"hfp"`
	HFPR      string `json:"hfp_r"`
	UserAgent string `json:"user_agent"`
	// Hello is the connection's first bytes: the TLS record(s) of its
	// ClientHello, as utls.Fingerprinter reads them. Not written to the
	// capture file (the random and key shares change on every run).
	Hello []byte `json:"-"`
}

// Server is an HTTPS server on 127.0.0.1 that serves the edge's way (its
// own handshake on a tlsfp listener, then x/net's HTTP/2 server or
// net/http over httpfp's tap) and records every request.
type Server struct {
	// URL is the server's root, "https://localhost:PORT/".
	URL string
	// Cert is the DER of the server's self-signed certificate.
	Cert []byte

	ln     net.Listener
	h1     *http.Server
	ch     chan net.Conn // HTTP/1 connections for h1
	done   chan struct{} // closed by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	records []Record
}

// NewServer starts a capture server; Close stops it.
func NewServer() (*Server, error) {
	conf, err := testclient.ServerConfig()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		URL:    "https://localhost:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port) + "/",
		Cert:   conf.Certificates[0].Certificate[0],
		ln:     tlsfp.NewListener(firstBytesListener{ln}, tlsfp.Config{}),
		ch:     make(chan net.Conn),
		done:   make(chan struct{}),
		cancel: cancel,
	}
	s.h1 = &http.Server{
		Handler:           httpfp.Handler(http.HandlerFunc(s.serve)),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if fc, ok := c.(*httpfp.Conn); ok {
				return httpfp.NewContext(ctx, fc)
			}
			return ctx
		},
	}
	s.wg.Go(func() { _ = s.h1.Serve(chanListener{s, ln.Addr()}) })
	s.wg.Go(func() { s.accept(ctx, conf) })
	return s, nil
}

// Close stops the server and waits for its goroutines.
func (s *Server) Close() error {
	s.cancel()
	close(s.done)
	err := s.ln.Close()
	s.h1.Close()
	s.wg.Wait()
	return err
}

func (s *Server) accept(ctx context.Context, conf *tls.Config) {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.wg.Go(func() { s.handle(ctx, c, conf) })
	}
}

func (s *Server) handle(ctx context.Context, c net.Conn, conf *tls.Config) {
	tc := tls.Server(c, conf)
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err := tc.HandshakeContext(hctx)
	cancel()
	if err != nil {
		c.Close()
		return
	}
	if tc.ConnectionState().NegotiatedProtocol != "h2" {
		select {
		case s.ch <- httpfp.NewConn(tc, httpfp.H1, httpfp.Config{}):
		case <-ctx.Done():
			tc.Close()
		}
		return
	}
	fc := httpfp.NewConn(tc, httpfp.H2, httpfp.Config{})
	stop := context.AfterFunc(ctx, func() { fc.Close() })
	defer stop()
	// x/net's server, as the edge serves HTTP/2 (edge/server_http.go).
	//lint:ignore SA1019 the edge's own HTTP/2 server is x/net's
	h2 := &http2.Server{}
	//lint:ignore SA1019 as above
	h2.ServeConn(fc, &http2.ServeConnOpts{Context: httpfp.NewContext(ctx, fc), BaseConfig: s.h1, Handler: s.h1.Handler})
}

// serve records the request and answers a small page.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	rec := Record{Path: r.URL.Path, Proto: r.Proto, UserAgent: r.UserAgent()}
	if r.TLS != nil {
		rec.ALPN = r.TLS.NegotiatedProtocol
	}
	if fc, ok := httpfp.FromContext(r.Context()); ok {
		if tc := tlsfp.ConnOf(fc); tc != nil {
			if fp := tc.Fingerprint(); fp != nil {
				rec.JA4, rec.JA4R = fp.JA4, fp.JA4R
			}
			if fb, ok := tc.NetConn().(*firstBytesConn); ok {
				rec.Hello = fb.first()
			}
		}
	}
	if fp, ok := httpfp.FromRequest(r); ok {
		rec.H2FP, rec.HFP, rec.HFPR = fp.H2FP, fp.HFP, fp.HFPR
	}
	s.mu.Lock()
	s.records = append(s.records, rec)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	io.WriteString(w, "<!doctype html><html><head><link rel=icon href=data:,></head><body>ok</body></html>\n")
}

// Take returns the records of the requests served since the last Take.
func (s *Server) Take() []Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.records
	s.records = nil
	return out
}

// chanListener hands the server's HTTP/1 connections to net/http.
type chanListener struct {
	s    *Server
	addr net.Addr
}

func (l chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.s.ch:
		return c, nil
	case <-l.s.done:
		return nil, net.ErrClosed
	}
}

func (l chanListener) Close() error   { return nil }
func (l chanListener) Addr() net.Addr { return l.addr }

// firstBytesListener keeps the first bytes each connection reads.
type firstBytesListener struct{ net.Listener }

func (l firstBytesListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &firstBytesConn{Conn: c}, nil
}

// firstBytesConn is a connection that keeps the first 16 KiB it reads.
type firstBytesConn struct {
	net.Conn
	mu  sync.Mutex
	buf []byte
}

const maxFirstBytes = 16 << 10

func (c *firstBytesConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	if k := min(n, maxFirstBytes-len(c.buf)); k > 0 {
		c.buf = append(c.buf, p[:k]...)
	}
	c.mu.Unlock()
	return n, err
}

func (c *firstBytesConn) first() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]byte(nil), c.buf...)
}

var errNoRequest = errors.New("testcapture: the client sent no request")

// Run runs c against s and returns the records of its requests, each with
// c's name, family, version and source. The program's output is returned
// in the error when it fails.
func Run(ctx context.Context, s *Server, c Client) ([]Record, error) {
	dir, err := os.MkdirTemp("", "testcapture")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	s.Take()
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	runErr := c.run(ctx, s, dir)
	recs := s.Take()
	version, source := c.version()
	for i := range recs {
		recs[i].Client, recs[i].Family, recs[i].Version, recs[i].Source = c.Name, c.Family, version, source
	}
	if len(recs) == 0 {
		return nil, errors.Join(fmt.Errorf("%s: %w", c.Name, errNoRequest), runErr)
	}
	return recs, nil
}

// osRelease names the system, from /etc/os-release.
func osRelease() string {
	b, err := os.ReadFile("/etc/os-release")
	if err != nil {
		return "unknown system"
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "PRETTY_NAME="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return "unknown system"
}

// RunAll runs every installed client of Clients against s, one at a time,
// and returns their records sorted by client and path. Skipped names each
// client that was not run, or sent no request, with the reason.
func RunAll(ctx context.Context, s *Server) (recs []Record, skipped []string) {
	for _, c := range Clients() {
		if !c.Installed() {
			skipped = append(skipped, c.Name+": "+c.Program+" is not installed")
			continue
		}
		rs, err := Run(ctx, s, c)
		if err != nil {
			skipped = append(skipped, c.Name+": "+err.Error())
			continue
		}
		recs = append(recs, rs...)
	}
	slices.SortStableFunc(recs, func(a, b Record) int {
		return cmp.Or(cmp.Compare(a.Client, b.Client), cmp.Compare(a.Path, b.Path))
	})
	return recs, skipped
}

// Fetch runs c once against url, another server's (the edge under test):
// url is the page's, ending in "/". The program's output is returned in the
// error when it fails.
func (c Client) Fetch(ctx context.Context, url string) error {
	dir, err := os.MkdirTemp("", "testcapture")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	return c.run(ctx, &Server{URL: url}, dir)
}

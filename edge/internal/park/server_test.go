package park_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/maatproxy/maat/edge/internal/park"
	"github.com/maatproxy/maat/httpfp"
	"github.com/maatproxy/maat/internal/testclient"
)

// testServer is a plain net/http server of HTTP/1.1 over TLS whose idle
// connections a Parker parks: the least a server does to park (the Host
// and the hooks), in the order the edge's Server does it.
type testServer struct {
	pk     *park.Parker
	addr   string
	client *tls.Config // trusts the server's certificate
	events events      // of the parking, as they come
	paths  chan string // the paths of the requests the handler got

	tcp    net.Listener
	ln     *connListener // the woken and handshaken connections, for srv
	srv    *http.Server
	served chan error // srv.Serve's
	shut   sync.Once
	done   sync.WaitGroup // the accept loop and the handshakes

	mu       sync.Mutex // guards the fields below
	conns    map[net.Conn]struct{}
	shutting bool
	tracked  sync.WaitGroup // conns; Add only under mu while !shutting
}

// serverOpts are the options of newServer.
type serverOpts struct {
	after      time.Duration    // Options.After; testAfter if zero, parking off if negative
	noPoll     bool             // parked connections wait on goroutines
	idle       time.Duration    // http.Server.IdleTimeout; 2 minutes if zero
	readHeader time.Duration    // http.Server.ReadHeaderTimeout; 10 s if zero
	handler    http.Handler     // nil: echo
	trace      func(park.Event) // told of each event before the channel is
}

// testAfter is the time to park of the tests.
const testAfter = 50 * time.Millisecond

// newServer starts a server as o says, shut down when the test ends.
func newServer(t testing.TB, o serverOpts) *testServer {
	t.Helper()
	cert, err := testclient.Certificate()
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(leaf)
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &testServer{
		addr:   tcp.Addr().String(),
		client: &tls.Config{RootCAs: roots, ServerName: "localhost", NextProtos: []string{"http/1.1"}},
		events: make(events, 256),
		paths:  make(chan string, 256),
		tcp:    tcp,
		ln:     &connListener{addr: tcp.Addr(), ch: make(chan net.Conn), done: make(chan struct{})},
		served: make(chan error, 1),
		conns:  map[net.Conn]struct{}{},
	}
	opts := park.Options{After: o.after, Disabled: o.after < 0, NoPoll: o.noPoll, Trace: func(ev park.Event) {
		if o.trace != nil {
			o.trace(ev)
		}
		select {
		case s.events <- ev:
		default:
		}
	}}
	if o.after == 0 {
		opts.After = testAfter
	}
	s.pk = park.New(s, opts)
	h := o.handler
	if h == nil {
		h = echo
	}
	s.srv = &http.Server{
		Handler: httpfp.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case s.paths <- r.URL.Path:
			default:
			}
			h.ServeHTTP(w, r)
		})),
		ReadHeaderTimeout: cmp(o.readHeader, 10*time.Second),
		IdleTimeout:       cmp(o.idle, 2*time.Minute),
		ErrorLog:          log.New(io.Discard, "", 0),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			switch c := c.(type) {
			case *park.Conn:
				return httpfp.NewContext(ctx, c.Conn)
			case *httpfp.Conn:
				return httpfp.NewContext(ctx, c)
			}
			return ctx
		},
		ConnState: func(c net.Conn, st http.ConnState) {
			if c, ok := c.(*park.Conn); ok {
				c.ConnState(st)
			}
		},
	}
	go func() { s.served <- s.srv.Serve(s.ln) }()
	s.done.Go(func() { s.accept(cert) })
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return s
}

// cmp is d, or def if d is zero.
func cmp(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// echo answers with the method, path and body it got, and whether the
// request was fingerprinted by the connection's tap.
var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	fp, ok := httpfp.FromRequest(r)
	fmt.Fprintf(w, "%s %s %q fp=%t", r.Method, r.URL.Path, body, ok && fp.HFP != "")
})

// accept handshakes each connection on a goroutine of its own and gives
// it, wrapped, to the http.Server.
func (s *testServer) accept(cert tls.Certificate) {
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}}
	for {
		c, err := s.tcp.Accept()
		if err != nil {
			return
		}
		if !s.Track(c) {
			_ = c.Close()
			continue
		}
		s.done.Go(func() {
			defer s.Untrack(c)
			tc := tls.Server(c, cfg)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := tc.HandshakeContext(ctx)
			cancel()
			if err != nil || !s.ln.push(s.pk.Wrap(httpfp.NewConn(tc, httpfp.H1, httpfp.Config{}))) {
				_ = tc.Close()
			}
		})
	}
}

// Track is park.Host's.
func (s *testServer) Track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shutting {
		return false
	}
	s.conns[c] = struct{}{}
	s.tracked.Add(1)
	return true
}

// Untrack is park.Host's.
func (s *testServer) Untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.tracked.Done()
}

// Resume is park.Host's.
func (s *testServer) Resume(c net.Conn) bool { return s.ln.push(c) }

// shutdown shuts the server down as the edge's Server does: parked
// connections closed at once, the http.Server's Shutdown, the tracked
// connections waited for until ctx ends then closed, the Parker closed
// last. Once.
func (s *testServer) shutdown(ctx context.Context) error {
	var err error
	s.shut.Do(func() {
		s.mu.Lock()
		s.shutting = true
		s.mu.Unlock()
		_ = s.tcp.Close()
		s.pk.Shutdown()
		err = s.srv.Shutdown(ctx)
		waited := make(chan struct{})
		go func() {
			s.tracked.Wait()
			close(waited)
		}()
		select {
		case <-waited:
		case <-ctx.Done():
			err = errors.Join(err, fmt.Errorf("tracked connections left: %w", ctx.Err()))
			s.mu.Lock()
			for c := range s.conns {
				_ = c.Close()
			}
			s.mu.Unlock()
			<-waited
		}
		_ = s.srv.Close()
		s.pk.Close()
		s.done.Wait()
		if serr := <-s.served; !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
	})
	return err
}

// connListener feeds connections to an http.Server.
type connListener struct {
	addr   net.Addr
	ch     chan net.Conn
	done   chan struct{}
	closed sync.Once
}

func (l *connListener) push(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *connListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *connListener) Close() error {
	l.closed.Do(func() { close(l.done) })
	return nil
}

func (l *connListener) Addr() net.Addr { return l.addr }

// dial opens an HTTP/1.1 connection to s.
func (s *testServer) dial(t testing.TB) (*tls.Conn, *bufio.Reader) {
	t.Helper()
	c, err := tls.Dial("tcp", s.addr, s.client)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	return c, bufio.NewReader(c)
}

// requested opens an HTTP/1.1 connection to s and makes a request on it.
func (s *testServer) requested(t testing.TB) (*tls.Conn, *bufio.Reader) {
	t.Helper()
	c, br := s.dial(t)
	fmt.Fprintf(c, get, "x")
	if code, _ := answer(t, br); code != 200 {
		t.Fatalf("request: %d", code)
	}
	return c, br
}

// parked is requested, then waits until the connection is parked, the
// only one of s.
func (s *testServer) parked(t testing.TB) (*tls.Conn, *bufio.Reader) {
	t.Helper()
	c, br := s.requested(t)
	s.waitParked(t, 1)
	return c, br
}

// waitParked waits until n connections are parked.
func (s *testServer) waitParked(t testing.TB, n int64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); s.pk.Parked() != n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("parked connections: %d, want %d", s.pk.Parked(), n)
		}
	}
}

// readLastAnswer reads the answer to a request that the client sent with
// its FIN, to path. net/http takes the FIN for the client giving the
// request up, on a connection never parked too, so the handler's answer
// may or may not reach the client; never another. The request must have
// reached the handler either way.
func (s *testServer) readLastAnswer(t *testing.T, br *bufio.Reader, path string) {
	t.Helper()
	if _, err := br.Peek(1); err == io.EOF {
		timeout := time.After(10 * time.Second)
		for {
			select {
			case p := <-s.paths:
				if p == path {
					return
				}
				continue
			case <-timeout:
				t.Fatalf("%s: no answer, and the request never reached the handler", path)
			}
		}
	}
	code, body := answer(t, br)
	if code != http.StatusOK || body != fmt.Sprintf(`GET %s "" fp=true`, path) {
		t.Fatalf("%s: %d %q, want the handler's answer or none", path, code, body)
	}
}

// answer reads one response and returns its status and body.
func answer(t testing.TB, br *bufio.Reader) (int, string) {
	t.Helper()
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatalf("reading the answer's body: %v", err)
	}
	return res.StatusCode, string(body)
}

const get = "GET /%s HTTP/1.1\r\nHost: localhost\r\n\r\n"

// events are the events of a server's parking, as they come.
type events chan park.Event

// next waits for the next event of one of kinds, skipping others.
func (ch events) next(t *testing.T, kinds ...park.EventKind) park.Event {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev := <-ch:
			if slices.Contains(kinds, ev.Kind) {
				return ev
			}
		case <-timeout:
			t.Fatalf("no parking event of kinds %v in 20s", kinds)
		}
	}
}

// nextIdle waits for the next Checked event of a connection that served
// a request, skipping others.
func (ch events) nextIdle(t *testing.T) park.Event {
	t.Helper()
	for {
		if ev := ch.next(t, park.Checked); !ev.First {
			return ev
		}
	}
}

// tryWithin waits d for the server to try to park a connection that
// served a request (a Checked event), and returns the try if there was
// one.
func (ch events) tryWithin(d time.Duration) (park.Event, bool) {
	timeout := time.After(d)
	for {
		select {
		case ev := <-ch:
			if ev.Kind == park.Checked && !ev.First {
				return ev, true
			}
		case <-timeout:
			return park.Event{}, false
		}
	}
}

// drain forgets the events so far.
func (ch events) drain() {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// bothWaits runs test with parked connections waiting on epoll (on Linux)
// and on goroutines.
func bothWaits(t *testing.T, test func(t *testing.T, noPoll bool)) {
	for _, noPoll := range []bool{false, true} {
		t.Run(map[bool]string{false: "poller", true: "goroutines"}[noPoll], func(t *testing.T) {
			t.Parallel()
			test(t, noPoll)
		})
	}
}

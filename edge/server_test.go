package edge

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maatproxy/maat/edge/config"
)

// newBareServer builds a Server on loopback with HTTP/3, port 80 and the
// admin port off, whose listeners the test hands over in bound (by
// configured address); it does not start it.
func newBareServer(t *testing.T, listen string, bound map[string]net.Listener) *Server {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte("listen: {"+listen+", http3: false}\n"+
		"tls: { mode: self-signed, cache: \"\" }\nsites: [{hosts: [localhost], upstream: 'http://127.0.0.1:1'}]\n"))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	s, err := New(cfg, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	s.bound = bound
	return s
}

// gateListener hands over its one connection only when it is closed: a
// connection that arrives just as Shutdown closes the listeners. It binds
// a real loopback port, for its address.
type gateListener struct {
	net.Listener
	conn   net.Conn
	handed atomic.Bool
	closed chan struct{}
	once   sync.Once
}

func (l *gateListener) Accept() (net.Conn, error) {
	<-l.closed
	if l.handed.CompareAndSwap(false, true) {
		return l.conn, nil
	}
	return nil, net.ErrClosed
}

func (l *gateListener) Close() error {
	l.once.Do(func() { close(l.closed); _ = l.Listener.Close() })
	return nil
}

// witnessConn records whether anything read from the connection, and when
// it was closed.
type witnessConn struct {
	net.Conn
	reads  atomic.Int64
	closed chan struct{}
	once   sync.Once
}

func (c *witnessConn) Read(p []byte) (int, error) {
	c.reads.Add(1)
	return c.Conn.Read(p)
}

func (c *witnessConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// TestConnArrivingDuringShutdownRefused: a connection accepted once
// Shutdown has begun is closed by the accept loop, never tracked and never
// handshaken (net/http's trackConn), so Shutdown's wait cannot miss it;
// trackConn refuses any connection after Shutdown.
func TestConnArrivingDuringShutdownRefused(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	wc := &witnessConn{Conn: server, closed: make(chan struct{})}
	gate := &gateListener{Listener: ln, conn: wc, closed: make(chan struct{})}
	addr := ln.Addr().String()
	s := newBareServer(t, `https: "`+addr+`", http: "", admin: ""`, map[string]net.Listener{addr: gate})
	if err := s.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if !gate.handed.Load() {
		t.Fatal("the accept loop never took the connection")
	}
	select {
	case <-wc.closed:
	default:
		t.Error("a connection that arrived during shutdown was still open when Shutdown returned")
	}
	if n := wc.reads.Load(); n != 0 {
		t.Errorf("a connection that arrived during shutdown was read %d times: it went to a handshake", n)
	}
	if n := seriesCount(s.metrics.handshakes); n != 0 {
		t.Errorf("%d handshake series after a refused connection", n)
	}

	late, other := net.Pipe()
	defer late.Close()
	defer other.Close()
	if s.trackConn(late) {
		t.Error("trackConn accepted a connection after Shutdown")
		s.untrackConn(late)
	}
	s.mu.Lock()
	n := len(s.conns)
	s.mu.Unlock()
	if n != 0 {
		t.Errorf("%d connections tracked after Shutdown", n)
	}
}

// failingListener is a listener whose Accept fails for good.
type failingListener struct {
	net.Listener
	err error
}

func (l *failingListener) Accept() (net.Conn, error) { return nil, l.err }

// TestServeReturnsAPartsError: when one of the Server's goroutines fails
// (here port 80's http.Server, whose listener broke), Serve stops, drains
// and returns that error to its caller, instead of serving on without it.
func TestServeReturnsAPartsError(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	errBroken := errors.New("listener broke")
	addr := ln.Addr().String()
	s := newBareServer(t, `https: "127.0.0.1:0", http: "`+addr+`", admin: ""`,
		map[string]net.Listener{addr: &failingListener{Listener: ln, err: errBroken}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = s.Serve(ctx)
	if !errors.Is(err, errBroken) {
		t.Fatalf("Serve = %v, want the http listener's %v", err, errBroken)
	}
	if ctx.Err() != nil {
		t.Error("Serve returned only when its context ended")
	}
	if !strings.Contains(err.Error(), "http") {
		t.Errorf("Serve = %v: the failing part is not named", err)
	}
}

// maatGoroutines counts the goroutines running code of this module (test
// functions aside) and returns their stacks, for a report.
func maatGoroutines() (int, string) {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var b strings.Builder
	count := 0
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "github.com/maatproxy/maat/") && !strings.Contains(g, "maat/edge.Test") {
			count++
			b.WriteString(g + "\n\n")
		}
	}
	return count, b.String()
}

// openUnder lists the file descriptors of this process open on files
// under dir (Linux; elsewhere it reports none).
func openUnder(t *testing.T, dir string) []string {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		if runtime.GOOS == "linux" {
			t.Fatal(err)
		}
		return nil
	}
	var out []string
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.HasPrefix(target, dir+string(filepath.Separator)) {
			out = append(out, target)
		}
	}
	return out
}

// checkReleased fails t unless the module's goroutines are back to before
// (within a deadline: stopped goroutines take a moment to return) and no
// file under dir is open.
func checkReleased(t *testing.T, before int, dir string) {
	t.Helper()
	var stacks string
	if !waitFor(t, 10*time.Second, func() bool {
		var n int
		n, stacks = maatGoroutines()
		return n <= before
	}) {
		t.Errorf("goroutines left running:\n%s", stacks)
	}
	if open := openUnder(t, dir); len(open) > 0 {
		t.Errorf("files left open: %q", open)
	}
}

// TestNewReleasesWhatItOpened: a New that fails half-way, after the store,
// the fingerprint log and the access log started, stops their goroutines
// and closes their files before it returns.
func TestNewReleasesWhatItOpened(t *testing.T) {
	// Not parallel: it counts this process's goroutines.
	dir := t.TempDir()
	bad := filepath.Join(dir, "corrupt.mmdb")
	if err := os.WriteFile(bad, []byte("not a database"), 0o644); err != nil {
		t.Fatal(err)
	}
	badPolicy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(badPolicy, []byte("bots: [{name: x, action: NOT-AN-ACTION}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := "tls: { mode: self-signed, cache: \"\" }\nlog: {fingerprints: " + filepath.Join(dir, "fp.jsonl") + "}\n" +
		"sites: [{hosts: [localhost], upstream: 'http://127.0.0.1:1', access_log: {path: " + filepath.Join(dir, "access.log") + "}}]\n"
	for _, tt := range []struct{ name, extra, want string }{
		{"a corrupt geo database", "geo: {asn_db: " + bad + "}\n", "geo"},
		{"a policy that does not load", "policy: " + badPolicy + "\n", "policy"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := config.Parse("test.yaml", []byte(base+tt.extra))
			if err != nil {
				t.Fatalf("config: %v", err)
			}
			before, _ := maatGoroutines()
			s, err := New(cfg, nil)
			if err == nil {
				_ = s.Shutdown(context.Background())
				t.Fatal("New succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New failed for another reason: %v", err)
			}
			checkReleased(t, before, dir)
		})
	}
}

// TestServeReleasesWhatItOpenedOnAPortInUse: a Serve whose listener
// cannot bind (the port is taken on 127.0.0.1) returns the error having
// stopped every goroutine and closed every file the Server opened.
func TestServeReleasesWhatItOpenedOnAPortInUse(t *testing.T) {
	// Not parallel: it counts this process's goroutines.
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dir := t.TempDir()
	cfg, err := config.Parse("test.yaml", []byte("listen: {https: \"127.0.0.1:0\", http: \""+taken.Addr().String()+"\", admin: \"\"}\n"+
		"tls: { mode: self-signed, cache: \"\" }\nlog: {fingerprints: "+filepath.Join(dir, "fp.jsonl")+"}\n"+
		"sites: [{hosts: [localhost], upstream: 'http://127.0.0.1:1', access_log: {path: "+filepath.Join(dir, "access.log")+"}}]\n"))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	before, _ := maatGoroutines()
	s, err := New(cfg, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := s.Serve(context.Background()); err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("Serve = %v, want the port in use", err)
	}
	checkReleased(t, before, dir)
}

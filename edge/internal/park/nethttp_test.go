package park_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"
)

// recordConn records the calls net/http makes on a connection, and can end
// the wait for a request with io.EOF, as a parking Read does.
type recordConn struct {
	net.Conn
	eof bool // end the wait for the next request with io.EOF

	mu      sync.Mutex
	calls   []string
	changed *sync.Cond // on mu: a call was added, or a wait expired
}

func (c *recordConn) add(call string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, call)
	c.changed.Broadcast()
}

func (c *recordConn) state(st http.ConnState) { c.add("state " + st.String()) }

// wait waits until the calls so far satisfy cond, for ten seconds at
// most, and reports whether they did.
func (c *recordConn) wait(cond func(calls []string) bool) bool {
	expired := false // guarded by mu
	timer := time.AfterFunc(10*time.Second, func() {
		c.mu.Lock()
		expired = true
		c.changed.Broadcast()
		c.mu.Unlock()
	})
	defer timer.Stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	for !cond(slices.Clone(c.calls)) {
		if expired {
			return false
		}
		c.changed.Wait()
	}
	return true
}

func (c *recordConn) seen() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.calls)
}

func (c *recordConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	eof := c.eof && len(c.calls) >= 2 && c.calls[len(c.calls)-2] == "state idle" && c.calls[len(c.calls)-1] == "deadline"
	c.calls = append(c.calls, "read")
	c.changed.Broadcast()
	c.mu.Unlock()
	if eof {
		return 0, io.EOF
	}
	return c.Conn.Read(p)
}

func (c *recordConn) Write(p []byte) (int, error) {
	c.add("write")
	return c.Conn.Write(p)
}

func (c *recordConn) SetReadDeadline(t time.Time) error {
	c.add("deadline")
	return c.Conn.SetReadDeadline(t)
}

func (c *recordConn) Close() error {
	c.add("close")
	return c.Conn.Close()
}

// oneConnListener hands one connection to an http.Server.
type oneConnListener struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *oneConnListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *oneConnListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// TestNetHTTPParkContract pins what parking relies on net/http's server
// doing with a connection (the package documentation's list): a plain
// http.Server serves a recorded connection.
func TestNetHTTPParkContract(t *testing.T) {
	t.Parallel()
	serve := func(t *testing.T, eof bool) (*recordConn, net.Conn) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		client, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { client.Close() })
		sc, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		rc := &recordConn{Conn: sc, eof: eof}
		rc.changed = sync.NewCond(&rc.mu)
		srv := &http.Server{
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       time.Minute,
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				rc.add("handler " + r.URL.Path)
				io.WriteString(w, r.URL.Path)
			}),
			ConnState: func(_ net.Conn, st http.ConnState) { rc.state(st) },
		}
		hl := &oneConnListener{ch: make(chan net.Conn, 1), done: make(chan struct{})}
		hl.ch <- rc
		go srv.Serve(hl)
		t.Cleanup(func() { srv.Close() })
		return rc, client
	}
	// after returns the calls after the n-th (from 1) of call, once the
	// calls include want more.
	after := func(t *testing.T, rc *recordConn, call string, n, want int) []string {
		t.Helper()
		var rest []string
		if !rc.wait(func(calls []string) bool {
			i := -1
			for seen := 0; seen < n; seen++ {
				j := slices.Index(calls[i+1:], call)
				if j < 0 {
					return false
				}
				i += j + 1
			}
			rest = calls[i+1:]
			return len(rest) >= want
		}) {
			t.Fatalf("calls %q: not %d after %q number %d", rc.seen(), want, call, n)
		}
		return rest[:want]
	}
	get := "GET /%s HTTP/1.1\r\nHost: x\r\n\r\n"

	t.Run("new", func(t *testing.T) {
		t.Parallel()
		rc, _ := serve(t, false)
		if got := after(t, rc, "state new", 1, 2); !slices.Equal(got, []string{"deadline", "read"}) {
			t.Fatalf("a new connection's first calls: %q, want the header deadline, then the read", got)
		}
	})
	t.Run("idle", func(t *testing.T) {
		t.Parallel()
		rc, client := serve(t, false)
		fmt.Fprintf(client, get, "a")
		if got := after(t, rc, "state idle", 1, 2); !slices.Equal(got, []string{"deadline", "read"}) {
			t.Fatalf("after a request, calls %q, want the idle deadline, then the wait's read", got)
		}
	})
	t.Run("pipelined", func(t *testing.T) {
		t.Parallel()
		rc, client := serve(t, false)
		fmt.Fprintf(client, get+get, "a", "b")
		var calls []string
		if !rc.wait(func(seen []string) bool {
			calls = seen
			return count(calls, "state idle") >= 2
		}) {
			t.Fatalf("calls %q: the two requests were not served", calls)
		}
		i := slices.Index(calls, "state idle")
		second := calls[i+1 : i+1+slices.Index(calls[i+1:], "state idle")]
		// The idle deadline, then the header deadline: the next request
		// was in net/http's buffer, and its wait did not read.
		if len(second) < 2 || second[0] != "deadline" || second[1] != "deadline" {
			t.Fatalf("after a request with the next one buffered, calls %q, want two deadlines before anything else", second)
		}
		// The buffered request is served, and a background read waits on
		// the connection as its handler runs.
		if !slices.Contains(second, "handler /b") || !slices.Contains(second[2:], "read") {
			t.Fatalf("the buffered request's calls %q: want its handler and a read", second)
		}
	})
	t.Run("eof", func(t *testing.T) {
		t.Parallel()
		rc, client := serve(t, true)
		fmt.Fprintf(client, get, "a")
		if got := after(t, rc, "state idle", 1, 4); !slices.Equal(got, []string{"deadline", "read", "close", "state closed"}) {
			t.Fatalf("after the wait's read ended with io.EOF, calls %q, want one close, no write", got)
		}
	})
}

// count is how many of calls are call.
func count(calls []string, call string) int {
	n := 0
	for _, c := range calls {
		if c == call {
			n++
		}
	}
	return n
}

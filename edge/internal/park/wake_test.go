package park_test

// Tests of a parked connection's wake: what the client sends it, read
// through TLS.

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maatproxy/maat/edge/internal/park"
)

// holdConn is a client's TCP connection under its TLS, whose writes can be
// caught (capture) and sent later in pieces of our choosing.
type holdConn struct {
	net.Conn
	mu   sync.Mutex
	hold bool
	held []byte
}

func (c *holdConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hold {
		c.held = append(c.held, p...)
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// capture returns the bytes f writes, which do not go out.
func (c *holdConn) capture(f func()) []byte {
	c.mu.Lock()
	c.hold, c.held = true, nil
	c.mu.Unlock()
	f()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hold = false
	return c.held
}

// dialHeld is dial with the TCP connection under the client's TLS at
// hand, speaking TLS version v (0: the highest).
func (s *testServer) dialHeld(t *testing.T, v uint16) (*holdConn, *tls.Conn, *bufio.Reader) {
	t.Helper()
	nc, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	hc := &holdConn{Conn: nc}
	cfg := s.client.Clone()
	cfg.MaxVersion = v
	c := tls.Client(hc, cfg)
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if err := c.Handshake(); err != nil {
		t.Fatal(err)
	}
	return hc, c, bufio.NewReader(c)
}

// TestParkedRecordTail: a request whose TLS record came partly before a
// connection parked (crypto/tls keeps what it read of the record when its
// read times out) and whose last bytes — no more than a close_notify alert
// would take — come later, together with the client's FIN, is read and
// served as on a connection never parked (readLastAnswer): only crypto/tls
// can tell a record's tail from an alert.
func TestParkedRecordTail(t *testing.T) {
	t.Parallel()
	bothWaits(t, parkedRecordTail)
}

func parkedRecordTail(t *testing.T, noPoll bool) {
	s := newServer(t, serverOpts{noPoll: noPoll})
	hc, c, br := s.dialHeld(t, 0)
	fmt.Fprintf(c, get, "x")
	if code, _ := answer(t, br); code != 200 {
		t.Fatalf("request: %d", code)
	}
	s.waitParked(t, 1)
	s.events.drain()
	record := hc.capture(func() { fmt.Fprintf(c, get, "tail") })
	const tail = 20 // no more than a close_notify alert record (24 bytes in TLS 1.3, 31 in 1.2)
	if _, err := hc.Conn.Write(record[:len(record)-tail]); err != nil {
		t.Fatal(err)
	}
	s.events.next(t, park.Rewait) // the head was read, and the connection waits on
	s.waitParked(t, 1)
	if _, err := hc.Conn.Write(record[len(record)-tail:]); err != nil {
		t.Fatal(err)
	}
	if err := hc.Conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	s.readLastAnswer(t, br, "/tail")
	s.waitParked(t, 0)
}

// TestParkedGoodbye: a client that closes its parked connection — a TCP
// FIN alone, or after a close_notify alert, in TLS 1.2 (an alert record)
// or TLS 1.3 (an alert inside an application data record) — has it closed
// where it waits: net/http never sees it.
func TestParkedGoodbye(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		v      uint16
		notify bool
	}{
		{"FIN", 0, false}, {"TLS 1.3 close_notify", tls.VersionTLS13, true}, {"TLS 1.2 close_notify", tls.VersionTLS12, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			bothWaits(t, func(t *testing.T, noPoll bool) {
				s := newServer(t, serverOpts{noPoll: noPoll})
				hc, c, br := s.dialHeld(t, tc.v)
				fmt.Fprintf(c, get, "x")
				if code, _ := answer(t, br); code != 200 {
					t.Fatalf("request: %d", code)
				}
				s.waitParked(t, 1)
				s.events.drain()
				if tc.notify {
					if err := c.CloseWrite(); err != nil {
						t.Fatal(err)
					}
				}
				if err := hc.Conn.(*net.TCPConn).CloseWrite(); err != nil {
					t.Fatal(err)
				}
				if ev := s.events.next(t, park.Woke, park.HungUp); ev.Kind != park.HungUp {
					t.Fatal("the goodbye went to net/http")
				}
				if _, err := br.ReadByte(); err != io.EOF {
					t.Fatalf("after the goodbye: %v, want EOF", err)
				}
				s.waitParked(t, 0)
			})
		})
	}
}

// TestParkedRequestAndFIN: a request sent on a parked connection together
// with the client's FIN (no close_notify) is read and served as on a
// connection never parked (readLastAnswer).
func TestParkedRequestAndFIN(t *testing.T) {
	t.Parallel()
	bothWaits(t, func(t *testing.T, noPoll bool) {
		s := newServer(t, serverOpts{noPoll: noPoll})
		hc, c, br := s.dialHeld(t, 0)
		fmt.Fprintf(c, get, "x")
		if code, _ := answer(t, br); code != 200 {
			t.Fatalf("request: %d", code)
		}
		s.waitParked(t, 1)
		record := hc.capture(func() { fmt.Fprintf(c, get, "last") })
		if _, err := hc.Conn.Write(record); err != nil {
			t.Fatal(err)
		}
		if err := hc.Conn.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		s.readLastAnswer(t, br, "/last")
	})
}

// TestParkedTLSTrickleTimesOut: a client that wakes its parked connection
// again and again with a byte of a TLS record, never completing it, is
// closed when the idle timeout passes, as net/http closes one it holds:
// a wake does not restart the wait.
func TestParkedTLSTrickleTimesOut(t *testing.T) {
	t.Parallel()
	bothWaits(t, func(t *testing.T, noPoll bool) {
		const idle = 600 * time.Millisecond
		s := newServer(t, serverOpts{noPoll: noPoll, idle: idle, readHeader: 30 * time.Second})
		hc, c, br := s.dialHeld(t, 0)
		start := time.Now()
		fmt.Fprintf(c, get, "x")
		if code, _ := answer(t, br); code != 200 {
			t.Fatalf("request: %d", code)
		}
		s.waitParked(t, 1)
		// A request of 4 KiB, in one record, sent a byte per wake.
		record := hc.capture(func() {
			fmt.Fprintf(c, "GET /t HTTP/1.1\r\nHost: localhost\r\nX-Pad: %s\r\n\r\n", strings.Repeat("p", 4000))
		})
		closed := make(chan error, 1)
		go func() {
			_, err := br.ReadByte()
			closed <- err
		}()
		s.events.drain()
		bound := time.After(15 * time.Second)
		for i := 0; ; i++ {
			if i == len(record)-1 {
				t.Fatal("the whole record but a byte went out, and the connection is still open")
			}
			if _, err := hc.Conn.Write(record[i : i+1]); err != nil {
				break // closed
			}
			select {
			case <-s.events:
				continue
			case err := <-closed:
				if err != io.EOF {
					t.Fatalf("the trickling connection: %v, want EOF", err)
				}
			case <-bound:
				t.Fatalf("still open after %v, its idle timeout %v", time.Since(start), idle)
			}
			break
		}
		if d := time.Since(start); d < idle {
			t.Fatalf("closed after %v, before the idle timeout of %v", d, idle)
		}
	})
}

// TestParkedLastRequest: a client that sends one more request on a parked
// connection and closes its sending side at once (TLS close_notify, then
// a TCP FIN) has the request read and served as on a connection never
// parked (readLastAnswer): only a goodbye with nothing before it is taken
// for a hang-up.
func TestParkedLastRequest(t *testing.T) {
	t.Parallel()
	bothWaits(t, parkedLastRequest)
}

func parkedLastRequest(t *testing.T, noPoll bool) {
	s := newServer(t, serverOpts{noPoll: noPoll})
	c, br := s.parked(t)
	fmt.Fprintf(c, get, "last")
	if err := c.CloseWrite(); err != nil { // close_notify
		t.Fatal(err)
	}
	if err := c.NetConn().(*net.TCPConn).CloseWrite(); err != nil { // FIN
		t.Fatal(err)
	}
	s.readLastAnswer(t, br, "/last")
	s.waitParked(t, 0)
}

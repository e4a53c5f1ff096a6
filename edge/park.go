package edge

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/maatproxy/maat/httpfp"
)

// An idle HTTP/1 connection is parked: net/http keeps a 4 KiB read buffer,
// a 4 KiB write buffer and a goroutine whose stack grew with the last
// request for as long as a connection lives, idle or not (a browser keeps
// a connection idle for minutes). When a connection has been idle for
// limits.park_after, stands between requests (httpfp's tap has seen each byte read
// belong to a request read whole, so net/http's buffer is empty) and has no
// bytes buffered below, the edge ends net/http's hold on it — net/http
// sees the end of the stream and gives its buffers back — and waits, with
// no buffer, for the socket to become readable: on Linux in one epoll set
// for every parked connection, elsewhere on a small goroutine of its own
// (not at all where a socket cannot be peeked at). When the next request
// comes, the connection goes back to net/http as a new one, idle again
// until its first byte (should the wait have woken without one, it parks
// again); the client sees nothing of it. The idle timeout runs on as it
// did.

// defaultParkAfter is how long a connection is idle before it is parked
// unless limits.park_after says otherwise (0s: never): long
// enough that a client sending its next request at once (a benchmark, a
// page's subresources) does not pay for the hand-over, short enough that
// the connections of a burst of clients are not all held whole at once.
// (At one second, 5,000 connections opened at a thousand a second left the
// edge 17.3 KB of resident memory per idle HTTP/1.1 connection, against
// 13.5 KB at 250 ms: the memory the connections not yet parked took stays
// with the process. A hand-over costs a connection a few microseconds, and
// nothing measurable per request after it.) HTTP/2 connections are not
// parked: net/http's HTTP/2 server has no supported way to let go of a
// connection and take it up again.
const defaultParkAfter = 250 * time.Millisecond

// clientConn is a client's HTTP/1 connection as the http.Server holds it.
type clientConn struct {
	*httpfp.Conn
	s *Server

	// net/http calls ConnState, SetReadDeadline and Read of an idle
	// connection one after the other, on its goroutine; a handler may set
	// a read deadline while net/http reads in the background, so the
	// flags are atomic.
	idle     atomic.Bool // ConnState said idle; the next Read may park
	short    atomic.Bool // the read deadline set is the time to park, not deadline
	deadline time.Time   // the read deadline net/http set while idle

	parked atomic.Bool // the last Read parked it; Close hands it over
}

// newClientConn wraps hc for the http.Server, idle until its first byte.
func newClientConn(hc *httpfp.Conn, s *Server) *clientConn {
	c := &clientConn{Conn: hc, s: s}
	c.idle.Store(true)
	return c
}

// setIdle is called by the http.Server's ConnState hook.
func (c *clientConn) setIdle() { c.idle.Store(true) }

func (c *clientConn) SetReadDeadline(t time.Time) error {
	if after := c.s.parkAfter(); after > 0 && c.idle.Load() {
		c.deadline = t
		if p := time.Now().Add(after); t.IsZero() || p.Before(t) {
			c.short.Store(true)
			return c.Conn.SetReadDeadline(p)
		}
	}
	c.short.Store(false)
	return c.Conn.SetReadDeadline(t)
}

func (c *clientConn) SetDeadline(t time.Time) error {
	c.short.Store(false)
	return c.Conn.SetDeadline(t)
}

// Read reads as httpfp.Conn does. The first read after the connection fell
// idle ends with io.EOF when it parks the connection.
func (c *clientConn) Read(p []byte) (int, error) {
	if !c.idle.Load() {
		if c.short.CompareAndSwap(true, false) { // a request began before the time to park
			if err := c.Conn.SetReadDeadline(c.deadline); err != nil {
				return 0, err
			}
		}
		return c.Conn.Read(p)
	}
	c.idle.Store(false)
	n, err := c.Conn.Read(p)
	if n > 0 || !isTimeout(err) || !c.short.CompareAndSwap(true, false) {
		return n, err
	}
	atRest := c.Conn.AtRest()
	if check := c.s.base.parkCheck; check != nil {
		check(atRest)
	}
	if parkable && atRest && socketOf(c.Conn) != nil {
		c.parked.Store(true)
		return 0, io.EOF // net/http ends its hold and calls Close
	}
	if err := c.Conn.SetReadDeadline(c.deadline); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

// Close closes the connection, or, when Read parked it, hands it to a
// goroutine that waits for its next byte.
func (c *clientConn) Close() error {
	if c.parked.CompareAndSwap(true, false) {
		c.s.park(c.Conn, c.deadline)
		return nil
	}
	return c.Conn.Close()
}

// park waits until hc is readable, then hands it back to the http.Server;
// it closes hc when deadline (the idle timeout net/http set) passes first,
// or the Server shuts down. On Linux one epoll instance waits for every
// parked connection (park_linux.go); elsewhere, or should epoll refuse, a
// goroutine waits for each.
func (s *Server) park(hc *httpfp.Conn, deadline time.Time) {
	hc.Rest()
	rc := rawConn(hc)
	p := &parkedConn{s: s, hc: hc, rc: rc}
	p.mu.Lock() // until p is set up: done, which may be called at once, waits
	if rc == nil || !s.trackParked(p) {
		p.mu.Unlock()
		_ = hc.Close()
		return
	}
	s.parked.Add(1)
	if !deadline.IsZero() {
		p.timer = time.AfterFunc(time.Until(deadline), func() { p.done(errIdleTimeout) })
	}
	polled := !s.base.parkNoPoll && s.poller.add(p)
	p.mu.Unlock()
	if polled {
		return
	}
	if err := hc.SetReadDeadline(time.Time{}); err != nil { // the time to park passed: p.timer rules now
		p.done(err)
		return
	}
	go func() {
		// Wait until the socket is readable (or the peer closed it, or
		// p.done closed it), reading nothing: every layer above it was
		// empty when the connection was parked. The runtime forgets, as
		// the wait begins, that the socket became readable before it:
		// a peek first finds bytes that came meanwhile.
		waited := false
		err := rc.Read(func(fd uintptr) bool {
			if waited {
				return true
			}
			waited = true
			return readable(fd)
		})
		p.done(err)
	}()
}

var (
	errShutdown    = errors.New("edge: shutting down")
	errIdleTimeout = errors.New("edge: idle timeout")
	errHungUp      = errors.New("edge: the client hung up") // a parked connection's
)

// parkedConn is a parked connection.
type parkedConn struct {
	s  *Server
	hc *httpfp.Conn
	rc syscall.RawConn
	id uint64 // its key in the poller

	mu       sync.Mutex // held while park sets p up, and done takes it down
	timer    *time.Timer
	finished atomic.Bool
}

// done ends the parking, once: with err nil the connection is readable
// and goes back to the http.Server, otherwise it is closed.
func (p *parkedConn) done(err error) {
	if !p.finished.CompareAndSwap(false, true) {
		return
	}
	p.mu.Lock()
	p.s.mu.Lock()
	delete(p.s.parkedConns, p)
	p.s.mu.Unlock()
	if p.timer != nil {
		p.timer.Stop()
	}
	p.s.poller.remove(p)
	p.mu.Unlock()
	p.s.parked.Add(-1)
	if err != nil || !p.s.h1ln.push(newClientConn(p.hc, p.s)) {
		_ = p.hc.Close()
	}
	p.s.untrackConn(p.hc)
}

// trackParked tracks p's connection (trackConn) and registers p, where
// Shutdown finds the parked connections to close, in one step: a
// connection is either registered before Shutdown looks or refused.
func (s *Server) trackParked(p *parkedConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.trackLocked(p.hc) {
		return false
	}
	if s.parkedConns == nil {
		s.parkedConns = map[*parkedConn]struct{}{}
	}
	s.parkedConns[p] = struct{}{}
	return true
}

// closeParked ends every parked connection: Shutdown's first step, as
// net/http closes its idle connections at once.
func (s *Server) closeParked() {
	s.mu.Lock()
	parked := make([]*parkedConn, 0, len(s.parkedConns))
	for p := range s.parkedConns {
		parked = append(parked, p)
	}
	s.mu.Unlock()
	for _, p := range parked {
		p.done(errShutdown)
	}
}

// parkAfter is limits.park_after of the configuration in force; 0 means
// never park.
func (s *Server) parkAfter() time.Duration {
	return s.handler.Load().cfg.Limits.ParkAfter.D()
}

// rawConn is the socket under c's wrappers, or nil if it has none.
func rawConn(c net.Conn) syscall.RawConn {
	sc := socketOf(c)
	if sc == nil {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

// socketOf is the connection under c's wrappers that has a socket, or nil.
// Unlike rawConn it allocates nothing: the checks of whether a connection
// may park call it, and park takes the socket itself.
func socketOf(c net.Conn) syscall.Conn {
	for range 8 {
		if sc, ok := c.(syscall.Conn); ok {
			return sc
		}
		nc, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		c = nc.NetConn()
	}
	return nil
}

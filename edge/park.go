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

// Parking idle HTTP/1.1 connections (limits.park_after; 0s: never).
//
// net/http keeps a 4 KiB read buffer, a 4 KiB write buffer and a goroutine
// whose stack grew with the last request for as long as a connection
// lives, idle or not (a browser keeps a connection idle for minutes). When
// net/http has waited limits.park_after for a connection's next request,
// with no request in flight and no byte of one in its buffer, the edge
// ends net/http's hold on it — net/http sees the end of the stream and
// gives its buffers back — and waits, with no buffer, for the socket to
// become readable: on Linux in one epoll set for every parked connection,
// elsewhere on a small goroutine of its own (not at all where a socket
// cannot be peeked at). When it is, the edge reads the first byte through
// TLS and hands the connection back to net/http as a new one, that byte
// first; a close_notify alert or a bare FIN ends it there, and a wake
// without a whole record parks it again. The client sees nothing of it;
// the idle timeout runs on as it did.
//
// What parking relies on, each pinned by the test named:
//
// net/http's server (conn.serve):
//   - After each request it keeps the connection for, it calls
//     ConnState(StateIdle), then SetReadDeadline once (the idle timeout),
//     then waits for the next request with a Peek of 4 bytes on its
//     buffer, which reads the connection only when it holds fewer. So a
//     Read with no other call since that SetReadDeadline is that wait's.
//     (TestNetHTTPParkContract/idle, TestParkKeepsUnreadBytes)
//   - A new connection's first calls are SetReadDeadline (the header
//     timeout, when there is one; without, it does not park before its
//     first request) and the Read of its first request: it waits for its
//     first request as for any other. (TestNetHTTPParkContract/new)
//   - When the next request is in its buffer already (pipelining), the
//     Peek reads nothing and its next call is SetReadDeadline again (the
//     header timeout); then it serves that request, and while the handler
//     runs, a background Read (startBackgroundRead: one byte, no deadline)
//     waits on the connection. So a Read after a second SetReadDeadline is
//     never the wait for a request. (TestNetHTTPParkContract/pipelined,
//     TestParkPipelined)
//   - When that wait's Read ends with io.EOF, it writes nothing more and
//     calls Close, once, from its goroutine; Shutdown (closeIdleConns) may
//     call Close of an idle connection at any time.
//     (TestNetHTTPParkContract/eof, TestShutdownAsParking)
//   - What its buffer holds when the wait reads is what the client sent
//     after the last request: empty lines (a malformed request to it,
//     unless they follow a POST) or the start of the next request. httpfp's
//     tap, which sees every byte read, stands at rest only when each byte
//     read belongs to a whole request, empty lines after one excluded: then
//     the buffer is empty. (TestParkKeepsUnreadBytes, TestParkBlankLines)
//
// crypto/tls:
//   - A Read that times out keeps what it read of a record, and the next
//     Read goes on with it. (TestParkedRecordTail)
//   - Read returns io.EOF after a close_notify alert (TLS 1.2 and 1.3) and
//     an error after a FIN without one. (TestParkedGoodbye)
//
// The kernel and the runtime:
//   - epoll reports a socket that is readable when it is added: a request
//     that came as the connection parked. (TestParkRequestAtPark/poller)
//   - A RawConn's Read waits only for readiness that comes after it began:
//     a peek comes first. (TestParkRequestAtPark/goroutines)

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
// parked: x/net's HTTP/2 server has no supported way to let go of a
// connection and take it up again.
const defaultParkAfter = 250 * time.Millisecond

// clientConn is a client's HTTP/1 connection as the http.Server holds it
// while parking is on. It follows net/http's calls to find the Read that
// waits for the next request (connPhase), and parks the connection when
// that Read has waited limits.park_after.
type clientConn struct {
	*httpfp.Conn
	s *Server

	// net/http calls ConnState, SetReadDeadline and Read from its
	// goroutine, and while a handler runs from a background read's and
	// the handler's too.
	mu       sync.Mutex
	phase    connPhase
	deadline time.Time // the read deadline net/http set for its wait
	short    bool      // the socket's read deadline is the time to park, not deadline
	served   bool      // net/http served a request on it
	first    byte      // the first byte, read by wake,
	hasFirst bool      // for net/http's first Read

	parked atomic.Bool // Read parked it: Close hands it to park
	closed atomic.Bool // Close was called
}

// connPhase is where net/http stands on a clientConn.
type connPhase uint8

const (
	phaseBusy    connPhase = iota // reading or serving a request
	phaseIdle                     // between requests (StateIdle, or new): its wait's deadline comes next
	phaseWaiting                  // that deadline set: its next Read is the wait for a request
)

// newClientConn wraps hc for the http.Server, idle until its first byte.
func newClientConn(hc *httpfp.Conn, s *Server) *clientConn {
	return &clientConn{Conn: hc, s: s, phase: phaseIdle}
}

// setIdle is called by the http.Server's ConnState hook on StateIdle.
func (c *clientConn) setIdle() {
	c.mu.Lock()
	c.phase, c.served = phaseIdle, true
	c.mu.Unlock()
}

// SetReadDeadline sets the read deadline; the first call between requests
// sets the deadline of net/http's wait for the next one, and puts the time
// to park before it.
func (c *clientConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if after := c.s.parkAfter(); c.phase == phaseIdle && after > 0 {
		c.phase, c.deadline = phaseWaiting, t
		if p := time.Now().Add(after); t.IsZero() || p.Before(t) {
			c.short = true
			return c.Conn.SetReadDeadline(p)
		}
	} else {
		c.phase = phaseBusy // a second call: a request is under way
	}
	c.short = false
	return c.Conn.SetReadDeadline(t)
}

func (c *clientConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.phase, c.short = phaseBusy, false
	return c.Conn.SetDeadline(t)
}

// Read reads as httpfp.Conn does. net/http's wait for a request ends with
// io.EOF when it parks the connection.
func (c *clientConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	if c.hasFirst && len(p) > 0 {
		p[0], c.hasFirst, c.phase = c.first, false, phaseBusy
		c.mu.Unlock()
		return 1, nil
	}
	waiting := c.phase == phaseWaiting && c.short
	c.phase = phaseBusy
	if !waiting && c.short { // the wait read bytes before the time to park
		c.short = false
		if err := c.Conn.SetReadDeadline(c.deadline); err != nil {
			c.mu.Unlock()
			return 0, err
		}
	}
	first := !c.served
	c.mu.Unlock()
	n, err := c.Conn.Read(p)
	if !waiting || n > 0 || !isTimeout(err) {
		return n, err // short stays: the next call puts net/http's deadline back
	}
	return c.parkOrWait(p, first)
}

// parkOrWait ends net/http's wait for a request, which reached the time to
// park: with io.EOF, net/http ending its hold and calling Close, when the
// connection can park; otherwise the wait goes on to net/http's deadline.
func (c *clientConn) parkOrWait(p []byte, first bool) (int, error) {
	c.mu.Lock()
	c.short = false
	deadline := c.deadline
	c.mu.Unlock()
	atRest := c.Conn.AtRest()
	c.s.tracePark(parkEvent{kind: parkChecked, atRest: atRest, first: first})
	if parkable && atRest && c.s.parkAfter() > 0 && socketOf(c.Conn) != nil {
		c.parked.Store(true)
		return 0, io.EOF
	}
	if err := c.Conn.SetReadDeadline(deadline); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

// Close closes the connection, or, when Read parked it, hands it to park;
// once: net/http's goroutine and Shutdown may both call it.
func (c *clientConn) Close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return nil
	}
	if c.parked.Load() {
		c.mu.Lock()
		deadline := c.deadline
		c.mu.Unlock()
		c.s.park(c.Conn, deadline)
		return nil
	}
	return c.Conn.Close()
}

// park waits until hc is readable, then wakes it; it closes hc when
// deadline (the idle timeout net/http set) passes first, or the Server
// shuts down. On Linux one epoll instance waits for every parked
// connection (park_linux.go); elsewhere, or should epoll refuse, a
// goroutine waits for each.
func (s *Server) park(hc *httpfp.Conn, deadline time.Time) {
	hc.Rest()
	rc := rawConn(hc)
	p := &parkedConn{s: s, hc: hc, rc: rc, deadline: deadline}
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
	polled := !s.env.hooks.parkNoPoll && s.poller.add(p)
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
		// p.done closed it), reading nothing. The runtime forgets, as
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

// wake takes up a parked connection whose socket became readable, or
// whose peer closed it, and reports whether to park it again. It reads the
// first byte itself, through TLS: only crypto/tls can tell the bytes of a
// request from a close_notify alert (in TLS 1.3 both travel as
// application data) or from the tail of a record cut when the connection
// parked. With a byte, the connection goes back to net/http, that byte
// first. With none by the time to park (a record not yet whole), it parks
// again, its idle deadline as it was. At the end of the stream, an error,
// or the idle deadline, it is closed here, net/http none the wiser.
func (s *Server) wake(hc *httpfp.Conn, deadline time.Time) (again bool) {
	limit, idle := deadline, true
	if after := s.parkAfter(); after > 0 {
		if p := time.Now().Add(after); deadline.IsZero() || p.Before(deadline) {
			limit, idle = p, false
		}
	}
	var b [1]byte
	n, err := 0, hc.SetReadDeadline(limit)
	if err == nil {
		n, err = hc.Read(b[:]) // (1, io.EOF) when a close_notify follows: net/http reads that next
	}
	switch {
	case n == 1:
		s.tracePark(parkEvent{kind: parkWoke})
		c := newClientConn(hc, s)
		c.first, c.hasFirst = b[0], true
		if hc.SetReadDeadline(time.Time{}) == nil && s.h1ln.push(c) {
			return false
		}
	case (err == nil || isTimeout(err)) && !idle:
		s.tracePark(parkEvent{kind: parkRewait})
		return true
	default:
		s.tracePark(parkEvent{kind: parkHungUp})
	}
	_ = hc.Close()
	return false
}

var (
	errShutdown    = errors.New("edge: shutting down")
	errIdleTimeout = errors.New("edge: idle timeout")
)

// parkedConn is a parked connection.
type parkedConn struct {
	s        *Server
	hc       *httpfp.Conn
	rc       syscall.RawConn
	deadline time.Time // net/http's idle deadline, zero for none
	id       uint64    // its key in the poller

	mu       sync.Mutex // held while park sets p up, and done takes it down
	timer    *time.Timer
	finished atomic.Bool
}

// done ends the parking, once: with err nil the socket is readable and
// wake takes the connection up, otherwise it is closed.
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
	again := false
	if err == nil {
		again = p.s.wake(p.hc, p.deadline)
	} else {
		_ = p.hc.Close()
	}
	p.s.untrackConn(p.hc)
	if again {
		p.s.park(p.hc, p.deadline) // tracks it anew, or closes it if the Server shuts down
	}
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

// parkEvent is what parking tells a test (testHooks.parkTrace).
type parkEvent struct {
	kind   parkEventKind
	atRest bool // of parkChecked: whether the connection stood at rest
	first  bool // of parkChecked: the wait was for the connection's first request (new, or handed back)
}

type parkEventKind uint8

const (
	parkChecked parkEventKind = iota // an idle connection's wait reached the time to park
	parkWoke                         // a parked connection's next request went to net/http
	parkRewait                       // a parked connection woke without a byte to read, and waits on
	parkHungUp                       // a parked connection woke to its end: closed, net/http never saw it
)

// tracePark tells the test hook of ev, if there is one.
func (s *Server) tracePark(ev parkEvent) {
	if f := s.env.hooks.parkTrace; f != nil {
		f(ev)
	}
}

package park

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/maatproxy/maat/httpfp"
)

// Options configure a Parker. The zero value parks nothing.
type Options struct {
	// After is how long net/http waits for an idle connection's next
	// request before the connection is parked (limits.park_after). If
	// zero or negative, nothing is parked, as with Disabled. A wake waits
	// as long (100 ms at least: minWake) for the first byte's TLS record,
	// and parks again if it is not whole.
	After time.Duration

	// Disabled turns parking off, whatever After says: Wrap returns each
	// connection as it is, for net/http to hold as it does by itself, and
	// a connection wrapped before parks no more.
	Disabled bool

	// NoPoll has parked connections wait on a goroutine each, as where
	// epoll is missing: a test's switch.
	NoPoll bool

	// Trace, if not nil, is told what parking does: a test's hook. It is
	// called on the connections' goroutines, which wait for it.
	Trace func(Event)
}

// Host is what the server a Parker serves gives parking. Its methods may
// be called from any goroutine.
type Host interface {
	// Track adds c, a connection being parked, to those the server's
	// shutdown waits for and closes; it reports false when the server is
	// shutting down, and the Parker then closes c.
	Track(c net.Conn) bool

	// Untrack removes c, which Track added, once parking is done with it:
	// closed, or given back to the HTTP server by Resume.
	Untrack(c net.Conn)

	// Resume gives a woken connection back to the HTTP/1.1 server, as a
	// new connection (its listener's Accept returns it), waiting until
	// the server takes it. It reports false when the server no longer
	// accepts connections; the Parker then closes c.
	Resume(c net.Conn) bool
}

// A Parker parks the idle HTTP/1.1 connections of one server. Make it
// with New; its methods may be called from any goroutine.
//
// The server's shutdown calls Shutdown first, as net/http closes its idle
// connections at once, and Close last, once its HTTP server no longer
// accepts connections.
type Parker struct {
	host   Host
	opts   atomic.Pointer[Options]
	parked atomic.Int64 // connections parked now
	wg     sync.WaitGroup

	mu     sync.Mutex // guards the fields below
	conns  map[*parkedConn]struct{}
	closed bool    // Shutdown was called: nothing parks any more
	poller *poller // waits for the parked connections (nil: a goroutine each)
	tried  bool    // whether the poller was started (or refused)
}

// New returns a Parker for the server h, with options o. It starts
// nothing: the poller starts when a connection first parks.
func New(h Host, o Options) *Parker {
	pk := &Parker{host: h, conns: map[*parkedConn]struct{}{}}
	pk.SetOptions(o)
	return pk
}

// SetOptions replaces the options (a reload): each connection follows
// them from its next wait for a request on.
func (pk *Parker) SetOptions(o Options) {
	pk.opts.Store(&o)
}

// Wrap returns the connection an http.Server should hold for hc, a
// client's HTTP/1 connection that has not been read through yet: a *Conn
// that parks when idle, or hc itself when parking is off. The http.Server
// must call the Conn's ConnState from its ConnState hook.
func (pk *Parker) Wrap(hc *httpfp.Conn) net.Conn {
	if pk.after() == 0 {
		return hc // never parked: net/http holds it as it is
	}
	return &Conn{Conn: hc, pk: pk, phase: phaseIdle}
}

// Parked returns the number of connections parked now.
func (pk *Parker) Parked() int64 { return pk.parked.Load() }

// IsParked reports whether a connection from remote is parked now.
func (pk *Parker) IsParked(remote net.Addr) bool {
	pk.mu.Lock()
	defer pk.mu.Unlock()
	for p := range pk.conns {
		if p.hc.RemoteAddr().String() == remote.String() {
			return true
		}
	}
	return false
}

// Shutdown closes every parked connection, and parks none from now on:
// the server's first step of shutting down, as net/http closes its idle
// connections at once. A connection that was waking goes on to Host.Resume.
func (pk *Parker) Shutdown() {
	pk.mu.Lock()
	pk.closed = true
	parked := make([]*parkedConn, 0, len(pk.conns))
	for p := range pk.conns {
		parked = append(parked, p)
	}
	pk.mu.Unlock()
	for _, p := range parked {
		p.done(errShutdown)
	}
}

// Close does what Shutdown does, waits until no connection is being
// parked or woken, and releases the poller. The server calls it last,
// once its HTTP server no longer accepts connections (a woken connection
// waits for Host.Resume otherwise).
func (pk *Parker) Close() {
	pk.Shutdown()
	pk.wg.Wait()
	pk.mu.Lock()
	pl := pk.poller
	pk.poller = nil
	pk.mu.Unlock()
	pl.close()
}

// after is the time to park, 0 when parking is off.
func (pk *Parker) after() time.Duration {
	if o := pk.opts.Load(); !o.Disabled && o.After > 0 {
		return o.After
	}
	return 0
}

// trace tells Options.Trace of ev, if it is set.
func (pk *Parker) trace(ev Event) {
	if f := pk.opts.Load().Trace; f != nil {
		f(ev)
	}
}

// park waits until hc is readable, then wakes it; it closes hc when
// deadline (the idle timeout net/http set) passes first, or the Parker
// shuts down. On Linux one epoll instance waits for every parked
// connection (poller_linux.go); elsewhere, or should epoll refuse, a
// goroutine waits for each.
func (pk *Parker) park(hc *httpfp.Conn, deadline time.Time) {
	hc.Rest()
	rc := rawConn(hc)
	p := &parkedConn{pk: pk, hc: hc, rc: rc, deadline: deadline}
	p.mu.Lock() // until p is set up: done, which may be called at once, waits
	if rc == nil || !pk.register(p) {
		p.mu.Unlock()
		_ = hc.Close()
		return
	}
	pk.parked.Add(1)
	if !deadline.IsZero() {
		p.timer = time.AfterFunc(time.Until(deadline), func() { p.done(errIdleTimeout) })
	}
	polled := p.pl.add(p)
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

// register tracks p's connection with the Host and registers p, where
// Shutdown finds the parked connections to close, in one step: a
// connection is either registered before Shutdown looks or refused. It
// gives p the poller to wait on, started with the first connection
// parked, unless Options.NoPoll.
func (pk *Parker) register(p *parkedConn) bool {
	pk.mu.Lock()
	defer pk.mu.Unlock()
	if pk.closed || !pk.host.Track(p.hc) {
		return false
	}
	pk.conns[p] = struct{}{}
	pk.wg.Add(1) // never after Close's Wait began: closed is set first
	if !pk.opts.Load().NoPoll {
		if !pk.tried {
			pk.poller, pk.tried = startPoller(), true
		}
		p.pl = pk.poller
	}
	return true
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
func (pk *Parker) wake(hc *httpfp.Conn, deadline time.Time) (again bool) {
	limit, idle := deadline, true
	if after := pk.after(); after > 0 {
		// At least minWake: with a shorter wait a read may not even
		// begin, and a connection would park and wake for ever.
		if p := time.Now().Add(max(after, minWake)); deadline.IsZero() || p.Before(deadline) {
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
		pk.trace(Event{Kind: Woke})
		c := &Conn{Conn: hc, pk: pk, phase: phaseIdle, first: b[0], hasFirst: true}
		if hc.SetReadDeadline(time.Time{}) == nil && pk.host.Resume(c) {
			return false
		}
	case (err == nil || isTimeout(err)) && !idle:
		pk.trace(Event{Kind: Rewait})
		return true
	default:
		pk.trace(Event{Kind: HungUp})
	}
	_ = hc.Close()
	return false
}

// minWake is the least a woken connection waits for its first byte's TLS
// record, whatever Options.After: a record is whole within microseconds
// once its first bytes came; a wait shorter than a read takes to begin
// (TestParkTinyAfter's nanosecond) would never let one through.
const minWake = 100 * time.Millisecond

var (
	errShutdown    = errors.New("park: shutting down")
	errIdleTimeout = errors.New("park: idle timeout")
)

// parkedConn is a parked connection.
type parkedConn struct {
	pk       *Parker
	hc       *httpfp.Conn
	rc       syscall.RawConn
	deadline time.Time // net/http's idle deadline, zero for none
	pl       *poller   // the poller it waits on, nil for a goroutine
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
	pk := p.pk
	defer pk.wg.Done()
	p.mu.Lock()
	pk.mu.Lock()
	delete(pk.conns, p)
	pk.mu.Unlock()
	if p.timer != nil {
		p.timer.Stop()
	}
	p.pl.remove(p)
	p.mu.Unlock()
	pk.parked.Add(-1)
	again := false
	if err == nil {
		again = pk.wake(p.hc, p.deadline)
	} else {
		_ = p.hc.Close()
	}
	pk.host.Untrack(p.hc)
	if again {
		pk.park(p.hc, p.deadline) // tracks it anew, or closes it if the Parker shuts down
	}
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

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Event is what parking tells a test (Options.Trace).
type Event struct {
	Kind   EventKind
	AtRest bool // of Checked: whether the connection stood at rest
	First  bool // of Checked: the wait was for the connection's first request (new, or handed back)
}

// EventKind is what happened.
type EventKind uint8

const (
	Checked EventKind = iota // an idle connection's wait reached the time to park
	Woke                     // a parked connection's next request went to net/http
	Rewait                   // a parked connection woke without a byte to read, and waits on
	HungUp                   // a parked connection woke to its end: closed, net/http never saw it
)

func (k EventKind) String() string {
	switch k {
	case Checked:
		return "checked"
	case Woke:
		return "woke"
	case Rewait:
		return "rewait"
	case HungUp:
		return "hung up"
	}
	return "unknown"
}

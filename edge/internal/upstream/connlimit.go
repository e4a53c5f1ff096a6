package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"
)

// connLimit bounds the connections open to each upstream address
// (Options.Conns) over both of the Transport's clients: the slots
// bound the exchanges, but each client keeps its own idle connections, and
// a flood of one kind of request (GETs, on h1Client) beside another
// (bodies, on http.Transport) would otherwise open up to twice the cap. A
// dial at the cap closes the other client's idle connections (evict) and
// waits for one to close, within the dial timeout.
type connLimit struct {
	max     int
	conns   func(addr string) int // addr's own cap, or 0 for max
	timeout time.Duration
	evict   func(addr string) // closes idle connections to addr, set by New

	mu     sync.Mutex
	most   int // the most connections open to one address at once
	open   map[string]int
	closed map[string]chan struct{} // closed, and forgotten, when a connection to addr closes
}

// ErrConnsFull is a dial that found the address's connections all open
// for the whole connect timeout.
var ErrConnsFull = errors.New("upstream: connections all open")

func newConnLimit(max int, timeout time.Duration) *connLimit {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	return &connLimit{max: max, timeout: timeout, open: map[string]int{}, closed: map[string]chan struct{}{}}
}

// wrap returns d, bounded by l.
func (l *connLimit) wrap(d dialer) dialer {
	if l == nil || l.max <= 0 {
		return d
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if err := l.take(ctx, addr); err != nil {
			return nil, &net.OpError{Op: "dial", Net: network, Err: err} // nothing sent: another address may be tried
		}
		c, err := d(ctx, network, addr)
		if err != nil {
			l.give(addr)
			return nil, err
		}
		return &limitedConn{Conn: c, lim: l, addr: addr, counted: true}, nil
	}
}

// take counts one more connection to addr, waiting while all are open.
func (l *connLimit) take(ctx context.Context, addr string) error {
	var timer *time.Timer
	for evicted := false; ; evicted = true {
		l.mu.Lock()
		if l.open[addr] < l.capOf(addr) {
			l.open[addr]++
			l.most = max(l.most, l.open[addr])
			l.mu.Unlock()
			if timer != nil {
				timer.Stop()
			}
			return nil
		}
		ch := l.closed[addr]
		if ch == nil {
			ch = make(chan struct{})
			l.closed[addr] = ch
		}
		l.mu.Unlock()
		if !evicted && l.evict != nil {
			l.evict(addr) // the slots leave room: the rest are idle in a pool
		}
		if timer == nil {
			timer = time.NewTimer(l.timeout)
			defer timer.Stop()
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			return fmt.Errorf("%w: %s", ErrConnsFull, addr)
		}
	}
}

// capOf is addr's cap.
func (l *connLimit) capOf(addr string) int {
	if l.conns != nil {
		if n := l.conns(addr); n > 0 {
			return n
		}
	}
	return l.max
}

// give counts a connection to addr closed.
func (l *connLimit) give(addr string) {
	l.mu.Lock()
	if l.open[addr]--; l.open[addr] <= 0 {
		delete(l.open, addr)
	}
	if ch := l.closed[addr]; ch != nil {
		close(ch)
		delete(l.closed, addr)
	}
	l.mu.Unlock()
}

// add counts a connection to addr open again, past the cap if need be: it
// is open already.
func (l *connLimit) add(addr string) {
	l.mu.Lock()
	l.open[addr]++
	l.most = max(l.most, l.open[addr])
	l.mu.Unlock()
}

// peak is the most connections that were open to one address at once.
func (l *connLimit) peak() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.most
}

// limitedConn is a connection counted by a connLimit until it closes, or
// while it carries no stream: a stream's connection (a websocket, server-
// sent events, a long poll) is counted under Options.Streams instead
// (connSlots), and is not counted here from the moment its answer
// becomes one until it ends.
type limitedConn struct {
	net.Conn
	lim  *connLimit
	addr string

	mu      sync.Mutex
	counted bool // among lim's open connections to addr
	closed  bool
}

// uncount takes the connection out of its address's count: it closes, or
// carries a stream.
func (c *limitedConn) uncount() {
	c.mu.Lock()
	was := c.counted
	c.counted = false
	c.mu.Unlock()
	if was {
		c.lim.give(c.addr)
	}
}

// recount counts a connection whose stream ended again, unless it has
// closed: a client may have kept it for the next exchange.
func (c *limitedConn) recount() {
	c.mu.Lock()
	add := !c.closed && !c.counted
	c.counted = c.counted || add
	c.mu.Unlock()
	if add {
		c.lim.add(c.addr)
	}
}

// Close closes the connection, and counts it closed once the upstream has
// closed its side too (or lingerClose has passed): an upstream still
// busy with a request the edge gave up on (a reset stream) holds that
// connection until it notices, and a new one must not be opened beside
// it meanwhile. Its last bytes are read and dropped.
func (c *limitedConn) Close() error {
	c.mu.Lock()
	again := c.closed
	c.closed = true
	c.mu.Unlock()
	if again {
		return nil
	}
	cw, ok := c.Conn.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		err := c.Conn.Close()
		c.uncount()
		return err
	}
	go func() {
		_ = c.Conn.SetReadDeadline(time.Now().Add(lingerClose))
		_, _ = io.Copy(io.Discard, io.LimitReader(c.Conn, 1<<20))
		_ = c.Conn.Close()
		c.uncount()
	}()
	return nil
}

// lingerClose bounds how long a closed upstream connection is waited on.
const lingerClose = 2 * time.Second

// SyscallConn gives h1Client's idle check the socket underneath.
func (c *limitedConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}

package park

import (
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/maatproxy/maat/httpfp"
)

// Conn is a client's HTTP/1 connection as the http.Server holds it while
// parking is on (Parker.Wrap). It follows net/http's calls to find the
// Read that waits for the next request (connPhase), and parks the
// connection when that Read has waited Options.After. The tap it wraps is
// Conn.Conn, for the server's ConnContext and ConnState hooks.
type Conn struct {
	*httpfp.Conn
	pk *Parker

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

	parked atomic.Bool // Read parked it: Close hands it to the Parker
	closed atomic.Bool // Close was called
}

// connPhase is where net/http stands on a Conn.
type connPhase uint8

const (
	phaseBusy    connPhase = iota // reading or serving a request
	phaseIdle                     // between requests (StateIdle, or new): its wait's deadline comes next
	phaseWaiting                  // that deadline set: its next Read is the wait for a request
)

// ConnState must be called by the http.Server's ConnState hook with each
// state of c: StateIdle says net/http waits for the next request.
func (c *Conn) ConnState(st http.ConnState) {
	if st != http.StateIdle {
		return
	}
	c.mu.Lock()
	c.phase, c.served = phaseIdle, true
	c.mu.Unlock()
}

// SetReadDeadline sets the read deadline; the first call between requests
// sets the deadline of net/http's wait for the next one, and puts the time
// to park before it.
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if after := c.pk.after(); c.phase == phaseIdle && after > 0 {
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

// SetDeadline sets both deadlines; a request is under way.
func (c *Conn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.phase, c.short = phaseBusy, false
	return c.Conn.SetDeadline(t)
}

// Read reads as httpfp.Conn does. net/http's wait for a request ends with
// io.EOF when it parks the connection.
func (c *Conn) Read(p []byte) (int, error) {
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
func (c *Conn) parkOrWait(p []byte, first bool) (int, error) {
	c.mu.Lock()
	c.short = false
	deadline := c.deadline
	c.mu.Unlock()
	atRest := c.Conn.AtRest()
	c.pk.trace(Event{Kind: Checked, AtRest: atRest, First: first})
	if parkable && atRest && c.pk.after() > 0 && socketOf(c.Conn) != nil {
		c.parked.Store(true)
		return 0, io.EOF
	}
	if err := c.Conn.SetReadDeadline(deadline); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

// Close closes the connection, or, when Read parked it, hands it to the
// Parker; once: net/http's goroutine and Shutdown may both call it.
func (c *Conn) Close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return nil
	}
	if c.parked.Load() {
		c.mu.Lock()
		deadline := c.deadline
		c.mu.Unlock()
		c.pk.park(c.Conn, deadline)
		return nil
	}
	return c.Conn.Close()
}

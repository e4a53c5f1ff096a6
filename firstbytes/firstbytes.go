// Package firstbytes bounds the time a connection's first bytes may take
// (a PROXY protocol header, a TLS ClientHello) without losing the read
// deadline the connection's owner sets meanwhile: while those bytes are
// read, the socket's read deadline is the earlier of the two, and
// afterwards the owner's again, as net/http and crypto/tls expect of a
// net.Conn (SetReadDeadline applies to pending and future reads).
//
// proxyproto.Conn and tlsfp.Conn each read such a lead-in under a
// Deadline; it is the one copy of that logic.
package firstbytes

import (
	"net"
	"sync"
	"time"
)

// Deadline is the read deadline of a connection that reads its first
// bytes under a deadline of its own. The zero value is ready: no lead-in
// under way and no owner's deadline. Its methods may be called from any
// goroutine.
type Deadline struct {
	mu    sync.Mutex
	in    bool      // a lead-in is being read
	first time.Time // the lead-in's deadline, while in
	owner time.Time // the deadline the owner set; zero for none
}

// Begin starts reading the lead-in of c under deadline t: the read
// deadline becomes the earlier of t and the owner's.
func (d *Deadline) Begin(c net.Conn, t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.in, d.first = true, t
	_ = c.SetReadDeadline(earliest(t, d.owner))
}

// End ends the lead-in: the read deadline is the owner's again.
func (d *Deadline) End(c net.Conn) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.in = false
	_ = c.SetReadDeadline(d.owner)
}

// SetReadDeadline records t as the owner's read deadline and sets it on c,
// or, while the lead-in is read, the earlier of t and the lead-in's.
func (d *Deadline) SetReadDeadline(c net.Conn, t time.Time) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.owner = t
	if d.in {
		t = earliest(d.first, t)
	}
	return c.SetReadDeadline(t)
}

// SetDeadline is SetReadDeadline for reads, and sets c's write deadline
// to t.
func (d *Deadline) SetDeadline(c net.Conn, t time.Time) error {
	if err := d.SetReadDeadline(c, t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

// earliest returns the earlier of the deadline d and the optional deadline
// u (zero means none).
func earliest(d, u time.Time) time.Time {
	if !u.IsZero() && u.Before(d) {
		return u
	}
	return d
}

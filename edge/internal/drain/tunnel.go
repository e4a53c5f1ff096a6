package drain

import (
	"crypto/rand"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// A Tunnel is a websocket's client connection once the upstream switched
// protocols. The edge copies its frames opaquely both ways, but follows
// where each frame ends (RFC 6455, section 5.2: the headers' lengths, not
// the payloads), so that at shutdown it can close the websocket as the
// protocol wants, between frames: GoingAway makes the copy from the client
// stop at the end of the frame in progress and hand the upstream a masked
// Close frame with status 1001 (going away, section 7.4.1) in its place,
// then an end of stream; the copy to the client sends the client an
// unmasked Close 1001 at the end of its frame in progress and drops what
// the upstream sends after it. The copier then closes both connections.
type Tunnel struct {
	net.Conn
	draining atomic.Bool

	// The read side: only the goroutine copying client → upstream.
	pre      []byte   // read ahead by net/http, served first
	up       wsFrames // client → upstream
	upClose  []byte   // the rest of the Close frame handed to the upstream
	injected bool     // upClose was made; it is handed out, then io.EOF

	// The write side: upstream → client.
	wmu      sync.Mutex
	down     wsFrames
	sentDown bool          // the Close frame went to the client, or cannot go
	closed   chan struct{} // closed with sentDown
}

// GoingAway starts closing the websocket. It never blocks: it wakes the
// copy from the client, which does the rest.
func (t *Tunnel) GoingAway() {
	t.draining.Store(true)
	_ = t.Conn.SetReadDeadline(time.Now())
}

// Close closes the client connection; a copy waiting for the client's
// Close frame to go out waits no more.
func (t *Tunnel) Close() error {
	err := t.Conn.Close() // first: a Write blocked on the client holds wmu
	t.wmu.Lock()
	t.endDown()
	t.wmu.Unlock()
	return err
}

// closeGoingAway is an unmasked Close frame, status 1001: the server's.
var closeGoingAway = [...]byte{0x88, 0x02, 0x03, 0xe9}

// maskedGoingAway returns a masked Close frame, status 1001: a client's
// (RFC 6455, section 5.3: a client masks every frame, with a fresh key).
func maskedGoingAway() []byte {
	b := []byte{0x88, 0x82, 0, 0, 0, 0, 0x03, 0xe9}
	_, _ = rand.Read(b[2:6])
	for i := range 2 {
		b[6+i] ^= b[2+i]
	}
	return b
}

// Draining reports whether GoingAway was called.
func (t *Tunnel) Draining() bool { return t.draining.Load() }

// Read reads from the client; once GoingAway was called, it ends the
// frame in progress, then gives a masked Close 1001 and io.EOF.
func (t *Tunnel) Read(p []byte) (int, error) {
	for {
		if t.injected {
			if len(t.upClose) > 0 {
				n := copy(p, t.upClose)
				t.upClose = t.upClose[n:]
				return n, nil
			}
			<-t.closed // the client's Close first: closing now would cut it
			return 0, io.EOF
		}
		if t.draining.Load() {
			t.sendDown()
			if t.up.boundary() {
				t.injected, t.upClose = true, maskedGoingAway()
				continue
			}
			p = p[:min(uint64(len(p)), t.up.want())]
		}
		n, err := t.readRaw(p)
		t.up.feed(p[:n])
		if err != nil && t.draining.Load() && isTimeout(err) {
			// GoingAway's wake-up: go on to the end of the frame in
			// progress; the drain's end bounds the wait.
			_ = t.Conn.SetReadDeadline(time.Time{})
			if n > 0 {
				return n, nil
			}
			continue
		}
		return n, err
	}
}

func (t *Tunnel) readRaw(p []byte) (int, error) {
	if len(t.pre) > 0 {
		n := copy(p, t.pre)
		t.pre = t.pre[n:]
		return n, nil
	}
	return t.Conn.Read(p)
}

// sendDown sends the client the Close frame now, if no frame is in
// progress toward it; otherwise Write sends it after that frame.
func (t *Tunnel) sendDown() {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	if !t.sentDown && t.down.boundary() {
		_, _ = t.Conn.Write(closeGoingAway[:])
		t.endDown()
	}
}

// endDown marks the client's Close as sent (or failed); wmu held.
func (t *Tunnel) endDown() {
	if !t.sentDown {
		t.sentDown = true
		close(t.closed)
	}
}

// Write writes to the client; once GoingAway was called, it ends the frame
// in progress, sends an unmasked Close 1001 and drops the rest.
func (t *Tunnel) Write(p []byte) (int, error) {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	if t.sentDown {
		return len(p), nil // after the Close, the upstream's last words go nowhere
	}
	draining := t.draining.Load()
	k := len(p)
	if draining {
		k = 0
		if !t.down.boundary() {
			k = int(min(uint64(len(p)), t.down.want()))
		}
	}
	n, err := t.Conn.Write(p[:k])
	t.down.feed(p[:n])
	if err != nil {
		t.endDown() // no Close can follow a broken frame
		return n, err
	}
	if draining && t.down.boundary() {
		_, _ = t.Conn.Write(closeGoingAway[:])
		t.endDown()
	}
	return len(p), nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

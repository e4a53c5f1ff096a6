package edge

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// What Shutdown owns beyond the connections net/http and quic-go track
// for it: every request being served (requestGate), and the client
// connections that a protocol switch took out of net/http's hands
// (tunnel), which net/http's Shutdown neither waits for nor closes.

// requestGate counts the requests being served, so that Shutdown closes the
// logs only after the last one has written its lines. Entering and leaving
// cost an atomic addition each.
type requestGate struct {
	n       atomic.Int64 // requests in flight, plus gateShut once shut
	waiting atomic.Bool  // a wait runs: leave signals idle when n falls to zero
	idle    chan struct{}
}

// gateShut is added to requestGate.n when the gate shuts: no request enters
// after it.
const gateShut = 1 << 40

func newRequestGate() *requestGate { return &requestGate{idle: make(chan struct{}, 1)} }

// enter counts a request in; it reports false once the gate shut (every
// connection is closed by then: nobody would read an answer).
func (g *requestGate) enter() bool {
	if g.n.Add(1) >= gateShut {
		g.leave()
		return false
	}
	return true
}

func (g *requestGate) leave() {
	if g.n.Add(-1)%gateShut == 0 && g.waiting.Load() {
		select {
		case g.idle <- struct{}{}:
		default:
		}
	}
}

// shut lets no request in from now on. Call it once.
func (g *requestGate) shut() { g.n.Add(gateShut) }

// inFlight is the number of requests being served.
func (g *requestGate) inFlight() int64 { return g.n.Load() % gateShut }

// wait waits until no request is being served, or ctx ends.
func (g *requestGate) wait(ctx context.Context) error {
	g.waiting.Store(true) // before the load: a leave that falls to zero after it signals
	for g.inFlight() != 0 {
		select {
		case <-g.idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// upgradeWriter is the ResponseWriter of an HTTP/1.1 request that asks for
// a protocol switch (a websocket: hygiene lets no other upgrade through).
// Whoever hijacks the connection through it (httputil.ReverseProxy, via
// http.ResponseController) gets a tunnel, which the Server tracks until the
// request's handler returns and tells to go away when it shuts down.
type upgradeWriter struct {
	http.ResponseWriter
	s *Server
	t *tunnel // set by Hijack
}

func (w *upgradeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// SetWriteDeadline is there for the Handler, which clears the write
// deadline of a protocol switch (deadlineWriter).
func (w *upgradeWriter) SetWriteDeadline(d time.Time) error {
	return http.NewResponseController(w.ResponseWriter).SetWriteDeadline(d)
}

func (w *upgradeWriter) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

// Hijack takes the connection from net/http as a tunnel. Bytes net/http had
// read ahead of the handler are the tunnel's first; the returned reader
// reads through the tunnel, its writer (for the 101 head) straight to the
// connection.
func (w *upgradeWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	t := &tunnel{Conn: c, closed: make(chan struct{})}
	if n := brw.Reader.Buffered(); n > 0 {
		b, _ := brw.Reader.Peek(n)
		t.pre = bytes.Clone(b)
	}
	brw.Reader.Reset(t)
	w.t = t
	w.s.trackTunnel(t)
	return t, brw, nil
}

// done ends the tracking of the tunnel, if the request made one, when its
// handler has returned.
func (w *upgradeWriter) done() {
	if w.t != nil {
		w.s.untrackTunnel(w.t)
	}
}

// A tunnel is a websocket's client connection once the upstream switched
// protocols. The edge copies its frames opaquely both ways, but follows
// where each frame ends (RFC 6455, section 5.2: the headers' lengths, not
// the payloads), so that at shutdown it can close the websocket as the
// protocol wants, between frames: goingAway makes the copy from the client
// stop at the end of the frame in progress and hand the upstream a masked
// Close frame with status 1001 (going away, section 7.4.1) in its place,
// then an end of stream; the copy to the client sends the client an
// unmasked Close 1001 at the end of its frame in progress and drops what
// the upstream sends after it. The copier then closes both connections.
type tunnel struct {
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

// goingAway starts closing the websocket. It never blocks: it wakes the
// copy from the client, which does the rest.
func (t *tunnel) goingAway() {
	t.draining.Store(true)
	_ = t.Conn.SetReadDeadline(time.Now())
}

// Close closes the client connection; a copy waiting for the client's
// Close frame to go out waits no more.
func (t *tunnel) Close() error {
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

func (t *tunnel) Read(p []byte) (int, error) {
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
			// goingAway's wake-up: go on to the end of the frame in
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

func (t *tunnel) readRaw(p []byte) (int, error) {
	if len(t.pre) > 0 {
		n := copy(p, t.pre)
		t.pre = t.pre[n:]
		return n, nil
	}
	return t.Conn.Read(p)
}

// sendDown sends the client the Close frame now, if no frame is in
// progress toward it; otherwise Write sends it after that frame.
func (t *tunnel) sendDown() {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	if !t.sentDown && t.down.boundary() {
		_, _ = t.Conn.Write(closeGoingAway[:])
		t.endDown()
	}
}

// endDown marks the client's Close as sent (or failed); wmu held.
func (t *tunnel) endDown() {
	if !t.sentDown {
		t.sentDown = true
		close(t.closed)
	}
}

func (t *tunnel) Write(p []byte) (int, error) {
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

// wsFrames follows the frame boundaries of one direction of a websocket
// from its bytes: each frame's header gives the payload's length, which is
// skipped. It never looks at a payload and never fails: it only counts.
type wsFrames struct {
	hdr  [14]byte
	nhdr int    // header bytes of the frame in progress
	left uint64 // payload bytes left of the frame in progress
}

func (f *wsFrames) boundary() bool { return f.nhdr == 0 && f.left == 0 }

// want is how many bytes may come before the end of the frame in progress
// or of its header, at least one.
func (f *wsFrames) want() uint64 {
	if f.left > 0 {
		return f.left
	}
	return uint64(max(wsHeaderLen(f.hdr[:f.nhdr])-f.nhdr, 1))
}

func (f *wsFrames) feed(p []byte) {
	for len(p) > 0 {
		if f.left > 0 {
			n := min(uint64(len(p)), f.left)
			f.left -= n
			p = p[n:]
			continue
		}
		f.hdr[f.nhdr] = p[0]
		f.nhdr++
		p = p[1:]
		if h := f.hdr[:f.nhdr]; f.nhdr == wsHeaderLen(h) {
			f.left, f.nhdr = wsPayloadLen(h), 0
		}
	}
}

// wsHeaderLen is the length of a frame header that starts with h: 2 bytes,
// the extended length (2 or 8), the masking key (4).
func wsHeaderLen(h []byte) int {
	if len(h) < 2 {
		return 2
	}
	n := 2
	switch h[1] & 0x7f {
	case 126:
		n += 2
	case 127:
		n += 8
	}
	if h[1]&0x80 != 0 {
		n += 4
	}
	return n
}

// wsPayloadLen is the payload length of the whole header h.
func wsPayloadLen(h []byte) uint64 {
	switch l := h[1] & 0x7f; l {
	case 126:
		return uint64(binary.BigEndian.Uint16(h[2:4]))
	case 127:
		return binary.BigEndian.Uint64(h[2:10])
	default:
		return uint64(l)
	}
}

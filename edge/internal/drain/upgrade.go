package drain

import (
	"bufio"
	"bytes"
	"net"
	"net/http"
	"time"
)

// A Tracker keeps the tunnels a server tells to go away when it shuts down
// (Tunnel.GoingAway) and closes when its drain is over. Track is called
// when a request's connection becomes a tunnel, Untrack when that
// request's handler has returned.
type Tracker interface {
	Track(*Tunnel)
	Untrack(*Tunnel)
}

// An UpgradeWriter is the ResponseWriter of an HTTP/1.1 request that asks
// for a protocol switch (a websocket). Whoever hijacks the connection
// through it (httputil.ReverseProxy, via http.ResponseController) gets a
// Tunnel, which its Tracker keeps until the request's handler returns
// (Done).
type UpgradeWriter struct {
	http.ResponseWriter
	tr Tracker
	t  *Tunnel // set by Hijack
}

// NewUpgradeWriter wraps w, the ResponseWriter of a request that asks for
// a protocol switch; the Tunnel a Hijack makes goes to tr.
func NewUpgradeWriter(w http.ResponseWriter, tr Tracker) *UpgradeWriter {
	return &UpgradeWriter{ResponseWriter: w, tr: tr}
}

// Unwrap returns the ResponseWriter w wraps, for http.ResponseController.
func (w *UpgradeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// SetWriteDeadline is there for handlers that clear the write deadline of
// a protocol switch.
func (w *UpgradeWriter) SetWriteDeadline(d time.Time) error {
	return http.NewResponseController(w.ResponseWriter).SetWriteDeadline(d)
}

// Flush flushes the wrapped ResponseWriter.
func (w *UpgradeWriter) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

// Hijack takes the connection from net/http as a Tunnel. Bytes net/http had
// read ahead of the handler are the tunnel's first; the returned reader
// reads through the tunnel, its writer (for the 101 head) straight to the
// connection.
func (w *UpgradeWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	t := &Tunnel{Conn: c, closed: make(chan struct{})}
	if n := brw.Reader.Buffered(); n > 0 {
		b, _ := brw.Reader.Peek(n)
		t.pre = bytes.Clone(b)
	}
	brw.Reader.Reset(t)
	w.t = t
	w.tr.Track(t)
	return t, brw, nil
}

// Done ends the tracking of the tunnel, if the request made one. Call it
// when the request's handler has returned.
func (w *UpgradeWriter) Done() {
	if w.t != nil {
		w.tr.Untrack(w.t)
	}
}

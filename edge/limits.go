package edge

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/maatproxy/maat/clientnet"
)

// Bounds on what a client holds of the edge while it sends a body or reads
// a response (DESIGN.md, "Request hygiene", the last point).

// errBodyTooSlow marks a request body that did not arrive at
// limits.body_min_rate.
var errBodyTooSlow = errors.New("edge: request body too slow")

// slowBody enforces limits.body_timeout and limits.body_min_rate on a
// request body, as Apache's mod_reqtimeout does (body=20,MinRate=500): the
// body must arrive within the timeout, which every min_rate bytes received
// extend by a second. A stalled client and one that trickles a byte every
// few seconds are both cut, so neither holds an upstream connection long;
// an honest upload of any size keeps going.
type slowBody struct {
	io.ReadCloser
	rc      *http.ResponseController
	start   time.Time
	timeout time.Duration
	rate    int64 // bytes per second
	n       int64
	st      *reqState
}

func (b *slowBody) Read(p []byte) (int, error) {
	deadline := b.start.Add(b.timeout + time.Duration(b.n)*time.Second/time.Duration(b.rate))
	_ = b.rc.SetReadDeadline(deadline)
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	switch {
	case err == io.EOF:
		// Done with the body: net/http's own reads (the next request, the
		// check for a client that left) must not meet our deadline.
		_ = b.rc.SetReadDeadline(time.Time{})
	case errors.Is(err, os.ErrDeadlineExceeded) || isTimeout(err):
		// The deadline stays: net/http gives up draining the rest at once
		// and closes the connection after the 408.
		err = errBodyTooSlow
	}
	return n, err
}

// limitBody wraps r's body in a slowBody, if it has one.
func (h *Handler) limitBody(w http.ResponseWriter, r *http.Request, st *reqState) {
	if r.Body == nil || r.Body == http.NoBody || h.cfg.Limits.BodyTimeout <= 0 {
		return
	}
	r.Body = &slowBody{ReadCloser: r.Body, rc: http.NewResponseController(w), start: time.Now(),
		timeout: h.cfg.Limits.BodyTimeout.D(), rate: int64(h.cfg.Limits.BodyMinRate), st: st}
}

// clientCounter counts what each client holds at once (connections,
// requests in flight), by address: the exact IPv4 address (a NAT's users
// share it, so the caps are generous) or the IPv6 /64 a host is given.
type clientCounter struct {
	max int
	mu  sync.Mutex
	n   map[netip.Addr]int
}

func newClientCounter(max int) *clientCounter {
	return &clientCounter{max: max, n: map[netip.Addr]int{}}
}

// clientKey is what a client is counted by.
func clientKey(a netip.Addr) netip.Addr {
	a = a.Unmap()
	if a.Is6() {
		return clientnet.Prefix(a).Addr() // the /64 a host is given
	}
	return a // per address, not clientnet's /24: its other hosts must not share the cap
}

// acquire counts one more for a and reports whether a stays within the
// cap; the caller calls release only when acquire said yes.
func (c *clientCounter) acquire(a netip.Addr) bool {
	if c == nil || c.max <= 0 {
		return true
	}
	k := clientKey(a)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[k] >= c.max {
		return false
	}
	c.n[k]++
	return true
}

func (c *clientCounter) release(a netip.Addr) {
	if c == nil || c.max <= 0 {
		return
	}
	k := clientKey(a)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[k] <= 1 {
		delete(c.n, k)
		return
	}
	c.n[k]--
}

// len is the number of clients counted.
func (c *clientCounter) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.n)
}

// prebufferBytes is how much of a request body the edge reads before it
// takes an upstream connection (nginx's client_body_buffer_size): a body
// that size or smaller is complete before the upstream is asked, so a
// client that never sends its body (or sends it slowly) holds no upstream
// connection; a larger one streams once its first prebufferBytes came.
const prebufferBytes = 16 << 10

// prebuffer reads the start of r's body (within the body's time bounds)
// before the request goes upstream. It answers and reports false when the
// client fails to send it.
func (h *Handler) prebuffer(w http.ResponseWriter, r *http.Request, st *reqState) bool {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 || st.route.static != nil {
		return true
	}
	bp := h.prebufs.Get().(*[]byte)
	buf := (*bp)[:prebufferBytes]
	// Read as io.ReadFull would, but keep the body's own error: io.EOF is
	// its end, io.ErrUnexpectedEOF a body cut short of its length or its
	// last chunk, which must never reach the upstream as a whole one.
	n := 0
	var err error
	for n < len(buf) && err == nil {
		var m int
		m, err = r.Body.Read(buf[n:])
		n += m
	}
	if err == io.EOF && r.ContentLength > 0 && int64(n) != r.ContentLength {
		err = io.ErrUnexpectedEOF
	}
	switch {
	case err == io.EOF: // the whole body
		body := make([]byte, n)
		copy(body, buf[:n])
		h.prebufs.Put(bp)
		_ = r.Body.Close()
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(n)
		if trailer := requestTrailer(r); trailerValues(trailer) {
			// Trailers came after the body (filled in now that it was
			// read to its end): the upstream's request is chunked, so
			// that they follow it, as they came.
			r.Trailer = trailer
			r.ContentLength = -1
		} else if n == 0 {
			r.Body = http.NoBody
		}
		return true
	case err != nil:
		h.prebufs.Put(bp)
		st.clientErr = err
		h.upstreamError(w, r, err)
		return false
	}
	r.Body = &prefixBody{prefix: buf, buf: bp, pool: &h.prebufs, ReadCloser: r.Body}
	if r.Trailer == nil && r.ProtoMajor == 3 {
		// quic-go announces no trailer before the body's end: give the
		// upstream's request a trailer that forwardTrailer can fill then.
		r.Trailer = http.Header{}
	}
	return true
}

// forwardTrailer copies the trailer of in, whose body was read to its
// end, into out's, which the upstream's request sends after its body.
func forwardTrailer(out, in *http.Request) {
	if out.Trailer == nil {
		return
	}
	for k, vs := range requestTrailer(in) {
		out.Trailer[k] = vs
	}
}

// trailerValues reports whether a request's trailer holds a value, not
// only the names its Trailer field announced.
func trailerValues(t http.Header) bool {
	for _, vs := range t {
		if len(vs) > 0 {
			return true
		}
	}
	return false
}

// prefixBody is a body whose first bytes were read ahead.
type prefixBody struct {
	prefix []byte
	buf    *[]byte // prefix's storage, from pool
	pool   *sync.Pool
	io.ReadCloser
}

func (b *prefixBody) Read(p []byte) (int, error) {
	if len(b.prefix) > 0 {
		n := copy(p, b.prefix)
		b.prefix = b.prefix[n:]
		return n, nil
	}
	return b.ReadCloser.Read(p)
}

func (b *prefixBody) Close() error {
	if b.buf != nil {
		b.pool.Put(b.buf)
		b.buf, b.prefix = nil, nil
	}
	return b.ReadCloser.Close()
}

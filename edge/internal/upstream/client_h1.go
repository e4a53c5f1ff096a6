package upstream

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"slices"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/http/httpguts"
)

// h1Client is the upstream client of the common exchange: a request with
// an idempotent method (RFC 9110, section 9.2.2), no body and no protocol
// switch — what a page, an asset or a feed is fetched with. It writes the
// request and reads the answer on the handler's goroutine over
// connections kept per address, where http.Transport hands each exchange
// to a writing and a reading goroutine of the connection (two hand-offs
// and some forty allocations per request). Every other request (bodies,
// websockets, POST) goes through http.Transport, whose early answers,
// 100-continue and bidirectional streams this client does not do.
//
// The answer is read with http.ReadResponse, the parser http.Transport
// itself uses, so framing (Content-Length and Transfer-Encoding,
// obs-fold, bare LF) is judged as the stock client judges it. A
// connection is reused only when its answer was read to the end, said
// nothing of closing, and nothing followed it on the wire.
//
// The connections of an address are bounded by the Transport's connSlots:
// an exchange holds a slot for as long as it uses its connection, and at
// most as many connections as slots wait idle.
type h1Client struct {
	dial           dialer
	headerTimeout  time.Duration // for the answer's head; 0: none
	readTimeout    time.Duration // for each read of the answer's body; 0: none
	maxHeaderBytes int64
	maxIdle        int // per address
	idleTimeout    time.Duration

	mu     sync.Mutex
	idle   map[string][]*h1Conn // by address; most recently used last
	closed bool
}

// h1Conn is one upstream connection.
type h1Conn struct {
	nc     net.Conn
	raw    syscall.RawConn // of the socket under nc, nil if none (quiet peeks at it)
	br     *bufio.Reader
	bw     *bufio.Writer
	limit  int64 // bytes the answer's head may still take; < 0: no limit
	idleAt time.Time
	// quiet's peek at the socket.
	peek      [1]byte
	peekFn    func(fd uintptr) bool
	peekEmpty bool
}

// errHeaderTooLarge, errUnaskedSwitch and errTooMany1xx are answers the
// client refuses; each is the upstream's fault (502).
var (
	errHeaderTooLarge = errors.New("upstream: response header too large")
	errUnaskedSwitch  = errors.New("upstream: switched protocols unasked")
	errTooMany1xx     = errors.New("upstream: too many 1xx responses")
	errBadHead        = errors.New("upstream: request head not fit to send")
)

// Read reads from the connection, within what the head may still take.
func (pc *h1Conn) Read(p []byte) (int, error) {
	if pc.limit == 0 {
		return 0, errHeaderTooLarge
	}
	if pc.limit > 0 && int64(len(p)) > pc.limit {
		p = p[:pc.limit]
	}
	n, err := pc.nc.Read(p)
	if pc.limit > 0 {
		pc.limit -= int64(n)
	}
	return n, err
}

// fastPath reports whether the client takes req: an idempotent method
// without a body, not asking to switch protocols, to a plain-HTTP address
// (TCP or unix socket). https:// upstreams stay with http.Transport: what
// crypto/tls has read ahead cannot be checked for bytes an upstream sent
// unasked (quiet).
func fastPath(req *http.Request) bool {
	if req.URL.Scheme != "http" {
		return false
	}
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
	default:
		return false
	}
	return (req.Body == nil || req.Body == http.NoBody) && req.ContentLength == 0 &&
		req.Header["Upgrade"] == nil && !req.Close
}

// RoundTrip sends req on an idle connection of its address, or a new one.
// A reused connection the upstream had closed while it was idle (the
// request could not be written, or the connection ended or was reset
// before any byte of the answer) is replaced by a new one once: the
// request is idempotent and the upstream cannot have processed it, as
// http.Transport retries it (shouldRetryRequest). A wait that timed out
// (Options.HeaderTimeout) is never retried: the upstream may be
// working on the request.
func (c *h1Client) RoundTrip(req *http.Request) (*http.Response, error) {
	addr := req.URL.Host
	pc := c.get(addr)
	for {
		reused := pc != nil
		if pc == nil {
			var err error
			if pc, err = c.connect(req.Context(), addr); err != nil {
				return nil, err
			}
		}
		// A request reset before it was sent leaves its connection to the
		// next one, as http.Transport does: a flood of resets (HTTP/2's
		// rapid reset) does not become a flood of upstream connections.
		if err := req.Context().Err(); err != nil {
			c.release(pc, addr, func() bool { return true }, true)
			return nil, err
		}
		res, err := c.exchange(pc, req, addr)
		if err == nil {
			return res, nil
		}
		_ = pc.nc.Close()
		var nr nothingReceived
		if !reused || !errors.As(err, &nr) || req.Context().Err() != nil {
			return nil, err
		}
		pc = nil
	}
}

// nothingReceived wraps the failure of an exchange that received no byte
// of an answer.
type nothingReceived struct{ err error }

func (e nothingReceived) Error() string { return e.err.Error() }
func (e nothingReceived) Unwrap() error { return e.err }

// connect dials addr. A dial under way finishes even when the request
// that asked for it is reset (the dialer's own timeout bounds it), and
// its connection serves the next request.
func (c *h1Client) connect(ctx context.Context, addr string) (*h1Conn, error) {
	nc, err := c.dial(context.WithoutCancel(ctx), "tcp", addr)
	if err != nil {
		return nil, err
	}
	pc := &h1Conn{nc: nc, bw: bufio.NewWriterSize(nc, 4<<10), limit: -1}
	pc.br = bufio.NewReaderSize(pc, 32<<10)
	if sc, ok := nc.(syscall.Conn); ok {
		pc.raw, _ = sc.SyscallConn()
	}
	return pc, nil
}

// exchange writes req on pc and reads the head of the answer.
func (c *h1Client) exchange(pc *h1Conn, req *http.Request, addr string) (*http.Response, error) {
	ctx := req.Context()
	// A client that leaves (a reset stream, a closed connection) ends the
	// exchange: the connection's deadline moves to the past, which ends
	// any read or write in progress; the connection is not reused.
	stop := context.AfterFunc(ctx, func() { _ = pc.nc.SetDeadline(time.Unix(1, 0)) })
	if err := writeRequest(pc.bw, req); err != nil {
		stop()
		if errors.Is(err, errBadHead) || isTimeout(err) {
			return nil, err
		}
		return nil, nothingReceived{err}
	}
	if c.headerTimeout > 0 {
		_ = pc.nc.SetReadDeadline(time.Now().Add(c.headerTimeout))
	}
	pc.limit = c.maxHeaderBytes
	res, err := c.readHead(pc, req)
	pc.limit = -1
	if c.headerTimeout > 0 {
		_ = pc.nc.SetReadDeadline(time.Time{})
	}
	if err == nil && ctx.Err() != nil { // the deadline above may have undone the AfterFunc's
		err = ctx.Err()
	}
	if err != nil {
		stop()
		return nil, err
	}
	reusable := !res.Close
	if res.Body == http.NoBody || res.Body == nil {
		res.Body = http.NoBody
		c.release(pc, addr, stop, reusable)
		return res, nil
	}
	res.Body = &h1Body{rc: res.Body, pc: pc, c: c, addr: addr, stop: stop, reusable: reusable,
		ctx: ctx, timeout: c.readTimeout}
	return res, nil
}

// readHead reads the answer's head, passing 1xx answers (103 Early Hints)
// to the request's httptrace hook, as http.Transport does for
// ReverseProxy.
func (c *h1Client) readHead(pc *h1Conn, req *http.Request) (*http.Response, error) {
	if _, err := pc.br.Peek(1); err != nil {
		switch {
		case pc.limit == 0:
			return nil, errHeaderTooLarge
		case isTimeout(err): // the upstream may be at work on it: never sent again
			return nil, err
		}
		return nil, nothingReceived{err} // closed or reset: the request was not processed
	}
	for n := 0; ; n++ {
		res, err := http.ReadResponse(pc.br, req)
		if err != nil {
			if pc.limit == 0 {
				err = errHeaderTooLarge
			}
			return nil, err
		}
		switch {
		case res.StatusCode == http.StatusSwitchingProtocols:
			return nil, errUnaskedSwitch
		case res.StatusCode >= 200:
			return res, nil
		case n >= 5: // http.Transport's bound
			return nil, errTooMany1xx
		}
		if infoResponse(req, res.StatusCode, textproto.MIMEHeader(res.Header)) {
			continue
		}
		if trace := httptrace.ContextClientTrace(req.Context()); trace != nil && trace.Got1xxResponse != nil {
			if err := trace.Got1xxResponse(res.StatusCode, textproto.MIMEHeader(res.Header)); err != nil {
				return nil, err
			}
		}
	}
}

// release ends an exchange whose answer was read: the connection goes back
// to the idle ones, or is closed.
func (c *h1Client) release(pc *h1Conn, addr string, stop func() bool, reusable bool) {
	if !stop() || !reusable || pc.br.Buffered() > 0 { // bytes past the answer: never reuse
		_ = pc.nc.Close()
		return
	}
	pc.idleAt = time.Now()
	c.mu.Lock()
	if c.closed || len(c.idle[addr]) >= c.maxIdle {
		c.mu.Unlock()
		_ = pc.nc.Close()
		return
	}
	if c.idle == nil {
		c.idle = map[string][]*h1Conn{}
	}
	c.idle[addr] = append(c.idle[addr], pc)
	c.mu.Unlock()
}

// get returns the most recently used idle connection of addr, or nil.
// Connections idle longer than idleTimeout are closed on the way.
func (c *h1Client) get(addr string) *h1Conn {
	c.mu.Lock()
	conns, ok := c.idle[addr]
	if !ok {
		c.mu.Unlock()
		return nil
	}
	var stale []*h1Conn
	if len(conns) > 0 && time.Since(conns[0].idleAt) > c.idleTimeout {
		i := 0
		for i < len(conns) && time.Since(conns[i].idleAt) > c.idleTimeout {
			i++
		}
		stale = append(stale, conns[:i]...)
		conns = append(conns[:0], conns[i:]...)
	}
	var pc *h1Conn
	if n := len(conns); n > 0 {
		pc = conns[n-1]
		conns[n-1] = nil
		conns = conns[:n-1]
	}
	c.idle[addr] = conns
	c.mu.Unlock()
	for _, s := range stale {
		_ = s.nc.Close()
	}
	if pc != nil && !pc.quiet() {
		_ = pc.nc.Close()
		return c.get(addr) // the next idle one, or none
	}
	return pc
}

// CloseIdleConnections closes the idle connections, as
// http.Transport's method of the same name: the client goes on, and
// dials anew when it needs to.
func (c *h1Client) CloseIdleConnections() {
	c.mu.Lock()
	idle := c.idle
	c.idle = nil
	c.mu.Unlock()
	for _, conns := range idle {
		for _, pc := range conns {
			_ = pc.nc.Close()
		}
	}
}

// closeIdle closes the idle connections to addr.
func (c *h1Client) closeIdle(addr string) {
	c.mu.Lock()
	idle := c.idle[addr]
	delete(c.idle, addr)
	c.mu.Unlock()
	for _, pc := range idle {
		_ = pc.nc.Close()
	}
}

// Close closes the idle connections and keeps none from now on: those in
// use close when their exchange ends.
func (c *h1Client) Close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.CloseIdleConnections()
}

// h1Body is an answer's body. Read to its end, it gives its connection
// back; closed before, it closes the connection (never draining what an
// upstream may still send). Close may come from another goroutine while
// a Read is under way (a spill's drainer reads as the handler closes), as
// http.Transport's bodies allow: it ends that Read, and a connection is
// either given back or closed, never both.
//
// Each read waits at most timeout (Options.ReadTimeout) for the
// upstream, unless the answer is a stream of server-sent events.
type h1Body struct {
	rc   io.ReadCloser
	pc   *h1Conn
	c    *h1Client
	addr string
	stop func() bool
	ctx  context.Context

	mu       sync.Mutex
	done     bool // released or closed
	reusable bool
	timeout  time.Duration
}

func (b *h1Body) Read(p []byte) (int, error) {
	b.mu.Lock()
	done, timeout := b.done, b.timeout
	b.mu.Unlock()
	if done {
		return 0, io.EOF
	}
	if timeout > 0 {
		_ = b.pc.nc.SetReadDeadline(time.Now().Add(timeout))
		if err := b.ctx.Err(); err != nil { // the deadline may have undone stop's
			return 0, err
		}
	}
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.mu.Lock()
		if !b.done {
			b.done = true
			if b.timeout > 0 {
				_ = b.pc.nc.SetReadDeadline(time.Time{})
			}
			b.c.release(b.pc, b.addr, b.stop, b.reusable)
		}
		b.mu.Unlock()
	}
	return n, err
}

// limited is the answer's connection, if counted by a connLimit.
func (b *h1Body) limited() *limitedConn {
	lc, _ := b.pc.nc.(*limitedConn)
	return lc
}

// noReuse closes the connection at the answer's end: it carried a stream,
// not counted among the address's connections.
func (b *h1Body) noReuse() {
	b.mu.Lock()
	b.reusable = false
	b.mu.Unlock()
}

// streams makes the answer a stream of server-sent events: its reads wait
// for the upstream as long as it takes, and its connection is not reused.
func (b *h1Body) streams() {
	b.mu.Lock()
	b.reusable, b.timeout = false, 0
	b.mu.Unlock()
}

func (b *h1Body) Close() error {
	b.mu.Lock()
	if b.done {
		b.mu.Unlock()
		return nil
	}
	b.done = true
	b.mu.Unlock()
	b.stop()
	_ = b.pc.nc.Close() // ends a Read under way
	return nil
}

// writeRequest writes the head of a request without a body (RFC 9112,
// section 3): what http.Request.Write writes for it, without sorting the
// header fields or allocating.
func writeRequest(w *bufio.Writer, req *http.Request) error {
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	if !httpguts.ValidHostHeader(host) {
		return fmt.Errorf("%w: Host %q", errBadHead, host)
	}
	uri := req.URL.RequestURI()
	if !validRequestTarget(uri) {
		return fmt.Errorf("%w: request target %q", errBadHead, uri)
	}
	w.WriteString(req.Method)
	w.WriteByte(' ')
	w.WriteString(uri)
	w.WriteString(" HTTP/1.1\r\nHost: ")
	w.WriteString(host)
	w.WriteString("\r\n")
	// In the order of their names, as http.Request.Write: a retry is the
	// same bytes as the first try.
	var buf [48]string
	keys := buf[:0]
	for k := range req.Header {
		switch k {
		case "Host", "Content-Length", "Transfer-Encoding", "Trailer":
			continue // written above, or not ours to send without a body
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		vs := req.Header[k]
		if !httpguts.ValidHeaderFieldName(k) {
			return fmt.Errorf("%w: field name %q", errBadHead, k)
		}
		for _, v := range vs {
			if k == "User-Agent" && v == "" {
				continue // ReverseProxy's way of sending none
			}
			if !httpguts.ValidHeaderFieldValue(v) {
				return fmt.Errorf("%w: value of field %q", errBadHead, k)
			}
			w.WriteString(k)
			w.WriteString(": ")
			w.WriteString(trimOWS(v))
			w.WriteString("\r\n")
		}
	}
	w.WriteString("\r\n")
	return w.Flush()
}

// validRequestTarget reports whether uri can stand in a request line:
// no spaces or control characters.
func validRequestTarget(uri string) bool {
	for i := 0; i < len(uri); i++ {
		if c := uri[i]; c <= ' ' || c == 0x7f {
			return false
		}
	}
	return uri != ""
}

// trimOWS removes the optional white space around a field value.
func trimOWS(v string) string {
	for len(v) > 0 && (v[0] == ' ' || v[0] == '\t') {
		v = v[1:]
	}
	for len(v) > 0 && (v[len(v)-1] == ' ' || v[len(v)-1] == '\t') {
		v = v[:len(v)-1]
	}
	return v
}

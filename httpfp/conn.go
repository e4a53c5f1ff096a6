package httpfp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"hash/maphash"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/net/http2/hpack"
)

// Errors the tap stops on; Conn.Err wraps one of them.
var (
	// ErrMalformed reports bytes that are not the protocol the Conn taps.
	ErrMalformed = errors.New("httpfp: malformed request stream")
	// ErrTooLarge reports a request header larger than MaxHeaderBytes.
	ErrTooLarge = errors.New("httpfp: request header too large")
	// ErrFlood reports an HTTP/2 header block that spans more frames or
	// bytes than a client needs for a header the server accepts (a
	// CONTINUATION flood, CVE-2023-45288's class). It ends the connection.
	ErrFlood = errors.New("httpfp: HTTP/2 header block too long")
)

// DefaultMaxHeaderBytes is the header limit used when Config.MaxHeaderBytes
// is zero, net/http's http.DefaultMaxHeaderBytes.
const DefaultMaxHeaderBytes = http.DefaultMaxHeaderBytes

// maxPending bounds the fingerprints a Conn keeps for requests no handler
// took yet; the oldest is evicted first. Their size is bounded too, by
// twice the header limit.
const maxPending = 256

// Config configures the taps. The zero value is ready to use.
type Config struct {
	// JA4H turns on JA4H (FoxIO License 1.1: non-commercial use only,
	// patent pending). If false, JA4H and JA4HR stay empty.
	JA4H bool
	// MaxHeaderBytes bounds the request header (request line or
	// pseudo-headers included) the tap follows, as http.Server's field of the
	// same name. If zero, DefaultMaxHeaderBytes is used; it must not be
	// negative. Set it to the server's value.
	MaxHeaderBytes int
	// MaxHPACKTable bounds the HPACK dynamic table an HTTP/2 client may
	// ask for, as the server's own limit (x/net/http2's
	// Server.MaxDecoderHeaderTableSize, 4096 unless set): the tap refuses
	// what the server refuses. If zero, 64 KiB, as permissive as any server
	// configuration.
	MaxHPACKTable uint32
}

// Validate reports the problems of c, all at once.
func (c Config) Validate() error {
	var errs []error
	if c.MaxHeaderBytes < 0 {
		errs = append(errs, fmt.Errorf("httpfp: MaxHeaderBytes %d is negative", c.MaxHeaderBytes))
	}
	return errors.Join(errs...)
}

func (c Config) maxHPACKTable() uint32 {
	if c.MaxHPACKTable > 0 {
		return c.MaxHPACKTable
	}
	return maxHPACKTable
}

func (c Config) maxHeaderBytes() int {
	if c.MaxHeaderBytes > 0 {
		return c.MaxHeaderBytes
	}
	return DefaultMaxHeaderBytes
}

// pending is a captured request waiting for its handler.
type pending struct {
	method, host, uri string // what the server will put in the *http.Request
	sum               uint64 // fieldHash sum of the fields (HTTP/2 and HTTP/3)
	size              int    // footprint, once queued
	fp                Fingerprint
}

// fieldHash hashes one header field: FNV-1a over the lowercased name
// (short), maphash over the value (long), mixed.
func fieldHash(seed maphash.Seed, name, value string) uint64 {
	const prime = 1099511628211
	h := uint64(14695981039346656037)
	for i := 0; i < len(name); i++ {
		c := name[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		h = (h ^ uint64(c)) * prime
	}
	h ^= maphash.String(seed, value)
	h ^= h >> 29
	h *= 0xbf58476d1ce4e5b9
	return h ^ h>>32
}

// summed reports whether a field counts in the sum that tells concurrent
// requests apart: the server leaves it in http.Request.Header as sent
// (x/net/http2 and quic-go drop Host, Expect and Trailer and merge Cookie).
func summed(name string) bool {
	if len(name) == 0 || name[0] == ':' {
		return false
	}
	for _, n := range [...]string{"host", "cookie", "expect", "trailer", "content-length"} {
		if len(name) == len(n) && strings.EqualFold(name, n) {
			return false
		}
	}
	return true
}

// headerSum is the order-independent sum of fieldHash over r.Header.
func headerSum(seed maphash.Seed, h http.Header) uint64 {
	var sum uint64
	for k, vs := range h {
		if !summed(k) {
			continue
		}
		for _, v := range vs {
			sum += fieldHash(seed, k, v)
		}
	}
	return sum
}

// tap consumes the bytes a server reads.
type tap interface {
	feed(p []byte) error
}

// Conn is a net.Conn whose reads are fingerprinted. It is safe for the
// concurrent use net/http and x/net/http2 make of a connection.
type Conn struct {
	net.Conn
	proto Proto
	seed  maphash.Seed // of fieldHash

	tapMu   sync.Mutex // held while feeding; the server reads from one goroutine at a time
	tap     tap
	readErr error       // what Read fails with once the HTTP/2 tap ended the connection
	failed  atomic.Bool // readErr is set

	tlsOnce sync.Once
	tls     *tls.ConnectionState // of the underlying connection, nil if none

	mu      sync.Mutex
	queue   []*pending // oldest first
	queued  int        // footprint of queue
	budget  int        // bound of queued: twice the header limit
	err     error
	stopped bool
}

// NewConn returns c with its reads tapped for protocol p. Bytes pass through
// unchanged, but where the tap ends an HTTP/2 connection (see Read). For
// H3, which has no net.Conn, use H3Tracer.
func NewConn(c net.Conn, p Proto, cfg Config) *Conn {
	fc := &Conn{Conn: c, proto: p, seed: maphash.MakeSeed(), budget: 2 * cfg.maxHeaderBytes()}
	switch p {
	case H1:
		fc.tap = newH1Tap(fc, cfg)
	case H2:
		fc.tap = newH2Tap(fc, cfg)
	default:
		fc.stopped = true
	}
	return fc
}

// Read reads from the underlying connection and feeds what it read to the
// tap. On HTTP/2, Read passes on a frame that takes a header block past its
// bounds (ErrFlood) only up to its frame header, a CONTINUATION's with its
// stream changed: the server meets a connection error of type
// PROTOCOL_ERROR (RFC 9113, section 6.10: a header block's frames are
// contiguous and on one stream) and answers it with a GOAWAY. Every Read
// after it fails with the tap's error, as every Read after frames the tap
// cannot follow (passed on as they came: the server refuses them too), so
// that a server that read on would close the connection.
func (c *Conn) Read(p []byte) (int, error) {
	if c.failed.Load() {
		return 0, c.readError()
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		var ferr error
		if n, ferr = c.feed(p[:n]); n == 0 {
			return 0, ferr
		}
	}
	return n, err
}

// feed feeds p to the tap and returns how many bytes of p Read passes on,
// and, when none, the error it fails with.
func (c *Conn) feed(p []byte) (int, error) {
	c.tapMu.Lock()
	defer c.tapMu.Unlock()
	if c.readErr != nil {
		return 0, c.readErr
	}
	if c.tap == nil {
		return len(p), nil
	}
	err := c.tap.feed(p)
	if err == nil {
		return len(p), nil
	}
	t, _ := c.tap.(*h2Tap)
	c.tap = nil // let the decoder state go
	c.stop(err)
	if t == nil {
		return len(p), nil
	}
	// The frames the server reads after these are frames the tap does not
	// see: it could not bound their header blocks.
	c.readErr = err
	c.failed.Store(true)
	switch {
	case !errors.Is(err, ErrFlood):
		return len(p), nil
	case t.cutAt > 0:
		if t.typ == frameContinuation {
			p[t.cutAt-1] ^= 1 // the stream identifier's last bit
		}
		return t.cutAt, nil
	}
	return 0, err
}

// readError is the error Read fails with once failed is set.
func (c *Conn) readError() error {
	c.tapMu.Lock()
	defer c.tapMu.Unlock()
	return c.readErr
}

// stop records why fingerprinting stopped.
func (c *Conn) stop(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.err, c.stopped = err, true
}

// SetFieldHook has f called with every header field the HTTP/2 tap
// decodes from now on — requests' and trailers', in order, each as it is
// decoded, while a Read that read its last byte runs — until it is called
// again (f nil: none). A server that takes the connection up afresh reads
// the client's header blocks through it: their HPACK state is the tap's.
// It does nothing on other protocols, and f is never called once the tap
// stopped (Err).
func (c *Conn) SetFieldHook(f func(hpack.HeaderField)) {
	c.tapMu.Lock()
	defer c.tapMu.Unlock()
	if t, ok := c.tap.(*h2Tap); ok {
		t.hook = f
	}
}

// Rest lets go of what the tap keeps between requests only to go faster
// — the names of the last request, its fingerprint's memo — when the
// connection stands between requests: for a server that parks it idle.
// The next request's fingerprint is the same, made afresh.
func (c *Conn) Rest() {
	c.tapMu.Lock()
	defer c.tapMu.Unlock()
	switch t := c.tap.(type) {
	case *h1Tap:
		if t.state == h1LineStart {
			t.buf, t.ends, t.val, t.cookies = nil, nil, nil, nil
			t.memo = nil
		}
	case *h2Tap:
		if !t.inBlock {
			t.fields.names, t.fields.cookies = nil, nil
			t.memo = nil
		}
	}
}

// AtRest reports whether an HTTP/1 connection stands between requests:
// every byte read through it so far belongs to a request read whole, so a
// server that has no unread bytes of its own can let go of its buffers and
// take the connection up again at its next byte. Empty lines read after
// the last request keep it from rest until the next request begins: a
// server may hold them, and answer them (net/http takes them for a
// malformed request unless they follow a POST). It reports false for
// HTTP/2, after an Upgrade or CONNECT, and once the tap stopped.
func (c *Conn) AtRest() bool {
	c.tapMu.Lock()
	defer c.tapMu.Unlock()
	t, ok := c.tap.(*h1Tap)
	return ok && t.state == h1LineStart && !t.blank
}

// Err returns why the tap stopped fingerprinting this connection, or nil.
// It wraps ErrMalformed, ErrTooLarge or ErrFlood.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Proto returns the protocol the Conn was made for.
func (c *Conn) Proto() Proto { return c.proto }

// ConnectionState returns the TLS state of the underlying connection, or
// the zero value if it has none. x/net/http2 reads it through this method.
func (c *Conn) ConnectionState() tls.ConnectionState {
	if cs, ok := c.Conn.(interface{ ConnectionState() tls.ConnectionState }); ok {
		return cs.ConnectionState()
	}
	return tls.ConnectionState{}
}

// CloseWrite shuts down the writing side of the underlying connection
// (as *tls.Conn and *net.TCPConn do; net/http uses it when it can), or
// returns errors.ErrUnsupported.
func (c *Conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// tlsState returns the underlying connection's TLS state once its
// handshake is done, or nil if it has none.
func (c *Conn) tlsState() *tls.ConnectionState {
	c.tlsOnce.Do(func() {
		if cs, ok := c.Conn.(interface{ ConnectionState() tls.ConnectionState }); ok {
			st := cs.ConnectionState()
			if st.HandshakeComplete {
				c.tls = &st
			}
		}
	})
	return c.tls
}

// NetConn returns the underlying connection's NetConn if it has one (as
// *tls.Conn does), else the underlying connection itself.
func (c *Conn) NetConn() net.Conn {
	if nc, ok := c.Conn.(interface{ NetConn() net.Conn }); ok {
		return nc.NetConn()
	}
	return c.Conn
}

// push queues a captured request for its handler.
func (c *Conn) push(p *pending) {
	p.size = p.footprint()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queue = append(c.queue, p)
	c.queued += p.size
	for len(c.queue) > maxPending || (c.queued > c.budget && len(c.queue) > 1) {
		c.remove(0, 1)
	}
}

// footprint is about the memory a pending request holds, counted as if
// it shared nothing.
func (p *pending) footprint() int {
	n := 256 + len(p.method) + len(p.host) + len(p.uri) + len(p.fp.HFPR) + len(p.fp.JA4HR)
	for _, name := range p.fp.Names {
		n += 16 + len(name)
	}
	return n
}

// take removes and returns the fingerprint captured for r.
func (c *Conn) take(r *http.Request) (*Fingerprint, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proto == H1 {
		for i, p := range c.queue {
			if p.method == r.Method && p.uri == r.RequestURI {
				// Requests are served in order: those before r were
				// answered without a handler (OPTIONS *) or not taken.
				c.remove(0, i+1)
				return &p.fp, true
			}
		}
		return nil, false
	}
	// Concurrent streams: the oldest request with the same method,
	// authority and path; among several, the oldest whose fields r has.
	found, n := -1, 0
	for i, p := range c.queue {
		if p.method == r.Method && p.uri == r.RequestURI && p.host == r.Host {
			if n++; n == 1 {
				found = i
			}
		}
	}
	if found < 0 {
		return nil, false
	}
	if n > 1 {
		sum := headerSum(c.seed, r.Header)
		for i, p := range c.queue[found:] {
			if p.method == r.Method && p.uri == r.RequestURI && p.host == r.Host && p.sum == sum {
				found += i
				break
			}
		}
	}
	p := c.queue[found]
	c.remove(found, found+1)
	return &p.fp, true
}

// remove drops queue[i:j], keeping the backing array unless pipelining
// grew it.
func (c *Conn) remove(i, j int) {
	for _, p := range c.queue[i:j] {
		c.queued -= p.size
	}
	n := copy(c.queue[i:], c.queue[j:])
	clear(c.queue[i+n:])
	c.queue = c.queue[:i+n]
	if len(c.queue) == 0 && cap(c.queue) > 16 {
		c.queue = nil
	}
}

// Pending returns how many captured requests wait for their handler.
func (c *Conn) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue)
}

type connKey struct{}

type requestKey struct{}

// NewContext returns a copy of ctx that carries c, for http.Server's
// ConnContext and http2.ServeConnOpts.Context.
func NewContext(ctx context.Context, c *Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// FromContext returns the Conn stored in ctx by NewContext.
func FromContext(ctx context.Context) (*Conn, bool) {
	c, ok := ctx.Value(connKey{}).(*Conn)
	return c, ok && c != nil
}

// Handler returns a handler that takes each request's fingerprint from its
// connection once, before h runs, and stores it in the request's context for
// FromRequest. Wrap the handler of the http.Server, of
// http2.ServeConnOpts and of http3.Server with it, outermost.
//
// net/http sets r.TLS only for a *tls.Conn; for a Conn over one, Handler
// sets r.TLS to the underlying connection's state.
func Handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := FromContext(r.Context()); ok {
			fp, _ := c.take(r) // nil when not captured: FromRequest must not take another
			r = r.WithContext(context.WithValue(r.Context(), requestKey{}, fp))
			if r.TLS == nil && c.Conn != nil {
				r.TLS = c.tlsState()
			}
		}
		h.ServeHTTP(w, r)
	})
}

// FromRequest returns the fingerprint of r. Under Handler it is the one
// Handler stored; otherwise it is taken from the connection, which works
// once per request: call it once and keep the result.
func FromRequest(r *http.Request) (*Fingerprint, bool) {
	ctx := r.Context()
	if fp, ok := ctx.Value(requestKey{}).(*Fingerprint); ok {
		return fp, fp != nil
	}
	if c, ok := FromContext(ctx); ok {
		return c.take(r)
	}
	return nil, false
}

package upstream

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"

	"github.com/maatproxy/maat/edge/internal/spill"
)

// Options are the bounds of a Transport. Each names the configuration key
// the edge fills it from.
type Options struct {
	// Conns caps the connections to each address, those of streams apart
	// (limits.upstream_conns): an exchange holds one of its slots, and a
	// request beyond waits in line for a free one. It must be set: with
	// zero, no slot is ever free.
	Conns int
	// Streams caps the streams open to each address
	// (limits.upstream_streams); beyond, ErrStreamsFull.
	Streams int
	// AddrConns are the addresses (host:port) whose connections are capped
	// at another number than Conns (sites[].upstream_conns).
	AddrConns map[string]int
	// Queue is the longest wait for a free slot (limits.upstream_queue);
	// beyond, ErrQueueFull.
	Queue time.Duration
	// QueueLen caps the requests waiting for a slot of each address
	// (limits.upstream_queue_len); beyond, the cluster with the most
	// waiting loses its newest (ErrQueueShare). If zero,
	// DefaultQueueFactor times the address's Conns, at least
	// DefaultQueueMin.
	QueueLen int
	// ConnectTimeout bounds a dial and its TLS handshake
	// (timeouts.upstream_dial; if zero, only the system bounds them), and
	// the wait of a dial at the Conns cap for a connection to close (if
	// zero, 10 s).
	ConnectTimeout time.Duration
	// HeaderTimeout bounds the wait for an answer's head
	// (timeouts.upstream_header). If zero, none.
	HeaderTimeout time.Duration
	// ReadTimeout bounds each wait for an answer's body, streams apart
	// (timeouts.upstream_read); beyond, the body ends in ErrReadTimeout. If
	// zero, none.
	ReadTimeout time.Duration
	// FailPause is how long an address that could not be reached is
	// skipped (timeouts.fail_pause).
	FailPause time.Duration
	// TLS is the configuration of each https:// address (host:port). An
	// address not in it is verified with the system's roots and its host
	// name.
	TLS map[string]*tls.Config
	// UnixSocket, if not nil, says which addresses are Unix sockets, and
	// their path; they are dialed as such.
	UnixSocket func(addr string) (path string, ok bool)
	// Spill, if not nil, reads answers ahead of clients that fall behind
	// (limits.spill_bytes, limits.spill_total); the OnCut of each comes
	// from its Route.
	Spill *spill.Options
	// StreamQuiet is how long an answer's read waits for the upstream,
	// while a request waits for a slot, before the answer counts as a
	// stream (a long poll). If zero, DefaultStreamQuiet; only tests set it.
	StreamQuiet time.Duration
}

// conns is addr's cap of connections, Conns unless AddrConns says
// otherwise.
func (o *Options) conns(addr string) int {
	if n := o.AddrConns[addr]; n > 0 {
		return n
	}
	return o.Conns
}

// mostConns is the largest cap of connections of any address.
func (o *Options) mostConns() int {
	n := o.Conns
	for _, c := range o.AddrConns {
		n = max(n, c)
	}
	return n
}

// maxHeaderBytes bounds the head of an upstream's answer.
const maxHeaderBytes = 1 << 20

// idleTimeout is how long an idle connection is kept.
const idleTimeout = 90 * time.Second

// Transport sends a request to its Route's pool: it takes a connection slot
// of an address (waiting at most Options.Queue for one), and when the
// connection cannot be made — so nothing was sent — tries the next address
// with the same request, of which only the URL's host changes. A
// websocket's handshake also takes one of the address's streams first:
// beyond them, it is refused unsent (ErrStreamsFull).
//
// The common exchange (Common) goes through the package's own HTTP/1.1
// client, every other request through an http.Transport; both count their
// connections under one cap per address. It is safe for concurrent use.
type Transport struct {
	base      *http.Transport
	fast      *h1Client // the exchanges fastPath takes
	conns     *connLimit
	slots     slotTable
	queue     time.Duration
	read      time.Duration // Options.ReadTimeout for base's answers; h1Client bounds its own
	failPause time.Duration
	spill     *spill.Options
}

// New returns a Transport bounded by o.
func New(o Options) *Transport {
	lim := newConnLimit(o.Conns, o.ConnectTimeout)
	lim.conns = o.conns
	t := &Transport{
		base:      newTransport(o, lim),
		fast:      newH1Client(o, lim),
		conns:     lim,
		slots:     slotTable{size: o.Conns, queueLen: o.QueueLen, streams: o.Streams, conns: o.conns, quiet: o.StreamQuiet},
		queue:     o.Queue,
		read:      o.ReadTimeout,
		failPause: o.FailPause,
		spill:     o.Spill,
	}
	lim.evict = func(addr string) {
		t.base.CloseIdleConnections()
		t.fast.closeIdle(addr)
	}
	return t
}

// dialer is how the Transport connects to an upstream address.
type dialer func(ctx context.Context, network, addr string) (net.Conn, error)

// dialers returns the dialers of plain and https:// addresses.
func dialers(o Options, lim *connLimit) (plain, secure dialer) {
	d := &net.Dialer{Timeout: o.ConnectTimeout, KeepAlive: 30 * time.Second}
	plain = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if o.UnixSocket != nil {
			if path, ok := o.UnixSocket(addr); ok {
				return d.DialContext(ctx, "unix", path)
			}
		}
		return d.DialContext(ctx, network, addr)
	}
	// https:// upstreams: verified as their Options.TLS says (the system's
	// roots by default), HTTP/1.1 as for the others.
	secure = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conf := o.TLS[addr]
		if conf == nil {
			host, _, _ := net.SplitHostPort(addr)
			conf = &tls.Config{ServerName: host, NextProtos: []string{"http/1.1"}}
		}
		raw, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		c := tls.Client(raw, conf)
		if err := c.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, &net.OpError{Op: "dial", Net: network, Err: err} // not sent: another address may be tried
		}
		return c, nil
	}
	return lim.wrap(plain), lim.wrap(secure)
}

// NewHTTPTransport returns the http.Transport a Transport sends the
// exchanges its own client does not take through, without the cap on
// connections over both: pooled connections sized for a proxy's
// concurrency (Go's default of 2 idle connections per host costs a third
// of the throughput), plain HTTP/1.1, no transparent decompression. The
// edge's benchmarks compare with it.
func NewHTTPTransport(o Options) *http.Transport { return newTransport(o, nil) }

func newTransport(o Options, lim *connLimit) *http.Transport {
	plain, secure := dialers(o, lim)
	return &http.Transport{
		Proxy:               nil, // never an environment proxy between the edge and its upstream
		DialContext:         plain,
		DialTLSContext:      secure,
		MaxIdleConns:        4096,
		MaxIdleConnsPerHost: o.mostConns(),
		// The slots bound exchanges; this bounds connections, dials in
		// progress included: a request reset while its dial is under way
		// leaves that dial to finish into the idle pool, and without this
		// cap a flood of resets would dial on and on. A stream's connection
		// (an event stream, a long poll) stays the Transport's while it
		// lasts, beside the others: connLimit holds those to Conns.
		MaxConnsPerHost:        o.mostConns() + o.Streams,
		IdleConnTimeout:        idleTimeout,
		ResponseHeaderTimeout:  o.HeaderTimeout,
		ExpectContinueTimeout:  time.Second,
		DisableCompression:     true,
		MaxResponseHeaderBytes: maxHeaderBytes,
		WriteBufferSize:        32 << 10,
		ReadBufferSize:         32 << 10,
	}
}

// newH1Client returns the client of the common exchanges, with the
// http.Transport's timeouts and bounds.
func newH1Client(o Options, lim *connLimit) *h1Client {
	plain, _ := dialers(o, lim)
	return &h1Client{
		dial:           plain,
		headerTimeout:  o.HeaderTimeout,
		readTimeout:    o.ReadTimeout,
		maxHeaderBytes: maxHeaderBytes,
		maxIdle:        o.mostConns(),
		idleTimeout:    idleTimeout,
	}
}

// CloseIdleConnections closes the idle connections of both clients; they
// are dialed anew when needed.
func (t *Transport) CloseIdleConnections() {
	t.base.CloseIdleConnections()
	t.fast.CloseIdleConnections()
}

// Close closes the idle connections and keeps none from now on: those in
// use close when their exchange ends.
func (t *Transport) Close() {
	t.base.CloseIdleConnections()
	t.fast.Close()
}

// Peak is the most connections that were open to one address at once.
func (t *Transport) Peak() int { return t.conns.peak() }

// Idle is the number of connections of the own client idle to addr.
func (t *Transport) Idle(addr string) int {
	t.fast.mu.Lock()
	defer t.fast.mu.Unlock()
	return len(t.fast.idle[addr])
}

var (
	// ErrQueueFull is a request that waited Options.Queue for a free
	// connection slot.
	ErrQueueFull = errors.New("upstream: no free connection")
	// ErrReadTimeout ends an answer whose upstream sent nothing for
	// Options.ReadTimeout.
	ErrReadTimeout = errors.New("upstream: answer quiet past the read timeout")

	errNoRoute = errors.New("upstream: request without a picked Route")
)

// RoundTrip sends req to the address its Route picked, or the next ones
// that can be reached; req's context carries the Route (WithRoute), on
// which Pick was called.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	route := RouteFrom(req.Context())
	if route == nil || route.target == nil {
		return nil, errNoRoute
	}
	pool := route.Pool
	var tried [8]*target
	ntried := 0
	retryable := req.Body == nil || req.Body == http.NoBody
	var rt http.RoundTripper = t.base
	var conn *atomic.Pointer[limitedConn]
	if fastPath(req) {
		rt = t.fast
	} else {
		// The connection under the answer, which a stream takes out of
		// Options.Conns' count.
		conn = new(atomic.Pointer[limitedConn])
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(i httptrace.GotConnInfo) {
				if lc, ok := i.Conn.(*limitedConn); ok {
					conn.Store(lc)
				}
			}}))
	}
	upgrade := req.Header["Upgrade"] != nil // only websockets' are forwarded
	out := req                              // its URL is Pick's
	for {
		tg := route.target
		if upgrade && !tg.slots.takeStream() {
			return nil, ErrStreamsFull
		}
		if err := tg.slots.acquire(req.Context(), route.flow(), route.Priority, t.queue); err != nil {
			if upgrade {
				tg.slots.giveStream()
			}
			return nil, err
		}
		sent := time.Now()
		res, err := rt.RoundTrip(out)
		if err == nil {
			tg.slots.lat.add(sent, time.Since(sent))
			var lc *limitedConn
			if conn != nil {
				lc = conn.Load()
			}
			res, err = t.hold(res, tg.slots, route, lc, upgrade)
			if err == nil {
				pool.ok(tg)
			}
			return res, err
		}
		tg.slots.release(route.flow())
		if upgrade {
			tg.slots.giveStream()
		}
		if !IsDialError(err) {
			return nil, err
		}
		now := time.Now()
		pool.fail(tg, now)
		tried[ntried] = tg
		ntried++
		if !retryable || ntried >= len(pool.targets) || ntried >= len(tried) {
			return nil, err
		}
		next := pool.pick(now, tried[:ntried])
		if next == nil {
			return nil, err
		}
		route.target = next
		out = new(http.Request)
		*out = *req
		out.URL = JoinURL(next.url, route.in)
	}
}

// IsDialError reports whether err is a failure to reach the address: the
// request was not sent.
func IsDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// hold settles what an answer holds until it ends. A stream — a protocol
// switch (websockets, which took a stream before it was sent: ticket) or
// server-sent events — gives its slot back at once and holds one of the
// address's streams, or, when they are all open, is refused; its
// connection is not counted among Options.Conns meanwhile. Any other
// answer holds its slot until its body is closed (ReverseProxy closes it
// after copying, or on the client's reset), unless it turns out a long
// poll (connSlots.settle); with Options.Spill, its body can be read ahead
// of a client that falls behind (spill.Body).
func (t *Transport) hold(res *http.Response, slots *connSlots, route *Route, lc *limitedConn, ticket bool) (*http.Response, error) {
	b := &body{ReadCloser: res.Body, slots: slots, flow: route.flow(), conn: lc}
	rwc, switched := res.Body.(io.ReadWriteCloser)
	switched = switched && res.StatusCode == http.StatusSwitchingProtocols
	stream := switched || EventStream(res.Header.Get("Content-Type"))
	if ticket && !switched {
		slots.giveStream() // not switched: an answer as any other
		ticket = false
	}
	if stream && !ticket && !slots.takeStream() {
		_ = res.Body.Close()
		slots.release(b.flow)
		return nil, ErrStreamsFull
	}
	if !stream {
		b.state = bodySlot
		if hb, ok := res.Body.(*h1Body); ok {
			b.conn = hb.limited()
		} else if t.read > 0 {
			b.read = t.read
			b.timer = time.AfterFunc(time.Hour, b.timeout)
			b.timer.Stop()
		}
		slots.track(b)
		res.Body = b
		if t.spill != nil && res.ContentLength != 0 {
			o := *t.spill
			o.OnCut = route.OnCut
			sb := spill.New(b, slots, o)
			b.spill.Store(sb)
			res.Body = sb
		}
		return res, nil
	}
	b.state = bodyStream
	if hb, ok := res.Body.(*h1Body); ok {
		b.conn = hb.limited()
		hb.streams() // server-sent events: quiet as long as they like
	}
	if b.conn != nil {
		b.conn.uncount()
	}
	slots.release(b.flow)
	if switched {
		res.Body = &switchedBody{body: b, rwc: rwc}
		return res, nil
	}
	res.Body = b
	return res, nil
}

// body is an upstream answer's body, which holds a connection slot
// (bodySlot) or one of the address's streams (bodyStream) until it is
// closed. An ordinary answer of http.Transport's waits at most read
// (Options.ReadTimeout) for each read; h1Client bounds its own.
type body struct {
	io.ReadCloser
	slots     *connSlots
	flow      flow
	conn      *limitedConn // the connection under the answer, if counted by connLimit
	read      time.Duration
	timer     *time.Timer // closes the body when a read waits past read
	timedOut  atomic.Bool
	readSince atomic.Int64               // when the read under way began (UnixNano); 0: none
	spill     atomic.Pointer[spill.Body] // the read-ahead that wraps this body, if any

	mu    sync.Mutex
	state int8
}

const (
	bodySlot = iota + 1
	bodyStream
	bodyDone
)

func (b *body) Read(p []byte) (int, error) {
	b.readSince.Store(time.Now().UnixNano())
	if b.timer != nil {
		b.timer.Reset(b.read)
	}
	n, err := b.ReadCloser.Read(p)
	if b.timer != nil {
		b.timer.Stop()
		if b.timedOut.Load() {
			err = ErrReadTimeout
		}
	}
	b.readSince.Store(0)
	return n, err
}

// timeout ends a read that waited past read.
func (b *body) timeout() {
	b.timedOut.Store(true)
	_ = b.ReadCloser.Close()
}

// toStream makes an answer holding a slot a stream, if one of the
// address's streams is free: it gives its slot to a waiting request.
func (b *body) toStream() bool {
	if !b.slots.takeStream() {
		return false
	}
	b.mu.Lock()
	if b.state != bodySlot {
		b.mu.Unlock()
		b.slots.giveStream()
		return false
	}
	b.state = bodyStream
	// Before Close can see the stream (end counts the connection again).
	if hb, ok := b.ReadCloser.(*h1Body); ok {
		hb.noReuse() // its connection was not counted: it is not kept
	}
	if b.conn != nil {
		b.conn.uncount()
	}
	b.mu.Unlock()
	b.slots.untrack(b)
	b.slots.release(b.flow)
	return true
}

func (b *body) Close() error {
	err := b.ReadCloser.Close()
	if b.timer != nil {
		b.timer.Stop()
	}
	b.end()
	return err
}

// end gives back the slot or the stream the answer held.
func (b *body) end() {
	b.mu.Lock()
	state := b.state
	b.state = bodyDone
	b.mu.Unlock()
	switch state {
	case bodySlot:
		b.slots.untrack(b)
		b.slots.release(b.flow)
	case bodyStream:
		b.slots.giveStream()
		if b.conn != nil {
			b.conn.recount() // kept by the client for another exchange: counted again
		}
	}
}

// switchedBody is the tunnel of a protocol switch (a websocket), a stream.
type switchedBody struct {
	*body
	rwc io.ReadWriteCloser
}

func (b *switchedBody) Write(p []byte) (int, error) { return b.rwc.Write(p) }

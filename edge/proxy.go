package edge

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/maatproxy/maat/static"
)

// dialer is how the edge connects to an upstream address.
type dialer func(ctx context.Context, network, addr string) (net.Conn, error)

// upstreamDialers returns the dialers of plain and https:// upstream
// addresses; unix:/path.sock addresses are dialed as unix sockets.
func upstreamDialers(cfg *Config, tlsByAddr map[string]*tls.Config, lim *connLimit) (plain, secure dialer) {
	d := &net.Dialer{Timeout: cfg.Timeouts.UpstreamDial.D(), KeepAlive: 30 * time.Second}
	plain = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if path, ok := unixSocket(addr); ok {
			return d.DialContext(ctx, "unix", path)
		}
		return d.DialContext(ctx, network, addr)
	}
	// https:// upstreams: verified as their upstream_tls says (the
	// system's roots by default), HTTP/1.1 as for the others.
	secure = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conf := tlsByAddr[addr]
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

// newTransport returns the upstream transport of the exchanges h1Client
// does not take: pooled connections sized for a proxy's concurrency (Go's
// default of 2 idle connections per host costs a third of the
// throughput), plain HTTP/1.1, no transparent decompression. Exchanges
// per address are capped by connSlots, which queue requests beyond the
// cap.
func newTransport(cfg *Config, tlsByAddr map[string]*tls.Config, lim *connLimit) *http.Transport {
	plain, secure := upstreamDialers(cfg, tlsByAddr, lim)
	return &http.Transport{
		Proxy:               nil, // never an environment proxy between the edge and its upstream
		DialContext:         plain,
		DialTLSContext:      secure,
		MaxIdleConns:        4096,
		MaxIdleConnsPerHost: cfg.Limits.UpstreamConns,
		// The slots bound exchanges; this bounds connections, dials in
		// progress included: a request reset while its dial is under way
		// leaves that dial to finish into the idle pool, and without this
		// cap a flood of resets would dial on and on. A stream's connection
		// (an event stream, a long poll) stays the Transport's while it
		// lasts, beside the others: connLimit holds those to
		// upstream_conns.
		MaxConnsPerHost:        cfg.Limits.UpstreamConns + cfg.Limits.UpstreamStreams,
		IdleConnTimeout:        90 * time.Second,
		ResponseHeaderTimeout:  cfg.Timeouts.UpstreamHeader.D(),
		ExpectContinueTimeout:  time.Second,
		DisableCompression:     true,
		MaxResponseHeaderBytes: maxUpstreamHeaderBytes,
		WriteBufferSize:        32 << 10,
		ReadBufferSize:         32 << 10,
	}
}

// closeIdleUpstreams closes the idle upstream connections of both
// clients; they are dialed anew when needed.
func (h *Handler) closeIdleUpstreams() {
	h.transport.CloseIdleConnections()
	h.h1.CloseIdleConnections()
}

// maxUpstreamHeaderBytes bounds the head of an upstream's answer.
const maxUpstreamHeaderBytes = 1 << 20

// newH1Client returns the client of the common exchanges (h1Client), with
// the Transport's timeouts and bounds.
func newH1Client(cfg *Config, lim *connLimit) *h1Client {
	plain, _ := upstreamDialers(cfg, nil, lim)
	return &h1Client{
		dial:           plain,
		headerTimeout:  cfg.Timeouts.UpstreamHeader.D(),
		readTimeout:    cfg.Timeouts.UpstreamRead.D(),
		maxHeaderBytes: maxUpstreamHeaderBytes,
		maxIdle:        cfg.Limits.UpstreamConns,
		idleTimeout:    90 * time.Second,
	}
}

// newReverseProxy returns the proxy for all sites of the Handler: the route
// travels in the request's state, chosen before ServeHTTP, and the
// upstreamTransport picks the address.
func (h *Handler) newReverseProxy(up *upstreamTransport, bufs *bufferPool) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Transport:      up,
		Rewrite:        h.rewrite,
		ErrorHandler:   h.upstreamError,
		ModifyResponse: h.upstreamResponse,
		BufferPool:     bufs,
		// A body cut by the upstream or by the client is counted and in
		// the request's log line; httputil's own words on it are debug,
		// in the edge's log, not the process's standard error.
		ErrorLog: slog.NewLogLogger(h.env.Log.Handler(), slog.LevelDebug),
	}
}

// rewrite builds the upstream request from the inbound one (DESIGN.md
// "Headers to the upstream"). It runs once per request: a retry on another
// address changes only the URL's host (upstreamTransport).
func (h *Handler) rewrite(pr *httputil.ProxyRequest) {
	st := stateOf(pr.In)
	st.inURL = pr.In.URL
	st.target = st.route.pool.pick(st.start, nil)
	pr.Out.URL = upstreamURL(st.target.url, pr.In.URL)
	pr.Out.Host = pr.In.Host // the upstream sees the site's name, as behind Caddy
	hdr := pr.Out.Header
	for k := range hdr { // every client-sent X-Maat-* goes, whatever its case
		if hasPrefixFold(k, "X-Maat-") || !st.peerTrusted && (hasPrefixFold(k, "X-Forwarded-") || strings.EqualFold(k, "Forwarded")) {
			delete(hdr, k)
		}
	}
	// X-Forwarded-For: the client's own values are kept only when they came
	// through a trusted proxy; ReverseProxy's Rewrite already removed them.
	peer := st.peer.String()
	client := peer
	if st.client != st.peer {
		client = st.client.String()
	}
	if st.peerTrusted {
		if prior := pr.In.Header.Values("X-Forwarded-For"); len(prior) > 0 {
			peer = strings.Join(prior, ", ") + ", " + peer
		}
	}
	// The values share one array of the request's state: one allocation
	// for all of them (each a full slice: a rule that adds to one copies).
	vals := append(st.hdrVals[:0], peer, forwardedProto(pr.In), pr.In.Host, client, st.id,
		strconv.Itoa(st.weight), st.action, st.ja4)
	for i, k := range [...]string{"X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host", "X-Real-Ip",
		"X-Request-Id", "X-Maat-Weight", "X-Maat-Action", "X-Maat-Ja4"} {
		if vals[i] != "" || k != "X-Maat-Ja4" {
			hdr[k] = vals[i : i+1 : i+1]
		}
	}
	if st.demo {
		demoHeaders(hdr, pr.In, st)
	}
	for i := range st.route.reqOps {
		st.route.reqOps[i].apply(hdr)
	}
	// More byte ranges than limits.ranges (or overlapping ones): the
	// upstream answers the whole response, as Apache does past MaxRanges.
	if _, ok := hdr["Range"]; ok && static.LimitRanges(hdr, h.cfg.Limits.Ranges) {
		h.env.metrics.limited.WithLabelValues("ranges").Inc()
	}
	if pr.Out.Body != nil && pr.Out.Body != http.NoBody {
		pr.Out.Body = &clientBody{ReadCloser: pr.Out.Body, st: st, in: pr.In, out: pr.Out}
	}
}

// forwardedProto is the scheme the client used: https on every listener of
// the Server; a Handler served without TLS (tests) says so.
func forwardedProto(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

// upstreamURL is the URL of the inbound request at an upstream address:
// the address's base path joined with the request's path (escaping kept),
// and the request's query. It is httputil.ProxyRequest.SetURL's join,
// written once for the first try and for retries on another address.
func upstreamURL(base, in *url.URL) *url.URL {
	u := *in
	u.Scheme, u.Host, u.User = base.Scheme, base.Host, nil
	if base.Path != "" && base.Path != "/" {
		p := strings.TrimSuffix(base.EscapedPath(), "/") + in.EscapedPath()
		u.Path = strings.TrimSuffix(base.Path, "/") + in.Path
		u.RawPath = ""
		if u.EscapedPath() != p {
			u.RawPath = p
		}
	}
	if base.RawQuery != "" && in.RawQuery != "" {
		u.RawQuery = base.RawQuery + "&" + in.RawQuery
	} else if base.RawQuery != "" {
		u.RawQuery = base.RawQuery
	}
	return &u
}

// upstreamTransport sends a request to the route's pool: it takes a
// connection slot of an address (waiting at most queue for one), and when
// the connection cannot be made — so nothing was sent — tries the next
// address with the same request, of which only the URL's host changes.
// A websocket's handshake also takes one of the address's streams first
// (limits.upstream_streams): beyond them, it is answered 503 unsent.
type upstreamTransport struct {
	base  http.RoundTripper
	fast  *h1Client // the exchanges fastPath takes, when not nil
	queue time.Duration
	read  time.Duration // timeouts.upstream_read for base's answers; h1Client bounds its own
}

// errQueueFull marks a request that waited too long for a free connection.
var errQueueFull = errors.New("edge: no free upstream connection")

func (t *upstreamTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	st := stateOf(req)
	pool := st.route.pool
	var tried [8]*target
	ntried := 0
	retryable := req.Body == nil || req.Body == http.NoBody
	rt := t.base
	var conn *atomic.Pointer[limitedConn]
	if t.fast != nil && fastPath(req) {
		rt = t.fast
	} else {
		// The connection under the answer, which a stream takes out of
		// limits.upstream_conns' count.
		conn = new(atomic.Pointer[limitedConn])
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(i httptrace.GotConnInfo) {
				if lc, ok := i.Conn.(*limitedConn); ok {
					conn.Store(lc)
				}
			}}))
	}
	upgrade := req.Header["Upgrade"] != nil // only websockets' are forwarded
	out := req                              // rewrite built it for st.target
	for {
		tg := st.target
		if upgrade && !tg.slots.takeStream() {
			return nil, errStreamsFull
		}
		if err := tg.slots.acquire(req.Context(), st.client, t.queue); err != nil {
			if upgrade {
				tg.slots.giveStream()
			}
			return nil, err
		}
		res, err := rt.RoundTrip(out)
		if err == nil {
			var lc *limitedConn
			if conn != nil {
				lc = conn.Load()
			}
			return t.hold(res, tg.slots, st.client, lc, upgrade)
		}
		tg.slots.release(st.client)
		if upgrade {
			tg.slots.giveStream()
		}
		if !isDialError(err) {
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
		st.target = next
		out = new(http.Request)
		*out = *req
		out.URL = upstreamURL(next.url, st.inURL)
	}
}

// hold settles what an answer holds until it ends. A stream — a protocol
// switch (websockets, which took a stream before it was sent: ticket) or
// server-sent events — gives its slot back at once and holds one of the
// address's streams, or, when they are all open, is refused (503); its
// connection is not counted among limits.upstream_conns meanwhile. Any
// other answer holds its slot until its body is closed (ReverseProxy
// closes it after copying, or on the client's reset), unless it turns out
// a long poll (connSlots.settle).
func (t *upstreamTransport) hold(res *http.Response, slots *connSlots, client netip.Addr, lc *limitedConn, ticket bool) (*http.Response, error) {
	b := &upstreamBody{ReadCloser: res.Body, slots: slots, client: client, conn: lc}
	rwc, switched := res.Body.(io.ReadWriteCloser)
	switched = switched && res.StatusCode == http.StatusSwitchingProtocols
	stream := switched || eventStream(res.Header.Get("Content-Type"))
	if ticket && !switched {
		slots.giveStream() // not switched: an answer as any other
		ticket = false
	}
	if stream && !ticket && !slots.takeStream() {
		_ = res.Body.Close()
		slots.release(client)
		return nil, errStreamsFull
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
	slots.release(client)
	if switched {
		res.Body = &upstreamRWC{upstreamBody: b, rwc: rwc}
		return res, nil
	}
	res.Body = b
	return res, nil
}

// upstreamBody is an upstream answer's body, which holds a connection slot
// (bodySlot) or one of the address's streams (bodyStream) until it is
// closed. An ordinary answer of http.Transport's waits at most read
// (timeouts.upstream_read) for each read; h1Client bounds its own.
type upstreamBody struct {
	io.ReadCloser
	slots     *connSlots
	client    netip.Addr
	conn      *limitedConn // the connection under the answer, if counted by connLimit
	read      time.Duration
	timer     *time.Timer // closes the body when a read waits past read
	timedOut  atomic.Bool
	readSince atomic.Int64              // when the read under way began (UnixNano); 0: none
	spill     atomic.Pointer[spillBody] // the read-ahead that wraps this body, if any

	mu    sync.Mutex
	state int8
}

const (
	bodySlot = iota + 1
	bodyStream
	bodyDone
)

// errUpstreamRead is an answer whose upstream sent nothing for
// timeouts.upstream_read.
var errUpstreamRead = errors.New("edge: upstream answer quiet past timeouts.upstream_read")

func (b *upstreamBody) Read(p []byte) (int, error) {
	b.readSince.Store(time.Now().UnixNano())
	if b.timer != nil {
		b.timer.Reset(b.read)
	}
	n, err := b.ReadCloser.Read(p)
	if b.timer != nil {
		b.timer.Stop()
		if b.timedOut.Load() {
			err = errUpstreamRead
		}
	}
	b.readSince.Store(0)
	return n, err
}

// timeout ends a read that waited past read.
func (b *upstreamBody) timeout() {
	b.timedOut.Store(true)
	_ = b.ReadCloser.Close()
}

// holdsSlot reports whether the answer holds a slot, not a stream.
func (b *upstreamBody) holdsSlot() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state == bodySlot
}

// toStream makes an answer holding a slot a stream, if one of the
// address's streams is free: it gives its slot to a waiting request.
func (b *upstreamBody) toStream() bool {
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
	b.slots.release(b.client)
	return true
}

func (b *upstreamBody) Close() error {
	err := b.ReadCloser.Close()
	if b.timer != nil {
		b.timer.Stop()
	}
	b.end()
	return err
}

// end gives back the slot or the stream the answer held.
func (b *upstreamBody) end() {
	b.mu.Lock()
	state := b.state
	b.state = bodyDone
	b.mu.Unlock()
	switch state {
	case bodySlot:
		b.slots.untrack(b)
		b.slots.release(b.client)
	case bodyStream:
		b.slots.giveStream()
		if b.conn != nil {
			b.conn.recount() // kept by the client for another exchange: counted again
		}
	}
}

// upstreamRWC is the tunnel of a protocol switch (a websocket), a stream.
type upstreamRWC struct {
	*upstreamBody
	rwc io.ReadWriteCloser
}

func (b *upstreamRWC) Write(p []byte) (int, error) { return b.rwc.Write(p) }

// clientBody remembers why reading the client's request body failed, so
// that a broken upload is answered as the client's error, not the
// upstream's.
type clientBody struct {
	io.ReadCloser
	st *reqState

	in, out *http.Request // the trailer of in, read at the body's end, goes in out's
}

func (b *clientBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		forwardTrailer(b.out, b.in)
	}
	if err != nil && err != io.EOF && b.st.clientErr == nil {
		b.st.clientErr = err
	}
	return n, err
}

// securityHeaders adds the site's optional defaults where none is set.
func securityHeaders(site *site, h http.Header) {
	if !site.security {
		return
	}
	if _, ok := h["X-Content-Type-Options"]; !ok {
		h["X-Content-Type-Options"] = []string{"nosniff"}
	}
	if _, ok := h["Referrer-Policy"]; !ok {
		h["Referrer-Policy"] = []string{"strict-origin-when-cross-origin"}
	}
}

// upstreamResponse marks the address healthy and applies the response
// rules.
func (h *Handler) upstreamResponse(res *http.Response) error {
	st := stateOf(res.Request)
	st.route.pool.ok(st.target)
	hdr := res.Header
	securityHeaders(st.site, hdr)
	for i := range st.route.respOps {
		st.route.respOps[i].apply(hdr)
	}
	h.env.metrics.upstream.WithLabelValues(st.site.name).Observe(sinceSeconds(st.start))
	ub, _ := res.Body.(*upstreamBody)
	if h.cfg.Limits.SpillTotal >= 0 && ub != nil && ub.holdsSlot() && res.ContentLength != 0 {
		m := h.env.metrics.limited
		sb := newSpillBody(res.Body, h.cfg.Limits.SpillBytes, h.env.spill, st.target.slots,
			func() { m.WithLabelValues("spill_full").Inc() },
			func() {
				m.WithLabelValues("slow_client_cut").Inc()
				if dw := st.rec.dw; dw != nil {
					_ = dw.SetWriteDeadline(time.Now()) // and end the write it is stuck in
				}
			})
		if h.env.hooks.spillAfter > 0 {
			sb.after = h.env.hooks.spillAfter
		}
		ub.spill.Store(sb)
		res.Body = sb
		st.rec.spill = sb
	}
	return nil
}

// upstreamError answers a failed exchange: the client's fault (a broken or
// oversized body: 400 or 413; gone: 499, nothing written) or the upstream's
// (502, 504, or 503 when every connection stayed busy).
func (h *Handler) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	st := stateOf(r)
	st.upstreamErr = err
	var mbe *http.MaxBytesError
	switch {
	case errors.As(st.clientErr, &mbe) || errors.As(err, &mbe):
		st.clientErr = err
		h.clientError(w, r, st, http.StatusRequestEntityTooLarge, reasonBodyTooLarge)
		return
	case errors.Is(st.clientErr, errBodyTooSlow):
		h.clientError(w, r, st, http.StatusRequestTimeout, reasonBodyTooSlow)
		return
	case r.Context().Err() != nil || errors.Is(err, context.Canceled) || clientLeft(st.clientErr):
		st.status = 499 // the client went away; nobody reads the answer
		st.clientErr, st.reason = errClientGone, reasonClientGone
		h.env.metrics.clientErrors.WithLabelValues(st.siteName(), reasonClientGone).Inc()
		if r.Context().Value(http.ServerContextKey) != nil {
			panic(http.ErrAbortHandler) // no answer at all: net/http would send an empty 200
		}
		return
	case st.clientErr != nil:
		h.clientError(w, r, st, http.StatusBadRequest, reasonBadRequestBody)
		return
	}
	status, reason := http.StatusBadGateway, reasonUpstreamError
	switch {
	case errors.Is(err, errQueueFull):
		status, reason = http.StatusServiceUnavailable, reasonUpstreamBusy
		w.Header().Set("Retry-After", "5")
	case errors.Is(err, errStreamsFull):
		status, reason = http.StatusServiceUnavailable, reasonUpstreamStreams
		w.Header().Set("Retry-After", "5")
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		status, reason = http.StatusGatewayTimeout, reasonUpstreamTimeout
	case isDialError(err):
		reason = reasonUpstreamUnreachable
	}
	upstream := ""
	if st.target != nil {
		upstream = st.target.url.Host
	}
	h.env.Log.LogAttrs(r.Context(), slog.LevelWarn, "upstream_failed", slog.String("request_id", st.id),
		slog.String("upstream", upstream), slog.String("reason", reason), slog.String("error", err.Error()))
	h.errorPage(w, r, status, reason)
}

// clientError answers a request the client spoiled; it is counted as the
// client's, not the upstream's.
func (h *Handler) clientError(w http.ResponseWriter, r *http.Request, st *reqState, status int, reason string) {
	h.env.metrics.clientErrors.WithLabelValues(st.siteName(), reason).Inc()
	if r.ProtoMajor == 1 {
		w.Header().Set("Connection", "close") // what is left of the body is not read
	}
	plainError(w, st, status, reason)
}

// clientLeft reports whether reading the client's body failed because the
// client went away (a truncated body, a closed or reset connection) rather
// than because it sent something malformed.
func clientLeft(err error) bool {
	if err == nil {
		return false
	}
	var ne net.Error
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) || errors.As(err, &ne)
}

func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

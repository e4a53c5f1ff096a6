package edge

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"time"

	"github.com/maatproxy/maat/edge/config"
	"github.com/maatproxy/maat/edge/internal/spill"
	"github.com/maatproxy/maat/edge/internal/upstream"
	"github.com/maatproxy/maat/static"
)

// upstreamOptions are the bounds of the upstream transport in cfg.
func upstreamOptions(cfg *config.Config) upstream.Options {
	return upstream.Options{
		Conns:          cfg.Limits.UpstreamConns,
		AddrConns:      cfg.UpstreamConns(),
		QueueLen:       cfg.Limits.UpstreamQueueLen,
		Streams:        cfg.Limits.UpstreamStreams,
		Queue:          cfg.Limits.UpstreamQueue.D(),
		ConnectTimeout: cfg.Timeouts.UpstreamDial.D(),
		HeaderTimeout:  cfg.Timeouts.UpstreamHeader.D(),
		ReadTimeout:    cfg.Timeouts.UpstreamRead.D(),
		FailPause:      cfg.Timeouts.FailPause.D(),
		UnixSocket:     config.UnixSocket,
	}
}

// newUpstream builds the Handler's upstream transport: its bounds, the TLS
// of its https:// addresses, and the read-ahead of answers for slow
// clients (unless limits.spill_total is negative).
func (h *Handler) newUpstream() (*upstream.Transport, error) {
	cfg := &h.cfg
	o := upstreamOptions(cfg)
	o.StreamQuiet = h.env.hooks.streamQuiet // zero in production: upstream's own
	var err error
	if o.TLS, err = upstreamTLSConfigs(cfg); err != nil {
		return nil, err
	}
	if cfg.Limits.SpillTotal >= 0 {
		m := h.env.metrics.limited
		o.Spill = &spill.Options{Max: cfg.Limits.SpillBytes, Budget: h.env.spill, After: h.env.hooks.spillAfter,
			OnFull: func() { m.WithLabelValues("spill_full").Inc() }}
	}
	return upstream.New(o), nil
}

// newReverseProxy returns the proxy for all sites of the Handler: the route
// travels in the request's context (upstream.Route), chosen before
// ServeHTTP; rewrite picks the first address, the transport the next ones.
func (h *Handler) newReverseProxy(up *upstream.Transport, bufs *upstream.BufferPool) *httputil.ReverseProxy {
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
// address changes only the URL's host (upstream.Transport).
func (h *Handler) rewrite(pr *httputil.ProxyRequest) {
	st := stateOf(pr.In)
	pr.Out.URL = st.up.Pick(pr.In.URL, st.start)
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
		strconv.Itoa(st.weight), st.action, helloJA4(st))
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

// upstreamResponse applies the response rules, and hands the answer's
// read-ahead, if any, to the response's writer.
func (h *Handler) upstreamResponse(res *http.Response) error {
	st := stateOf(res.Request)
	hdr := res.Header
	securityHeaders(st.site, hdr)
	for i := range st.route.respOps {
		st.route.respOps[i].apply(hdr)
	}
	h.env.metrics.upstream.WithLabelValues(st.site.name).Observe(sinceSeconds(st.start))
	if sb, ok := res.Body.(*spill.Body); ok {
		st.rec.spill = sb // a write that blocks for sb.After() drains it ahead of the client
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
	case errors.Is(err, upstream.ErrQueueFull):
		status, reason = http.StatusServiceUnavailable, reasonUpstreamBusy
		w.Header().Set("Retry-After", "5")
	case errors.Is(err, upstream.ErrQueueShare):
		status, reason = http.StatusServiceUnavailable, reasonUpstreamQueueShare
		w.Header().Set("Retry-After", "5")
	case errors.Is(err, upstream.ErrStreamsFull):
		status, reason = http.StatusServiceUnavailable, reasonUpstreamStreams
		w.Header().Set("Retry-After", "5")
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		status, reason = http.StatusGatewayTimeout, reasonUpstreamTimeout
	case upstream.IsDialError(err):
		reason = reasonUpstreamUnreachable
	}
	h.env.Log.LogAttrs(r.Context(), slog.LevelWarn, "upstream_failed", slog.String("request_id", st.id),
		slog.String("upstream", config.AddrName(st.up.Addr())), slog.String("reason", reason), slog.String("error", err.Error()))
	h.errorPage(w, r, status, reason)
}

// cutSlowClient ends the write a client is stuck in when its answer's
// read-ahead was cut: half the address's connections were held by slow
// clients already (spill).
func (h *Handler) cutSlowClient(st *reqState) {
	h.env.metrics.limited.WithLabelValues("slow_client_cut").Inc()
	if dw := st.rec.dw; dw != nil {
		_ = dw.SetWriteDeadline(time.Now())
	}
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

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// helloJA4 is FoxIO's JA4 of the connection's own ClientHello, as the
// fingerprint log writes it (st.ja4 is the session's, for decisions).
func helloJA4(st *reqState) string {
	if st.tls == nil {
		return ""
	}
	return st.tls.JA4
}

package edge

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"time"
)

// newTransport returns the upstream transport: pooled connections sized for
// a proxy's concurrency (Go's default of 2 idle connections per host costs a
// third of the throughput), plain HTTP/1.1, no transparent decompression.
func newTransport(t Timeouts) *http.Transport {
	d := &net.Dialer{Timeout: t.UpstreamDial.D(), KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy:                  nil, // never an environment proxy between the edge and its upstream
		DialContext:            d.DialContext,
		MaxIdleConns:           4096,
		MaxIdleConnsPerHost:    1024,
		IdleConnTimeout:        90 * time.Second,
		ResponseHeaderTimeout:  t.UpstreamHeader.D(),
		ExpectContinueTimeout:  time.Second,
		DisableCompression:     true,
		MaxResponseHeaderBytes: 1 << 20,
		WriteBufferSize:        32 << 10,
		ReadBufferSize:         32 << 10,
	}
}

// newReverseProxy returns the proxy for all sites: the route and address
// travel in the request's state, chosen before ServeHTTP.
func (s *Server) newReverseProxy(tr http.RoundTripper) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Transport:      tr,
		Rewrite:        s.rewrite,
		ErrorHandler:   s.upstreamError,
		ModifyResponse: s.upstreamResponse,
		BufferPool:     newBufferPool(),
		ErrorLog:       nil,
	}
}

// rewrite builds the upstream request (DESIGN.md "Headers to the upstream").
func (s *Server) rewrite(pr *httputil.ProxyRequest) {
	st := stateOf(pr.In)
	pr.SetURL(st.target.url) // joins an upstream's base path with the request's, escaping kept
	pr.Out.Host = pr.In.Host // the upstream sees the site's name, as behind Caddy
	h := pr.Out.Header
	for k := range h { // every client-sent X-Maat-* goes, whatever its case
		if len(k) >= 7 && strings.EqualFold(k[:7], "X-Maat-") {
			delete(h, k)
		}
	}
	// X-Forwarded-For: the client's own values are kept only when they came
	// through a trusted proxy; ReverseProxy's Rewrite already removed them.
	peer := st.peer.String()
	if st.peerTrusted {
		if prior := pr.In.Header.Values("X-Forwarded-For"); len(prior) > 0 {
			peer = strings.Join(prior, ", ") + ", " + peer
		}
	}
	h["X-Forwarded-For"] = []string{peer}
	h["X-Forwarded-Proto"] = []string{"https"}
	h["X-Forwarded-Host"] = []string{pr.In.Host}
	h["X-Real-Ip"] = []string{st.client.String()}
	if st.ja4 != "" {
		h["X-Maat-Ja4"] = []string{st.ja4}
	}
	h["X-Maat-Weight"] = []string{strconv.Itoa(st.weight)}
	h["X-Maat-Action"] = []string{st.action}
	if st.demo {
		demoHeaders(h, pr.In, st)
	}
	for i := range st.route.reqOps {
		st.route.reqOps[i].apply(h)
	}
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

// upstreamResponse marks the address healthy.
func (s *Server) upstreamResponse(res *http.Response) error {
	st := stateOf(res.Request)
	st.route.pool.ok(st.target)
	h := res.Header
	securityHeaders(st.site, h)
	for i := range st.route.respOps {
		st.route.respOps[i].apply(h)
	}
	s.metrics.upstream.WithLabelValues(st.site.name).Observe(sinceSeconds(st.start))
	return nil
}

// upstreamError handles a failed upstream exchange: a connection that could
// not be made is retried on the next address (the request was not sent, so
// retrying is safe for any method without a body); otherwise a 502 or 504.
func (s *Server) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	st := stateOf(r)
	now := time.Now()
	if isDialError(err) {
		st.route.pool.fail(st.target, now)
		if st.tries < len(st.route.pool.targets) && (r.Body == nil || r.Body == http.NoBody) {
			if st.tried == nil {
				st.tried = map[*target]bool{}
			}
			st.tried[st.target] = true
			if t := st.route.pool.pick(now, st.tried); t != nil && !st.tried[t] {
				st.target = t
				st.tries++
				s.proxy.ServeHTTP(w, r)
				return
			}
		}
	}
	status := http.StatusBadGateway
	reason := "upstream_unreachable"
	switch {
	case errors.Is(err, context.Canceled):
		// The client went away; nobody reads the answer.
		st.status = 499
		st.upstreamErr = err
		return
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		status, reason = http.StatusGatewayTimeout, "upstream_timeout"
	case !isDialError(err):
		reason = "upstream_error"
	}
	st.upstreamErr = err
	s.log.LogAttrs(r.Context(), slog.LevelWarn, "upstream_failed", slog.String("request_id", st.id),
		slog.String("upstream", st.target.url.Host), slog.String("reason", reason), slog.String("error", err.Error()))
	s.errorPage(w, r, status, reason)
}

func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

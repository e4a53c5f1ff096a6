package edge

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/maatproxy/maat/edge/internal/upstream"
)

// Divert targets (DESIGN.md, "Policy": DIVERT): a DIVERT rule sends the
// request, unseen by the client, to another upstream — a tarpit such as
// iocaine or Nepenthes that feeds scrapers garbage — instead of the site's.
// Each target is bounded so that it costs the edge little whatever a
// scraper does: concurrent requests, bytes and time per request, and its
// own connection pool, never the site's.

// Defaults of a divert: target.
const (
	defaultDivertConcurrent = 32
	defaultDivertBytes      = 1 << 20
	defaultDivertDuration   = 60 * time.Second
)

// diverter proxies to one divert target.
type diverter struct {
	name        string
	upstreams   []*url.URL // taken in turn
	next        atomic.Uint32
	proxy       *httputil.ReverseProxy
	transport   *http.Transport
	slots       chan struct{}
	maxBytes    int64
	maxDuration time.Duration
}

// newDiverters builds the Handler's divert targets.
func (h *Handler) newDiverters() map[string]*diverter {
	out := make(map[string]*diverter, len(h.cfg.Divert))
	for name, t := range h.cfg.Divert {
		d := &diverter{
			name:        name,
			upstreams:   t.Upstream,
			maxBytes:    orInt64(t.MaxBytes, defaultDivertBytes),
			maxDuration: orDuration(t.MaxDuration.D(), defaultDivertDuration),
		}
		n := orInt(t.MaxConcurrent, defaultDivertConcurrent)
		d.slots = make(chan struct{}, n)
		dialer := &net.Dialer{Timeout: h.cfg.Timeouts.UpstreamDial.D()}
		d.transport = &http.Transport{
			Proxy:                 nil,
			DialContext:           dialer.DialContext,
			MaxIdleConnsPerHost:   n,
			MaxConnsPerHost:       n,
			IdleConnTimeout:       30 * time.Second,
			ResponseHeaderTimeout: d.maxDuration,
			DisableCompression:    true,
		}
		d.proxy = &httputil.ReverseProxy{
			Transport: d.transport,
			Rewrite: func(pr *httputil.ProxyRequest) {
				st := stateOf(pr.In)
				u := d.upstreams[(d.next.Add(1)-1)%uint32(len(d.upstreams))]
				pr.Out.URL = upstream.JoinURL(u, pr.In.URL)
				pr.Out.Host = pr.In.Host // the site's name: a tarpit answers as the site
				pr.Out.Header = divertHeader(pr.Out.Header, st.client.String())
			},
			ModifyResponse: func(res *http.Response) error {
				res.Body = &limitedBody{Reader: io.LimitReader(res.Body, d.maxBytes), Closer: res.Body}
				res.Header.Del("Content-Length") // the body may be cut
				res.ContentLength = -1
				return nil
			},
			ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
				st := stateOf(r)
				st.upstreamErr = err
				if errors.Is(r.Context().Err(), context.Canceled) {
					st.status = 499 // the client went away
					return
				}
				// The tarpit is down, or did not answer within max_duration
				// (its connections all busy): a plain deny, not an empty 200.
				h.policyFor(st.site).challenger.Deny(w, r, st.id, "policy")
			},
			BufferPool: upstream.NewBufferPool(),
			// A cut at max_bytes or max_duration is the bound working,
			// not news: debug, in the edge's log, not the process's.
			ErrorLog: slog.NewLogLogger(h.env.Log.Handler(), slog.LevelDebug),
		}
		out[name] = d
	}
	return out
}

// divertHeaders are the request fields a tarpit is given: what it needs to
// answer as a site would (what the client takes, in which language and
// coding; a body's type and length), and nothing a tarpit should hold —
// no cookie, credential, X-Maat-* field, or forwarding chain of proxies
// behind the edge — since a tarpit is another program, often another
// operator's.
var divertHeaders = [...]string{"User-Agent", "Accept", "Accept-Language", "Accept-Encoding", "Content-Type", "Content-Length", "Referer"}

// divertHeader returns the fields of h a tarpit is given, and the client's
// address as X-Forwarded-For and X-Real-Ip (tarpits key their garbage by
// it).
func divertHeader(h http.Header, client string) http.Header {
	out := make(http.Header, len(divertHeaders)+2)
	for _, k := range divertHeaders {
		if v, ok := h[k]; ok {
			out[k] = v
		}
	}
	out["X-Forwarded-For"] = []string{client}
	out["X-Real-Ip"] = []string{client}
	return out
}

// divert proxies r to the divert target name, within its bounds; when the
// target is full (or unknown, after a reload removed it) the request is
// denied instead.
func (h *Handler) divert(w http.ResponseWriter, r *http.Request, st *reqState, name string) {
	d := h.diverts[name]
	if d == nil {
		h.policyFor(st.site).challenger.Deny(w, r, st.id, "policy")
		return
	}
	select {
	case d.slots <- struct{}{}:
	default:
		h.env.metrics.limited.WithLabelValues("divert_busy").Inc()
		h.policyFor(st.site).challenger.Deny(w, r, st.id, "policy")
		return
	}
	defer func() { <-d.slots }()
	h.env.metrics.diverted.WithLabelValues(name).Inc()
	ctx, cancel := context.WithTimeout(r.Context(), d.maxDuration)
	defer cancel()
	d.proxy.ServeHTTP(w, r.WithContext(ctx))
}

// limitedBody is a response body cut at a size.
type limitedBody struct {
	io.Reader
	io.Closer
}

func orInt(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

func orInt64(v, def int64) int64 {
	if v == 0 {
		return def
	}
	return v
}

func orDuration(v, def time.Duration) time.Duration {
	if v == 0 {
		return def
	}
	return v
}

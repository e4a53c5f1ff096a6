package upstream

import (
	"context"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"
)

// Route is what the Transport needs to know of one request: the addresses
// to try and whom the request counts for. The caller sets it on the
// request's context (WithRoute) before the exchange and calls Pick for the
// first address; the Transport records on it the address of each try.
// A Route belongs to one request: it is not safe for concurrent use.
type Route struct {
	// Pool holds the addresses to try.
	Pool *Pool
	// Client is whom the request counts for in the slots' fair share: a
	// client's requests wait behind its own. The edge gives one key per
	// client address (an IPv6 client's /64).
	Client netip.Addr
	// Cluster, if not empty, is whom the request counts for instead of
	// Client: the edge's client cluster (a pass's holder, a TLS and HTTP/2
	// stack in a network), whose requests share one turn and one share of
	// the line.
	Cluster string
	// Priority requests (pass holders, crawlers the policy allows) are
	// given a freed slot before any other.
	Priority bool
	// Info, when not nil, receives the 1xx answers (103 Early Hints) the
	// Transport's own client reads while it waits for the final answer;
	// otherwise they go to the request's httptrace.ClientTrace, as
	// http.Transport's do.
	Info http.ResponseWriter
	// OnCut, when not nil, is called when the answer, read ahead of a
	// client that fell behind, is cut (spill.Options.OnCut): the caller
	// ends the write its client is stuck in.
	OnCut func()

	target *target  // the address of the current try
	in     *url.URL // the inbound request's URL, joined to each address's
}

type routeKey struct{}

// WithRoute returns ctx carrying r, for the Transport.
func WithRoute(ctx context.Context, r *Route) context.Context {
	return context.WithValue(ctx, routeKey{}, r)
}

// RouteFrom returns the Route ctx carries, or nil.
func RouteFrom(ctx context.Context) *Route {
	r, _ := ctx.Value(routeKey{}).(*Route)
	return r
}

// flow is whom the request counts for in the slots' line.
func (r *Route) flow() flow {
	if r.Cluster != "" {
		return flow{cluster: r.Cluster}
	}
	return flow{client: r.Client}
}

// Pick chooses the address of the first try, as of now, and returns the
// URL of the inbound request's URL in at that address (JoinURL). A retry on
// another address, when one cannot be reached, joins the same in.
func (r *Route) Pick(in *url.URL, now time.Time) *url.URL {
	r.in = in
	r.target = r.Pool.pick(now, nil)
	return JoinURL(r.target.url, in)
}

// Addr is the host:port of the address tried last, or "" before Pick.
func (r *Route) Addr() string {
	if r.target == nil {
		return ""
	}
	return r.target.url.Host
}

// JoinURL is the URL of the inbound request's URL in at an upstream address
// base: base's path joined with in's path (escaping kept), and in's query
// after base's. It is httputil.ProxyRequest.SetURL's join, written once for
// the first try and for retries on another address.
func JoinURL(base, in *url.URL) *url.URL {
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

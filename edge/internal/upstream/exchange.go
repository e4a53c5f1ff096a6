package upstream

import (
	"mime"
	"net/http"
	"net/textproto"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// The common exchange — a GET, HEAD, OPTIONS or TRACE without a body and
// without a protocol switch, to plain-HTTP addresses — is the one the
// edge proxies without httputil.ReverseProxy, doing what its ServeHTTP
// does for it (RFC 9110, section 7.6.1: Connection and the hop-by-hop
// fields; trailers; 1xx; flushing of streamed answers) without its clones,
// its client trace and its copies of the header maps; the Transport hands
// it to its own client (h1Client). This file holds the protocol half of
// that: which requests are common, the upstream request's header, the
// hop-by-hop fields of the answer and the 1xx answers on the way.

// Common reports whether r is a common exchange to p's addresses.
func Common(r *http.Request, p *Pool) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
	default:
		return false
	}
	return p.plain && r.ContentLength == 0 && r.Header["Upgrade"] == nil
}

// hopHeaders are the fields that concern one connection only, as
// httputil.ReverseProxy removes them (RFC 9110, section 7.6.1; RFC 9112,
// section 9.6; Keep-Alive and Proxy-Connection from older practice).
var hopHeaders = [...]string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func isHopHeader(k string) bool {
	for _, h := range hopHeaders {
		if len(k) == len(h) && strings.EqualFold(k, h) {
			return true
		}
	}
	return false
}

// RemoveHopHeaders deletes from h the fields its Connection fields name,
// and the hop-by-hop fields.
func RemoveHopHeaders(h http.Header) {
	deleteNamed(h, h["Connection"])
	for _, k := range hopHeaders {
		delete(h, k)
	}
}

// deleteNamed deletes from h the fields that Connection values name.
func deleteNamed(h http.Header, connection []string) {
	for _, f := range connection {
		for f != "" {
			var name string
			name, f, _ = strings.Cut(f, ",")
			if name = textproto.TrimString(name); name != "" && !isHopHeader(name) {
				delete(h, http.CanonicalHeaderKey(name))
			}
		}
	}
}

// CommonRequest makes out the upstream request of the common exchange in,
// as httputil.ReverseProxy makes its outgoing request before its Rewrite:
// in's method, URL and context (shared: the rewrite replaces the URL), no
// body, and in's header without the hop-by-hop fields, those Connection
// names, and the forwarding ones (Forwarded, X-Forwarded-For, -Host,
// -Proto), which the rewrite sets anew; "Te: trailers" when the client
// takes trailers (ReverseProxy's issue 21096). The header's values are
// in's slices, each full: whoever adds a value copies.
func CommonRequest(out, in *http.Request) {
	*out = *in
	out.Body, out.ContentLength, out.Close, out.RequestURI = nil, 0, false, ""
	out.TransferEncoding, out.Trailer, out.GetBody = nil, nil, nil
	hdr := make(http.Header, len(in.Header)+10)
	for k, vs := range in.Header {
		switch {
		case isHopHeader(k):
		case k == "Forwarded" || k == "X-Forwarded-For" || k == "X-Forwarded-Host" || k == "X-Forwarded-Proto":
			// what the client said is replaced (the rewrite keeps a trusted proxy's)
		default:
			hdr[k] = vs[:len(vs):len(vs)] // shared, and full: whoever adds a value copies
		}
	}
	deleteNamed(hdr, in.Header["Connection"])
	if httpguts.HeaderValuesContainsToken(in.Header["Te"], "trailers") {
		hdr["Te"] = []string{"trailers"}
	}
	out.Header = hdr
}

// EventStream reports whether a Content-Type is text/event-stream (HTML,
// "Server-sent events"), without allocating for the common other types.
func EventStream(ct string) bool {
	if len(ct) < len("text/event-stream") || !strings.EqualFold(ct[:len("text/event-stream")], "text/event-stream") {
		return false
	}
	base, _, _ := mime.ParseMediaType(ct)
	return base == "text/event-stream"
}

// infoResponse passes a 1xx answer (103 Early Hints) to the Route's Info
// writer, as ReverseProxy's client trace does for the other exchanges; it
// reports false when the Route has none.
func infoResponse(req *http.Request, code int, hdr textproto.MIMEHeader) bool {
	r := RouteFrom(req.Context())
	if r == nil || r.Info == nil {
		return false
	}
	dst := r.Info.Header()
	saved := make(http.Header, len(dst))
	for k, vs := range dst {
		saved[k] = vs
	}
	for k, vs := range hdr {
		dst[k] = append(dst[k], vs...)
	}
	r.Info.WriteHeader(code)
	clear(dst)
	for k, vs := range saved { // what the edge set before (HSTS, Alt-Svc) goes with the final answer
		dst[k] = vs
	}
	return true
}

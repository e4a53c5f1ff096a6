package edge

import (
	"errors"
	"io"
	"mime"
	"net/http"
	"net/http/httputil"
	"net/textproto"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// The common exchange — a GET, HEAD, OPTIONS or TRACE without a body and
// without a protocol switch, to plain-HTTP addresses — is proxied by
// proxyCommon, which does what httputil.ReverseProxy.ServeHTTP does for it
// (RFC 9110, section 7.6.1: Connection and the hop-by-hop fields; trailers;
// 1xx; flushing of streamed answers) without its clones, its client trace
// and its copies of the header maps, and hands the request to the edge's
// own client (h1Client). Every other request goes through ReverseProxy.

// commonExchange reports whether r is one proxyCommon takes.
func commonExchange(r *http.Request, p *pool) bool {
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

// removeConnectionHeaders deletes from h the fields its Connection fields
// name, and the hop-by-hop fields.
func removeConnectionHeaders(h http.Header) {
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

// proxyCommon proxies a common exchange.
func (h *Handler) proxyCommon(w http.ResponseWriter, r *http.Request, st *reqState) {
	out := &st.out
	*out = *r // shares the context (and the request's state) and the URL, replaced by rewrite
	out.Body, out.ContentLength, out.Close, out.RequestURI = nil, 0, false, ""
	out.TransferEncoding, out.Trailer, out.GetBody = nil, nil, nil
	hdr := make(http.Header, len(r.Header)+10)
	for k, vs := range r.Header {
		switch {
		case isHopHeader(k):
		case k == "Forwarded" || k == "X-Forwarded-For" || k == "X-Forwarded-Host" || k == "X-Forwarded-Proto":
			// what the client said is replaced (rewrite keeps a trusted proxy's)
		default:
			hdr[k] = vs[:len(vs):len(vs)] // shared, and full: whoever adds a value copies
		}
	}
	deleteNamed(hdr, r.Header["Connection"])
	if httpguts.HeaderValuesContainsToken(r.Header["Te"], "trailers") {
		hdr["Te"] = []string{"trailers"} // the client takes trailers: say so (ReverseProxy's issue 21096)
	}
	out.Header = hdr
	pr := httputil.ProxyRequest{In: r, Out: out}
	h.rewrite(&pr)

	st.info = w
	res, err := h.upstream.RoundTrip(out)
	st.info = nil
	if err != nil {
		h.upstreamError(w, out, err)
		return
	}
	removeConnectionHeaders(res.Header)
	_ = h.upstreamResponse(res) // never fails
	dst := w.Header()
	for k, vs := range res.Header {
		if prior, ok := dst[k]; ok {
			dst[k] = append(prior, vs...)
		} else {
			dst[k] = vs // the answer's header is the edge's own: no copy
		}
	}
	announced := len(res.Trailer)
	if announced > 0 {
		keys := make([]string, 0, announced)
		for k := range res.Trailer {
			keys = append(keys, k)
		}
		dst["Trailer"] = []string{strings.Join(keys, ", ")}
	}
	w.WriteHeader(res.StatusCode)
	if r.Method == http.MethodHead && dst["Content-Length"] == nil { // the head as it came: quic-go would add the length of no body
		_ = http.NewResponseController(w).Flush()
	}
	if err := h.copyBody(w, res); err != nil {
		_ = res.Body.Close()
		if r.Context().Value(http.ServerContextKey) == nil {
			return // not under net/http's server (tests): nothing to abort
		}
		panic(http.ErrAbortHandler) // the answer is cut: the client must see it so, as ReverseProxy does
	}
	_ = res.Body.Close()
	if len(res.Trailer) == 0 {
		return
	}
	_ = http.NewResponseController(w).Flush() // chunked, so that the trailers can follow
	for k, vs := range res.Trailer {
		if announced != len(res.Trailer) {
			k = http.TrailerPrefix + k
		}
		dst[k] = append(dst[k], vs...)
	}
}

// copyBody copies the answer's body to the client, flushing after each
// piece when the answer is a stream (server-sent events, or no length
// announced), as ReverseProxy does.
func (h *Handler) copyBody(w http.ResponseWriter, res *http.Response) error {
	if res.Body == http.NoBody {
		return nil
	}
	stream := res.ContentLength < 0 || eventStream(res.Header.Get("Content-Type"))
	buf := h.bufs.Get()
	defer h.bufs.Put(buf)
	for {
		n, rerr := res.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
			if stream {
				if err := http.NewResponseController(w).Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
					return err
				}
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

// eventStream reports whether a Content-Type is text/event-stream (HTML,
// "Server-sent events"), without allocating for the common other types.
func eventStream(ct string) bool {
	if len(ct) < len("text/event-stream") || !strings.EqualFold(ct[:len("text/event-stream")], "text/event-stream") {
		return false
	}
	base, _, _ := mime.ParseMediaType(ct)
	return base == "text/event-stream"
}

// infoResponse passes a 1xx answer (103 Early Hints) to the client of a
// common exchange, as ReverseProxy's client trace does for the others.
func infoResponse(req *http.Request, code int, hdr textproto.MIMEHeader) bool {
	st := stateOf(req)
	if st == nil || st.info == nil {
		return false
	}
	dst := st.info.Header()
	saved := make(http.Header, len(dst))
	for k, vs := range dst {
		saved[k] = vs
	}
	for k, vs := range hdr {
		dst[k] = append(dst[k], vs...)
	}
	st.info.WriteHeader(code)
	clear(dst)
	for k, vs := range saved { // what the edge set before (HSTS, Alt-Svc) goes with the final answer
		dst[k] = vs
	}
	return true
}

package edge

import (
	"errors"
	"io"
	"net/http"
	"net/http/httputil"
	"strings"

	"github.com/maatproxy/maat/edge/internal/upstream"
)

// The common exchange (upstream.Common) — a GET, HEAD, OPTIONS or TRACE
// without a body and without a protocol switch, to plain-HTTP addresses —
// is proxied by proxyCommon, which does what httputil.ReverseProxy.ServeHTTP
// does for it (RFC 9110, section 7.6.1: Connection and the hop-by-hop
// fields; trailers; 1xx; flushing of streamed answers) without its clones,
// its client trace and its copies of the header maps; the upstream
// transport hands it to its own client. Every other request goes through
// ReverseProxy.

// proxyCommon proxies a common exchange.
func (h *Handler) proxyCommon(w http.ResponseWriter, r *http.Request, st *reqState) {
	out := &st.out
	upstream.CommonRequest(out, r) // shares the context (and the request's state) and the URL, replaced by rewrite
	pr := httputil.ProxyRequest{In: r, Out: out}
	h.rewrite(&pr)

	st.up.Info = w // 1xx answers, while it waits
	res, err := h.upstream.RoundTrip(out)
	st.up.Info = nil
	if err != nil {
		h.upstreamError(w, out, err)
		return
	}
	upstream.RemoveHopHeaders(res.Header)
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
	stream := res.ContentLength < 0 || upstream.EventStream(res.Header.Get("Content-Type"))
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

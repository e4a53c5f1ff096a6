package edge

import (
	"errors"
	"net/http"
	"strings"

	"github.com/maatproxy/maat/fplog"
	"github.com/maatproxy/maat/httpfp"
	"github.com/maatproxy/maat/urlpath"
)

// Request hygiene (DESIGN.md, "Request hygiene"): before any route, rule or
// rewrite, methods that only serve to probe or tunnel are refused, a body
// whose length two fields tell is refused, the path is normalized once and
// read as lenient upstreams read it (package urlpath), headers that could
// pass for the edge's own are removed, and only websocket upgrades stay
// upgrades.

// allowedMethods is the Allow field of a 405: the methods the edge
// forwards (RFC 9110, section 15.5.6).
const allowedMethods = "GET, HEAD, POST, PUT, DELETE, PATCH, OPTIONS"

// clean applies the request hygiene to r in place (r is the Handler's own
// shallow copy). It answers and reports false when the request cannot be
// served.
func (h *Handler) clean(w http.ResponseWriter, r *http.Request, st *reqState) bool {
	if refusedMethod(r.Method) {
		st.action = fplog.ActionDeny
		w.Header()["Allow"] = []string{allowedMethods}
		h.clientError(w, r, st, http.StatusMethodNotAllowed, reasonMethodNotAllowed)
		return false
	}
	if ambiguousLength(r, st.http) {
		st.action = fplog.ActionDeny
		h.clientError(w, r, st, http.StatusBadRequest, reasonAmbiguousLength) // with Connection: close
		return false
	}
	if reason := readPath(r, st); reason != "" {
		st.action = fplog.ActionDeny
		plainError(w, st, http.StatusBadRequest, reason)
		return false
	}
	stripLookalikes(r.Header)
	onlyWebsocketUpgrades(r.Header)
	return true
}

// refusedMethod reports whether the edge answers a method 405 on every
// protocol and never forwards it: TRACE (RFC 9110, section 9.3.8) and
// IIS's TRACK echo the request, cookies and the edge's own headers included,
// to whoever can make a browser send one (cross-site tracing); CONNECT
// (section 9.3.6) asks for a tunnel, which an edge in front of a site does
// not open, and RFC 8441's extended CONNECT (websockets over HTTP/2 and
// HTTP/3) is not supported: x/net does not advertise it unless GODEBUG
// http2xconnect=1, and quic-go's HTTP/3 server does, so the handler meets
// it. On HTTP/1.1 the connection is closed after the answer: after a
// CONNECT, httpfp's tap no longer reads the connection's requests.
func refusedMethod(m string) bool {
	switch m {
	case http.MethodTrace, "TRACK", http.MethodConnect:
		return true
	}
	return false
}

// ambiguousLength reports whether an HTTP/1 request's body length is told
// by both Transfer-Encoding and Content-Length, or by Transfer-Encoding in
// HTTP/1.0 (RFC 9112, section 6.3: "ought to be handled as an error").
// net/http reads the body by the chunked coding and drops Content-Length
// from the header (or ignores Transfer-Encoding before HTTP/1.1), so only
// the wire tells: httpfp's tap marks the request (AmbiguousLength). When
// the connection's tap has no capture of the request (it stopped on bytes
// it could not read, or after an Upgrade or CONNECT it could not follow), a
// chunked request is refused as well: nothing shows it carried no
// Content-Length.
// Other codings, or chunked twice, net/http answers itself (501), as nginx
// does; two Content-Length fields that differ, it answers 400.
func ambiguousLength(r *http.Request, fp *httpfp.Fingerprint) bool {
	if r.ProtoMajor != 1 {
		return false // HTTP/2 and HTTP/3 frame bodies themselves
	}
	if fp != nil {
		return fp.AmbiguousLength
	}
	_, tapped := httpfp.FromContext(r.Context()) // every connection the Server serves
	return tapped && len(r.TransferEncoding) > 0
}

// readPath reads r's path once, with package urlpath: its normal form
// replaces it (what is forwarded), and its model (the place the most
// lenient common upstream reads) goes to st.model, for every rule that
// guards a place. It returns the reason of a 400, or "".
func readPath(r *http.Request, st *reqState) string {
	u := r.URL
	if u.Path == "*" && r.Method == http.MethodOptions {
		st.model = u.Path
		return ""
	}
	esc := u.EscapedPath()
	p, err := urlpath.Parse(esc)
	switch {
	case errors.Is(err, urlpath.ErrUTF8), errors.Is(err, urlpath.ErrOverlong):
		return reasonBadPathUTF8
	case errors.Is(err, urlpath.ErrAmbiguous):
		return reasonAmbiguousPath
	case err != nil:
		return reasonBadPath
	}
	st.model = p.Model
	if u.RawPath == "" && p.Normal == esc {
		return "" // the common case: already normal, nothing allocated
	}
	u.Path, u.RawPath = p.Decoded, ""
	if u.EscapedPath() != p.Normal {
		u.RawPath = p.Normal
	}
	return ""
}

// stripLookalikes removes the request headers a client may not send
// upstream in any spelling: X-Maat-* (the edge's own), X-Forwarded-*,
// Forwarded and X-Real-IP (rewrite sets the ones it vouches for), in their
// "_" spellings too, which WSGI, Rack, PHP and CGI fold onto the "-" ones.
// The "-" spellings of the forwarding headers are the proxy's to replace
// (rewrite), so that a trusted proxy's X-Forwarded-For still counts.
func stripLookalikes(h http.Header) {
	for k := range h {
		if strings.IndexByte(k, '_') < 0 {
			continue
		}
		if reservedHeader(strings.ReplaceAll(k, "_", "-")) {
			delete(h, k)
		}
	}
}

// reservedHeader reports whether a header name (with "-") is one the edge
// sets or vouches for.
func reservedHeader(k string) bool {
	return hasPrefixFold(k, "X-Maat-") || hasPrefixFold(k, "X-Forwarded-") ||
		strings.EqualFold(k, "X-Real-Ip") || strings.EqualFold(k, "Forwarded")
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// onlyWebsocketUpgrades removes every protocol upgrade but websocket's: h2c
// (RFC 7540, 3.2) would tunnel past the policy, the log and the header
// rules, and HTTP2-Settings goes with it.
func onlyWebsocketUpgrades(h http.Header) {
	delete(h, "Http2-Settings")
	up, ok := h["Upgrade"]
	if !ok {
		return
	}
	if len(up) == 1 && strings.EqualFold(strings.TrimSpace(up[0]), "websocket") {
		return
	}
	delete(h, "Upgrade")
	// Drop "upgrade" (and the now stray HTTP2-Settings) from Connection.
	var keep []string
	for _, v := range h["Connection"] {
		for t := range strings.SplitSeq(v, ",") {
			t = strings.TrimSpace(t)
			if t != "" && !strings.EqualFold(t, "upgrade") && !strings.EqualFold(t, "http2-settings") {
				keep = append(keep, t)
			}
		}
	}
	if len(keep) == 0 {
		delete(h, "Connection")
	} else {
		h["Connection"] = []string{strings.Join(keep, ", ")}
	}
}

package edge

import (
	"net/http"
	"strings"

	"github.com/maatproxy/maat/fplog"
	"github.com/maatproxy/maat/httpfp"
)

// Request hygiene (DESIGN.md, "Request hygiene"): before any route, rule or
// rewrite, methods that only serve to probe or tunnel are refused, a body
// whose length two fields tell is refused, the path is normalized once,
// headers that could pass for the edge's own are removed, and only
// websocket upgrades stay upgrades.

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
	if !normalizeURL(r) {
		st.action = fplog.ActionDeny
		plainError(w, st, http.StatusBadRequest, reasonBadPath)
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

// normalizeURL replaces r's path with its normal form and reports whether
// it has one. The normal form is RFC 3986's: percent-encoded unreserved
// characters decoded (section 2.3), other percent-encodings kept with
// upper-case hex (section 6.2.2.1), dot segments removed (section 5.2.4),
// and repeated slashes merged. A path is refused when it does not start with
// "/", has a bad percent-encoding, holds a backslash or a control
// character, or when decoding its encoded slashes ("%2F") would give it
// empty or dot segments: an application that decodes them would then see
// another path than the one the routes, the policy and basic auth saw.
func normalizeURL(r *http.Request) bool {
	u := r.URL
	if u.Path == "*" && r.Method == http.MethodOptions {
		return true
	}
	esc := u.EscapedPath()
	if u.RawPath == "" && len(esc) > 0 && esc[0] == '/' && isNormal(esc) {
		return true // the common case: already normal, nothing allocated
	}
	norm, ok := normalizePath(esc)
	if !ok {
		return false
	}
	dec, ok := decodedPath(norm)
	if !ok {
		return false
	}
	u.Path, u.RawPath = dec, ""
	if u.EscapedPath() != norm {
		u.RawPath = norm
	}
	return true
}

// normalizePath returns the normal form of an escaped path (see
// normalizeURL), or false.
func normalizePath(p string) (string, bool) {
	if p == "" || p[0] != '/' {
		return "", false
	}
	if isNormal(p) {
		return p, true
	}
	segs := make([]string, 0, strings.Count(p, "/"))
	trailing := false
	for rest := p[1:]; ; {
		seg, tail, more := strings.Cut(rest, "/")
		seg, ok := normalizeSegment(seg)
		if !ok {
			return "", false
		}
		trailing = false
		switch seg {
		case "", ".":
			trailing = !more || seg == "."
		case "..":
			if len(segs) > 0 {
				segs = segs[:len(segs)-1]
			}
			trailing = true
		default:
			segs = append(segs, seg)
		}
		if !more {
			break
		}
		rest = tail
	}
	var b strings.Builder
	b.Grow(len(p))
	for _, s := range segs {
		b.WriteByte('/')
		b.WriteString(s)
	}
	if trailing || len(segs) == 0 {
		b.WriteByte('/')
	}
	return b.String(), true
}

// isNormal reports whether p needs no work: no percent sign, no empty or
// dot segment, nothing refused.
func isNormal(p string) bool {
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '%' || c == '\\' || c < 0x20 || c == 0x7f:
			return false
		case c == '/' && i+1 < len(p):
			switch n := p[i+1]; n {
			case '/':
				return false
			case '.':
				// "/." or "/.." followed by "/" or the end is a dot segment.
				j := i + 2
				if j < len(p) && p[j] == '.' {
					j++
				}
				if j == len(p) || p[j] == '/' {
					return false
				}
			}
		}
	}
	return true
}

// normalizeSegment decodes the unreserved characters of one escaped
// segment and upper-cases the hex of the other escapes.
func normalizeSegment(s string) (string, bool) {
	if strings.IndexByte(s, '%') < 0 {
		for i := 0; i < len(s); i++ {
			if c := s[i]; c == '\\' || c < 0x20 || c == 0x7f {
				return "", false
			}
		}
		return s, true
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' || c < 0x20 || c == 0x7f:
			return "", false
		case c != '%':
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
			return "", false
		}
		d := unhex(s[i+1])<<4 | unhex(s[i+2])
		if isUnreserved(d) {
			b.WriteByte(d)
		} else {
			b.WriteByte('%')
			b.WriteByte(upperHex[d>>4])
			b.WriteByte(upperHex[d&15])
		}
		i += 2
	}
	return b.String(), true
}

// decodedPath decodes a normalized escaped path and refuses it when the
// decoded form holds what normalization removes from escaped ones: an
// empty or dot segment (from "%2F"), a backslash or a control character.
func decodedPath(norm string) (string, bool) {
	var b strings.Builder
	b.Grow(len(norm))
	for i := 0; i < len(norm); i++ {
		c := norm[i]
		if c == '%' {
			c = unhex(norm[i+1])<<4 | unhex(norm[i+2])
			i += 2
		}
		if c == '\\' || c < 0x20 || c == 0x7f {
			return "", false
		}
		b.WriteByte(c)
	}
	d := b.String()
	if strings.Contains(d, "//") || hasDotSegment(d) {
		return "", false
	}
	return d, true
}

func hasDotSegment(p string) bool {
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

const upperHex = "0123456789ABCDEF"

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// isUnreserved: ALPHA / DIGIT / "-" / "." / "_" / "~" (RFC 3986, 2.3).
func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
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

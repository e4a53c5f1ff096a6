package httpfp

import (
	"crypto/sha256"
	"encoding/hex"
	"hash/maphash"
	"net/http"
	"slices"
	"strings"
)

// Proto is the HTTP version a Conn carries.
type Proto uint8

// The protocols a Conn can tap.
const (
	H1 Proto = iota + 1 // HTTP/1.0 and HTTP/1.1
	H2                  // HTTP/2
	H3                  // HTTP/3
)

// String returns "h1", "h2" or "h3", the prefix of an hfp.
func (p Proto) String() string {
	switch p {
	case H1:
		return "h1"
	case H2:
		return "h2"
	case H3:
		return "h3"
	}
	return "h?"
}

// Fingerprint is what a request tells about its client at the HTTP layer.
// It is read-only once a handler has it.
type Fingerprint struct {
	// Names holds the header names in wire order with their original case;
	// for HTTP/2 and HTTP/3 the pseudo-headers too, where they stand.
	Names []string
	// HFP and HFPR are the header fingerprint and its raw form (see the
	// package documentation).
	HFP, HFPR string
	// H2FP is the connection's Akamai HTTP/2 fingerprint; empty unless HTTP/2.
	H2FP string
	// JA4H and JA4HR are set only when Config.JA4H is. JA4HR holds the
	// cookie names and values: never log it.
	JA4H, JA4HR string
	// Ordered is false when the order could not be taken from the wire
	// (HTTP/3 without H3Tracer): Names then follows http.Header's sorted keys.
	Ordered bool
	// AmbiguousLength is set on an HTTP/1 request that carried a
	// Transfer-Encoding field together with a Content-Length field, or in
	// HTTP/1.0 (RFC 9112, section 6.1 and 6.3), whatever their values.
	// net/http reads such a body by one and drops the other from
	// http.Request.Header, so a server cannot tell it from there; a proxy
	// should refuse it (400) and close the connection, as nginx does, for
	// whoever reads the same bytes otherwise (request smuggling).
	AmbiguousLength bool
}

// hashLen is the number of hex digits of a truncated SHA-256 in hfp and JA4H.
const hashLen = 12

// truncHash appends the first 12 hex digits of SHA-256(b) to dst.
func truncHash(dst, b []byte) []byte {
	sum := sha256.Sum256(b)
	return hex.AppendEncode(dst, sum[:hashLen/2])
}

// excludedName reports whether a header name is left out of hfp_r and
// JA4H's header list.
func excludedName(name string) bool {
	switch len(name) {
	case len("cookie"):
		return strings.EqualFold(name, "cookie")
	case len("referer"):
		return strings.EqualFold(name, "referer")
	}
	return false
}

// appendLower appends s lowercased (ASCII only, as header names are).
func appendLower(dst []byte, s string) []byte {
	n := len(dst)
	dst = slices.Grow(dst, len(s))[:n+len(s)]
	b := dst[n:]
	for i := range b {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b[i] = c
	}
	return dst
}

// appendCount appends n as two digits, 99 at most.
func appendCount(dst []byte, n int) []byte {
	n = min(n, 99)
	return append(dst, byte('0'+n/10), byte('0'+n%10))
}

// HFP returns the header fingerprint hfp and its raw form hfp_r of the
// header names in wire order (pseudo-headers included) sent over p.
func HFP(p Proto, names []string) (hfp, hfpr string) {
	var buf [512]byte
	var out [32]byte
	h, r := appendHFP(out[:0], buf[:0], p, names)
	return string(h), string(r)
}

// appendHFP appends hfp to dst and hfp_r to raw.
func appendHFP(dst, raw []byte, p Proto, names []string) (hfp, hfpr []byte) {
	n := 0
	for _, name := range names {
		if excludedName(name) {
			continue
		}
		if n > 0 {
			raw = append(raw, ',')
		}
		raw = appendLower(raw, name)
		n++
	}
	dst = append(dst, p.String()...)
	dst = appendCount(dst, n)
	dst = append(dst, '_')
	dst = truncHash(dst, raw)
	return dst, raw
}

// NewH3Fingerprint builds an unordered fingerprint from a request served
// over HTTP/3 when H3Tracer is not installed: Names are the pseudo-headers
// in a fixed order (:method, :authority, :scheme, :path), then
// http.Header's keys sorted, in canonical case, and Ordered is false.
func NewH3Fingerprint(r *http.Request, cfg Config) *Fingerprint {
	names := []string{":method", ":authority"}
	if r.Method != http.MethodConnect {
		names = append(names, ":scheme", ":path")
	}
	keys := make([]string, 0, len(r.Header))
	for k := range r.Header {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		for range r.Header[k] {
			names = append(names, k)
		}
	}
	fp := &Fingerprint{Names: names}
	fp.HFP, fp.HFPR = HFP(H3, names)
	if cfg.JA4H {
		var j ja4hInput
		j.method, j.version = r.Method, "30"
		j.names = names
		j.cookies = r.Header.Values("Cookie")
		j.lang = r.Header.Get("Accept-Language")
		fp.JA4H, fp.JA4HR = j.compute()
	}
	return fp
}

// fields collects what the fingerprint and the pairing need of a decoded
// HTTP/2 or HTTP/3 field section.
type fields struct {
	names                   []string // reused between sections
	method, authority, path string
	host, lang              string
	cookies                 []string
	langSeen                bool
	sum                     uint64 // of fieldHash over the summed fields
	seed                    maphash.Seed
}

func (f *fields) reset() {
	f.names = f.names[:0]
	f.method, f.authority, f.path, f.host, f.lang = "", "", "", "", ""
	f.cookies, f.langSeen, f.sum = nil, false, 0
}

// add records one field, in wire order.
func (f *fields) add(name, value string, ja4h bool) {
	f.names = append(f.names, name)
	if summed(name) {
		f.sum += fieldHash(f.seed, name, value)
	}
	switch name {
	case ":method":
		f.method = value
	case ":authority":
		f.authority = value
	case ":path":
		f.path = value
	case "host":
		f.host = value
	case "cookie":
		if ja4h {
			f.cookies = append(f.cookies, value)
		}
	case "accept-language":
		if ja4h && !f.langSeen {
			f.lang, f.langSeen = value, true
		}
	}
}

// pending returns the request's fingerprint, keyed as the server will key
// the *http.Request.
func (f *fields) pending(proto Proto, ja4h bool, h2fp string, m *memo) *pending {
	p := &pending{method: f.method, host: f.authority, uri: f.path, sum: f.sum}
	if p.host == "" {
		p.host = f.host
	}
	if p.method == http.MethodConnect {
		p.uri = f.authority
	}
	p.fp.Names, p.fp.HFP, p.fp.HFPR = m.get(proto, f.names)
	p.fp.Ordered, p.fp.H2FP = true, h2fp
	if ja4h {
		version := "20"
		if proto == H3 {
			version = "30"
		}
		j := ja4hInput{method: f.method, version: version, names: p.fp.Names, cookies: f.cookies, lang: f.lang}
		p.fp.JA4H, p.fp.JA4HR = m.ja4h(&j)
	}
	return p
}

// memo remembers the last header list of a connection and its hfp: clients
// repeat theirs, so a request with the same names as the one before costs
// no hash and no allocation for them.
type memo struct {
	names     []string // shared, read-only, by the fingerprints that have it
	joined    string   // the names back to back (HTTP/1)
	ends      []int    // end of each name in joined (HTTP/1)
	hfp, hfpr string
	raw, out  []byte // scratch

	last  ja4hInput // of ja4h, hfp and ja4hr; names shared with names
	ja4hs [2]string
}

// ja4h returns JA4H and its raw form for j, reusing the last ones when j
// is the request before again (same names list, method, version, language
// and cookies).
func (m *memo) ja4h(j *ja4hInput) (string, string) {
	l := &m.last
	if m.ja4hs[0] != "" && len(j.names) == len(l.names) && (len(j.names) == 0 || &j.names[0] == &l.names[0]) &&
		j.method == l.method && j.version == l.version && j.lang == l.lang && slices.Equal(j.cookies, l.cookies) {
		return m.ja4hs[0], m.ja4hs[1]
	}
	h, r := j.compute()
	m.last = ja4hInput{method: j.method, version: j.version, names: j.names, lang: j.lang, cookies: slices.Clone(j.cookies)}
	m.ja4hs = [2]string{h, r}
	return h, r
}

// set computes the hfp of names (which memo keeps) and returns them.
func (m *memo) set(p Proto, names []string) ([]string, string, string) {
	hfp, raw := appendHFP(m.out[:0], m.raw[:0], p, names)
	n := len(hfp)
	buf := append(hfp, raw...)
	both := string(buf) // one allocation for the two
	m.names, m.hfp, m.hfpr = names, both[:n], both[n:]
	m.out, m.raw = buf[:0], raw
	return m.names, m.hfp, m.hfpr
}

// get returns names, or the equal list memo holds, with their hfp.
func (m *memo) get(p Proto, names []string) ([]string, string, string) {
	if m.names != nil && slices.Equal(names, m.names) {
		return m.names, m.hfp, m.hfpr
	}
	return m.set(p, slices.Clone(names))
}

// getJoined is get for names given back to back in joined, each ending at
// ends[i]-base.
func (m *memo) getJoined(p Proto, joined []byte, ends []int, base int) ([]string, string, string) {
	if m.names != nil && string(joined) == m.joined && len(ends) == len(m.ends) {
		same := true
		for i, e := range ends {
			if e-base != m.ends[i] {
				same = false
				break
			}
		}
		if same {
			return m.names, m.hfp, m.hfpr
		}
	}
	m.joined, m.ends = string(joined), m.ends[:0]
	names := make([]string, len(ends))
	start := 0
	for i, end := range ends {
		end -= base
		names[i] = m.joined[start:end]
		m.ends = append(m.ends, end)
		start = end
	}
	return m.set(p, names)
}

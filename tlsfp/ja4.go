package tlsfp

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
)

// Fingerprint describes the ClientHello of one connection. Fields that do
// not apply are empty.
type Fingerprint struct {
	// JA4 is the JA4 fingerprint, e.g. "t13d1516h2_8daaf6152771_e5627efa2ab1".
	JA4 string
	// JA4R is JA4_r: the sorted lists in the clear.
	JA4R string
	// JA4O is JA4_o: JA4 over the lists in wire order, SNI and ALPN included.
	JA4O string
	// JA4RO is JA4_ro: the wire-order lists in the clear.
	JA4RO string

	// TLSVersion is the highest version offered, as written in the
	// fingerprint log: "1.3", "1.2", "1.1", "1.0", "ssl3" or "ssl2"; empty
	// if unknown.
	TLSVersion string
	// SNI is the server name the client asked for; empty if none.
	SNI string
	// ALPN is the first application protocol offered; empty if none.
	ALPN string
	// Resumption reports that the client offered a pre-shared key
	// (RFC 8446 §4.2.11), i.e. it resumes an earlier session.
	Resumption bool
	// QUIC reports a hello carried in QUIC (JA4 prefix "q").
	QUIC bool
	// ECH reports that the client offered encrypted_client_hello (0xfe0d).
	ECH bool
	// GREASE reports that the client sent GREASE cipher suites or extensions.
	GREASE bool
	// Ciphers and Extensions count the cipher suites and extensions offered,
	// GREASE excluded and not capped (JA4 caps them at 99).
	Ciphers, Extensions int

	// Client is the known client this JA4 belongs to; zero if unknown.
	Client Client
}

// hashLen is the length of a JA4 hash part: 12 hex digits of SHA-256.
const hashLen = 12

// Fingerprint computes the JA4 fingerprints of h, for a hello carried in
// QUIC if quic is set, otherwise over TCP.
func (h *Hello) Fingerprint(quic bool) *Fingerprint {
	// Filled on the stack and copied to the heap once at the end.
	fp := Fingerprint{QUIC: quic}

	// The lists without GREASE, in wire order and sorted. Stack buffers
	// cover ordinary hellos; append moves larger ones to the heap.
	var cbuf, csbuf [64]uint16
	var ebuf, esbuf, gbuf [48]uint16
	var l ja4Lists
	l.ciphers = appendNonGREASE(cbuf[:0], h.CipherSuites)
	l.exts = appendNonGREASE(ebuf[:0], h.Extensions)
	l.sigalgs = appendNonGREASE(gbuf[:0], h.SignatureAlgorithms)
	l.sortedCiphers = append(csbuf[:0], l.ciphers...)
	sortUint16s(l.sortedCiphers)
	l.sortedExts = esbuf[:0]
	for _, e := range l.exts {
		switch e {
		case extServerName, extALPN: // already in part a
		case extPreSharedKey:
			fp.Resumption = true
			l.sortedExts = append(l.sortedExts, e)
		case extECH:
			fp.ECH = true
			l.sortedExts = append(l.sortedExts, e)
		default:
			l.sortedExts = append(l.sortedExts, e)
		}
	}
	sortUint16s(l.sortedExts)
	fp.GREASE = len(l.ciphers) < len(h.CipherSuites) || len(l.exts) < len(h.Extensions)
	fp.Ciphers, fp.Extensions = len(l.ciphers), len(l.exts)

	version := h.maxVersion()
	fp.TLSVersion = versionName(version)
	var alpn string
	if len(h.ALPN) > 0 {
		alpn = h.ALPN[0]
	}

	// Part a, shared by all four variants.
	var abuf [10]byte
	a := abuf[:0]
	if quic {
		a = append(a, 'q')
	} else {
		a = append(a, 't')
	}
	a = append(a, versionCode(version)...)
	if h.has(extServerName) {
		a = append(a, 'd')
	} else {
		a = append(a, 'i')
	}
	a = appendCount(a, len(l.ciphers))
	a = appendCount(a, len(l.exts))
	a = appendALPN(a, alpn)

	fp.setStrings(a, &l, h.ServerName, alpn)
	fp.Client, _ = LookupClient(fp.JA4)
	out := new(Fingerprint)
	*out = fp
	return out
}

// ja4Lists are the lists of a hello that JA4 reads, GREASE removed.
type ja4Lists struct {
	ciphers, sortedCiphers []uint16
	exts                   []uint16 // wire order, SNI and ALPN included
	sortedExts             []uint16 // sorted, without SNI and ALPN
	sigalgs                []uint16 // wire order
}

// setStrings writes the four variants, SNI and ALPN into one buffer and
// turns it into one string, of which the fields are substrings.
func (fp *Fingerprint) setStrings(a []byte, l *ja4Lists, sni, alpn string) {
	var scratch [1536]byte
	buf := scratch[:0]
	// JA4_r, whose parts b and c are hashed for JA4.
	buf = append(buf, a...)
	buf = append(buf, '_')
	cs := len(buf)
	buf = appendList(buf, l.sortedCiphers)
	ce := len(buf)
	buf = append(buf, '_')
	es := len(buf)
	buf = appendList(buf, l.sortedExts)
	if len(l.sigalgs) > 0 {
		buf = append(buf, '_')
		buf = appendList(buf, l.sigalgs)
	}
	rEnd := len(buf)
	// JA4_ro, whose parts b and c are hashed for JA4_o.
	buf = append(buf, a...)
	buf = append(buf, '_')
	ocs := len(buf)
	buf = appendList(buf, l.ciphers)
	oce := len(buf)
	buf = append(buf, '_')
	oes := len(buf)
	buf = appendList(buf, l.exts)
	if len(l.sigalgs) > 0 {
		buf = append(buf, '_')
		buf = appendList(buf, l.sigalgs)
	}
	roEnd := len(buf)

	var hb, hc, hob, hoc [hashLen]byte
	hashPart(&hb, buf[cs:ce], len(l.ciphers) == 0)
	hashPart(&hc, buf[es:rEnd], len(l.sortedExts) == 0)
	hashPart(&hob, buf[ocs:oce], len(l.ciphers) == 0)
	hashPart(&hoc, buf[oes:roEnd], len(l.exts) == 0)
	buf = appendJA4(buf, a, &hb, &hc)
	ja4End := len(buf)
	buf = appendJA4(buf, a, &hob, &hoc)
	oEnd := len(buf)
	buf = append(buf, sni...)
	sniEnd := len(buf)
	buf = append(buf, alpn...)

	s := string(buf)
	fp.JA4R = s[:rEnd]
	fp.JA4RO = s[rEnd:roEnd]
	fp.JA4 = s[roEnd:ja4End]
	fp.JA4O = s[ja4End:oEnd]
	fp.SNI = s[oEnd:sniEnd]
	fp.ALPN = s[sniEnd:]
}

// appendNonGREASE appends the values of vs that are not GREASE.
func appendNonGREASE(dst, vs []uint16) []uint16 {
	for _, v := range vs {
		if !IsGREASE(v) {
			dst = append(dst, v)
		}
	}
	return dst
}

// sortUint16s sorts a short list in place by insertion, which beats the
// general sort on the few dozen values of a hello.
func sortUint16s(vs []uint16) {
	if len(vs) > 64 {
		slices.Sort(vs)
		return
	}
	for i := 1; i < len(vs); i++ {
		for j := i; j > 0 && vs[j] < vs[j-1]; j-- {
			vs[j], vs[j-1] = vs[j-1], vs[j]
		}
	}
}

// maxVersion is the highest non-GREASE value of supported_versions, or
// legacy_version when there is none (JA4: "TLS Version"). A list of zeros
// gives zero ("00"), not legacy_version.
func (h *Hello) maxVersion() uint16 {
	var v uint16
	found := false
	for _, x := range h.SupportedVersions {
		if !IsGREASE(x) {
			v, found = max(v, x), true
		}
	}
	if !found {
		v = h.Version
	}
	return v
}

// versionCode is the two-character JA4 version.
func versionCode(v uint16) string {
	switch v {
	case 0x0304:
		return "13"
	case 0x0303:
		return "12"
	case 0x0302:
		return "11"
	case 0x0301:
		return "10"
	case 0x0300:
		return "s3"
	case 0x0200:
		return "s2"
	case 0x0100:
		return "s1"
	case 0xfeff:
		return "d1"
	case 0xfefd:
		return "d2"
	case 0xfefc:
		return "d3"
	}
	return "00"
}

// versionName is the version as the fingerprint log writes it.
func versionName(v uint16) string {
	switch v {
	case 0x0304:
		return "1.3"
	case 0x0303:
		return "1.2"
	case 0x0302:
		return "1.1"
	case 0x0301:
		return "1.0"
	case 0x0300:
		return "ssl3"
	case 0x0200:
		return "ssl2"
	}
	return ""
}

// appendCount appends n as two decimal digits, 99 at most.
func appendCount(b []byte, n int) []byte {
	n = min(n, 99)
	return append(b, byte('0'+n/10), byte('0'+n%10))
}

// appendALPN appends the JA4 ALPN characters of the first ALPN value p: its
// first and last characters when both are ASCII alphanumerics (one
// character is repeated), otherwise the first and last characters of its hex
// form; "00" when there is no value.
func appendALPN(b []byte, p string) []byte {
	if p == "" {
		return append(b, '0', '0')
	}
	first, last := p[0], p[len(p)-1]
	if isAlnum(first) && isAlnum(last) {
		return append(b, first, last)
	}
	const digits = "0123456789abcdef"
	return append(b, digits[first>>4], digits[last&0x0f])
}

func isAlnum(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// appendList appends vs as 4-digit lowercase hex values joined by commas.
func appendList(b []byte, vs []uint16) []byte {
	const digits = "0123456789abcdef"
	for i, v := range vs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, digits[v>>12], digits[v>>8&0xf], digits[v>>4&0xf], digits[v&0xf])
	}
	return b
}

// hashPart writes the first 12 hex digits of SHA-256(s) to dst, or zeros if
// the list is empty.
func hashPart(dst *[hashLen]byte, s []byte, empty bool) {
	if empty {
		*dst = [hashLen]byte{'0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0'}
		return
	}
	sum := sha256.Sum256(s)
	hex.Encode(dst[:], sum[:hashLen/2])
}

// appendJA4 appends a_b_c.
func appendJA4(buf, a []byte, b, c *[hashLen]byte) []byte {
	buf = append(buf, a...)
	buf = append(buf, '_')
	buf = append(buf, b[:]...)
	buf = append(buf, '_')
	return append(buf, c[:]...)
}

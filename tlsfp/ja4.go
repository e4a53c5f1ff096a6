package tlsfp

import (
	"crypto/sha256"
	"encoding/hex"
	"math/bits"
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
	// JA4Session is the JA4 of the session's full handshake: JA4 with the
	// extensions only a resuming hello carries, pre_shared_key (RFC 8446
	// §4.2.11) and early_data (§4.2.10), left out of the count and the
	// hash. For a full handshake it is JA4. JA4 itself follows FoxIO's
	// specification and counts them, so one browser's resumed hello has
	// another JA4 than its first; what binds a visitor's pass to its TLS
	// stack is JA4Session, the same for both.
	JA4Session string
	// QUIC reports a hello carried in QUIC (JA4 prefix "q").
	QUIC bool
	// ECH reports that the client offered encrypted_client_hello (0xfe0d).
	ECH bool
	// GREASE reports that the client sent GREASE cipher suites or extensions.
	GREASE bool
	// Ciphers and Extensions count the cipher suites and extensions offered,
	// GREASE excluded and not capped (JA4 caps them at 99).
	Ciphers, Extensions int

	// Client is the known client this JA4 belongs to; zero if unknown. For
	// a resumed session it is JA4Session's when the table knows that one
	// (the table holds full handshakes), else JA4's.
	Client Client
}

// hashLen is the length of a JA4 hash part: 12 hex digits of SHA-256.
const hashLen = 12

// Fingerprint computes the JA4 fingerprints of h, for a hello carried in
// QUIC if quic is set, otherwise over TCP.
func (h *Hello) Fingerprint(quic bool) *Fingerprint {
	fp := &Fingerprint{QUIC: quic}

	// The lists without GREASE, in wire order and sorted. Stack buffers
	// cover ordinary hellos; append moves larger ones to the heap.
	var cbuf [64]uint16
	var ebuf, esbuf, gbuf [48]uint16
	var l ja4Lists
	l.ciphers = appendNonGREASE(cbuf[:0], h.CipherSuites)
	l.exts = appendNonGREASE(ebuf[:0], h.Extensions)
	l.sigalgs = appendNonGREASE(gbuf[:0], h.SignatureAlgorithms)
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

	// Everything but the extensions' wire order repeats from one
	// connection of a client to the next (Chrome shuffles its extensions
	// every time): the parts that depend on it alone are computed per
	// connection.
	var kbuf [256]byte
	key := l.appendKey(kbuf[:0], a)
	sp, mh := sortedParts.get(key)
	if sp == nil {
		var computed sortedPart
		computed.set(a, &l)
		sortedParts.add(key, mh, computed)
		sp = &computed
	}
	fp.JA4, fp.JA4R, fp.Client = sp.ja4, sp.ja4r, sp.client
	fp.setWireOrder(a, &l, sp, h.ServerName, alpn)
	fp.JA4Session = fp.JA4
	if fp.Resumption || h.has(extEarlyData) {
		full := *h
		full.Extensions = make([]uint16, 0, len(h.Extensions))
		for _, e := range h.Extensions {
			if e != extPreSharedKey && e != extEarlyData {
				full.Extensions = append(full.Extensions, e)
			}
		}
		first := full.Fingerprint(quic)
		fp.JA4Session = first.JA4
		if first.Client != (Client{}) {
			fp.Client = first.Client // the known-client table holds full handshakes
		}
	}
	return fp
}

// ja4Lists are the lists of a hello that JA4 reads, GREASE removed.
type ja4Lists struct {
	ciphers    []uint16 // wire order
	exts       []uint16 // wire order, SNI and ALPN included
	sortedExts []uint16 // sorted, without SNI and ALPN
	sigalgs    []uint16 // wire order
}

// appendKey appends to k what determines a sortedPart: part a (fixed
// length), the cipher suites in wire order, the sorted extensions and the
// signature algorithms, each list but the last preceded by its length.
func (l *ja4Lists) appendKey(k, a []byte) []byte {
	k = append(k, a...)
	for i, list := range [...][]uint16{l.ciphers, l.sortedExts, l.sigalgs} {
		if i < 2 {
			k = append(k, byte(len(list)>>8), byte(len(list)))
		}
		for _, v := range list {
			k = append(k, byte(v>>8), byte(v))
		}
	}
	return k
}

// sortedPart is what a hello's fingerprint shares with every hello that has
// the same cipher suites, set of extensions and signature algorithms.
type sortedPart struct {
	ja4, ja4r  string
	client     Client
	cipherHex  string        // the cipher suites in wire order
	cipherHash [hashLen]byte // JA4_o's part b
	sigalgHex  string        // "_" and the signature algorithms, or ""
}

// sortedParts is the process's cache of sortedPart, shared by every
// listener and QUIC capture.
var sortedParts = newCache[sortedPart]()

// set computes JA4 and JA4_r, and the wire-order cipher suites and
// signature algorithms for JA4_o and JA4_ro, as substrings of one string.
func (sp *sortedPart) set(a []byte, l *ja4Lists) {
	var csbuf [64]uint16
	sortedCiphers := append(csbuf[:0], l.ciphers...)
	sortUint16s(sortedCiphers)
	var scratch [1024]byte
	buf := scratch[:0]
	// JA4_r, whose parts b and c are hashed for JA4.
	buf = append(buf, a...)
	buf = append(buf, '_')
	cs := len(buf)
	buf = appendList(buf, sortedCiphers)
	ce := len(buf)
	buf = append(buf, '_')
	es := len(buf)
	buf = appendList(buf, l.sortedExts)
	sigStart := len(buf)
	if len(l.sigalgs) > 0 {
		buf = append(buf, '_')
		buf = appendList(buf, l.sigalgs)
	}
	rEnd := len(buf)
	var hb, hc, hob [hashLen]byte
	hashPart(&hb, buf[cs:ce], len(l.ciphers) == 0)
	hashPart(&hc, buf[es:rEnd], len(l.sortedExts) == 0)
	buf = appendJA4(buf, a, &hb, &hc)
	ja4End := len(buf)
	buf = appendList(buf, l.ciphers)
	hashPart(&hob, buf[ja4End:], len(l.ciphers) == 0)

	s := string(buf)
	*sp = sortedPart{
		ja4r:       s[:rEnd],
		ja4:        s[rEnd:ja4End],
		cipherHex:  s[ja4End:],
		cipherHash: hob,
		sigalgHex:  s[sigStart:rEnd],
	}
	sp.client, _ = LookupClient(sp.ja4)
}

// setWireOrder writes JA4_ro, JA4_o, SNI and ALPN into one buffer and turns
// it into one string, of which the fields are substrings.
func (fp *Fingerprint) setWireOrder(a []byte, l *ja4Lists, sp *sortedPart, sni, alpn string) {
	var scratch [768]byte
	buf := scratch[:0]
	buf = append(buf, a...)
	buf = append(buf, '_')
	buf = append(buf, sp.cipherHex...)
	buf = append(buf, '_')
	es := len(buf)
	buf = appendList(buf, l.exts)
	buf = append(buf, sp.sigalgHex...)
	roEnd := len(buf)
	var hoc [hashLen]byte
	hashPart(&hoc, buf[es:roEnd], len(l.exts) == 0)
	buf = appendJA4(buf, a, &sp.cipherHash, &hoc)
	oEnd := len(buf)
	buf = append(buf, sni...)
	sniEnd := len(buf)
	buf = append(buf, alpn...)

	s := string(buf)
	fp.JA4RO = s[:roEnd]
	fp.JA4O = s[roEnd:oEnd]
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

// sortUint16s sorts a short list in place. Values below 64, which are
// most extension types, are sorted through a bit mask; the others by
// insertion, which beats the general sort on the few dozen values of a
// hello.
func sortUint16s(vs []uint16) {
	if len(vs) > 64 {
		slices.Sort(vs)
		return
	}
	var mask uint64
	var rest [64]uint16
	n := 0
	for _, v := range vs {
		if v >= 64 {
			rest[n] = v
			n++
			continue
		}
		if mask&(1<<v) != 0 { // a duplicate: the mask cannot count it
			insertionSort(vs)
			return
		}
		mask |= 1 << v
	}
	insertionSort(rest[:n])
	i := 0
	for ; mask != 0; mask &= mask - 1 {
		vs[i] = uint16(bits.TrailingZeros64(mask))
		i++
	}
	copy(vs[i:], rest[:n])
}

func insertionSort(vs []uint16) {
	for i := 1; i < len(vs); i++ {
		v, j := vs[i], i
		for ; j > 0 && vs[j-1] > v; j-- {
			vs[j] = vs[j-1]
		}
		vs[j] = v
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

// hexPairs holds the two lowercase hex digits of every byte value.
const hexPairs = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f" +
	"202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f" +
	"404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f" +
	"606162636465666768696a6b6c6d6e6f707172737475767778797a7b7c7d7e7f" +
	"808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f" +
	"a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf" +
	"c0c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4d5d6d7d8d9dadbdcdddedf" +
	"e0e1e2e3e4e5e6e7e8e9eaebecedeeeff0f1f2f3f4f5f6f7f8f9fafbfcfdfeff"

// appendList appends vs as 4-digit lowercase hex values joined by commas.
// It grows b once and writes each value as five bytes, the last comma cut.
func appendList(b []byte, vs []uint16) []byte {
	if len(vs) == 0 {
		return b
	}
	n := len(b)
	b = slices.Grow(b, 5*len(vs))[:n+5*len(vs)]
	for i, v := range vs {
		d := (*[5]byte)(b[n+5*i:])
		hi, lo := uint(v>>8)*2, uint(v&0xff)*2
		d[0], d[1], d[2], d[3], d[4] = hexPairs[hi], hexPairs[hi+1], hexPairs[lo], hexPairs[lo+1], ','
	}
	return b[:len(b)-1]
}

// hashPart writes the first 12 hex digits of SHA-256(s) to dst, or zeros
// when the list is empty.
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

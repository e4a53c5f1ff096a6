package tlsfp

import (
	"errors"
	"fmt"
	"io"

	"golang.org/x/crypto/cryptobyte"
)

// Errors returned by the parsers and recorded by [Conn.Err].
var (
	// ErrTruncated reports that the bytes end before the ClientHello does.
	// It wraps io.ErrUnexpectedEOF.
	ErrTruncated = fmt.Errorf("tlsfp: truncated ClientHello: %w", io.ErrUnexpectedEOF)
	// ErrMalformed reports a ClientHello or record whose structure is invalid.
	ErrMalformed = errors.New("tlsfp: malformed ClientHello")
	// ErrNotTLS reports that the first byte is not a TLS handshake record
	// (for example a plain HTTP request sent to the TLS port).
	ErrNotTLS = errors.New("tlsfp: not a TLS handshake")
	// ErrTooLarge reports a ClientHello larger than the configured bound.
	ErrTooLarge = errors.New("tlsfp: ClientHello too large")
	// ErrTimeout reports that the whole ClientHello did not arrive before the
	// hello deadline.
	ErrTimeout = errors.New("tlsfp: ClientHello not received in time")
)

// Wire constants (RFC 8446 §4, §5.1 and the IANA TLS registries).
const (
	recordTypeAlert         = 0x15
	recordTypeHandshake     = 0x16
	recordHeaderLen         = 5
	maxPlaintext            = 1 << 14
	handshakeTypeClientHelo = 1
	handshakeHeaderLen      = 4

	extServerName          uint16 = 0x0000
	extSupportedGroups     uint16 = 0x000a
	extSignatureAlgorithms uint16 = 0x000d
	extALPN                uint16 = 0x0010
	extPreSharedKey        uint16 = 0x0029
	extEarlyData           uint16 = 0x002a
	extSupportedVersions   uint16 = 0x002b
	extQUICTransportParams uint16 = 0x0039
	extECH                 uint16 = 0xfe0d
)

// IsGREASE reports whether v is one of the reserved GREASE values of RFC 8701
// (0x0a0a, 0x1a1a, …, 0xfafa), used for cipher suites, extensions, groups,
// signature algorithms and versions.
func IsGREASE(v uint16) bool {
	return v&0x0f0f == 0x0a0a && v>>8 == v&0xff
}

// Hello is a parsed ClientHello. Lists keep the client's wire order and
// include GREASE values and duplicates: they are facts about the client, and
// the fingerprint decides what to ignore. Byte slices alias the parsed input.
type Hello struct {
	// Version is legacy_version (the version field of the ClientHello body).
	Version uint16
	// SessionID is legacy_session_id.
	SessionID []byte
	// CipherSuites lists cipher_suites.
	CipherSuites []uint16
	// CompressionMethods lists legacy_compression_methods.
	CompressionMethods []byte
	// Extensions lists the extension types.
	Extensions []uint16

	// ServerName is the first host_name of server_name (0x0000); empty if
	// there is none or the extension is malformed.
	ServerName string
	// ALPN lists the protocols of application_layer_protocol_negotiation
	// (0x0010); nil if absent or malformed.
	ALPN []string
	// SupportedVersions lists supported_versions (0x002b); nil if absent.
	SupportedVersions []uint16
	// SignatureAlgorithms lists signature_algorithms (0x000d); nil if absent.
	SignatureAlgorithms []uint16
	// SupportedGroups lists supported_groups (0x000a); nil if absent.
	SupportedGroups []uint16

	// Len is the length of the handshake message, header included.
	Len int
}

// has reports whether the hello carries an extension of type t.
func (h *Hello) has(t uint16) bool {
	for _, e := range h.Extensions {
		if e == t {
			return true
		}
	}
	return false
}

// ParseHandshake parses one ClientHello handshake message: type 1, a 24-bit
// length and the body (RFC 8446 §4). msg must hold exactly that message.
// A strict prefix of a message returns ErrTruncated.
func ParseHandshake(msg []byte) (*Hello, error) {
	h, err := parseHandshake(msg, nil, nil)
	if err != nil {
		return nil, err
	}
	return &h, nil
}

// FingerprintHandshake parses one ClientHello handshake message as
// [ParseHandshake] does and returns its fingerprint, for a hello carried in
// QUIC if quic is set. This is the listener's path, which keeps only the
// fingerprint: the parsed Hello and its lists stay on the stack.
func FingerprintHandshake(msg []byte, quic bool) (*Fingerprint, error) {
	// A Chrome hello has about 50 16-bit values; larger lists go to the
	// heap.
	var u16 [96]uint16
	var alpn [4]string
	h, err := parseHandshake(msg, u16[:0], alpn[:0])
	if err != nil {
		return nil, err
	}
	return h.Fingerprint(quic), nil
}

// parseHandshake parses msg as ParseHandshake does, keeping the 16-bit lists
// in u16 and the ALPN protocols in alpn while they have room. It builds a
// value, never storing through a pointer, so that the caller's buffers can
// stay on its stack.
func parseHandshake(msg []byte, u16 []uint16, alpn []string) (Hello, error) {
	if len(msg) > 0 && msg[0] != handshakeTypeClientHelo {
		return Hello{}, fmt.Errorf("%w: handshake type %d", ErrMalformed, msg[0])
	}
	if len(msg) < handshakeHeaderLen {
		return Hello{}, ErrTruncated
	}
	length := int(msg[1])<<16 | int(msg[2])<<8 | int(msg[3])
	body := msg[handshakeHeaderLen:]
	switch {
	case len(body) < length:
		return Hello{}, ErrTruncated
	case len(body) > length:
		return Hello{}, fmt.Errorf("%w: %d bytes after the message", ErrMalformed, len(body)-length)
	}
	return unmarshalBody(body, u16, alpn)
}

// unmarshalBody parses the ClientHello body (RFC 8446 §4.1.2). The body is
// complete, so every shortfall inside it is ErrMalformed.
func unmarshalBody(body []byte, u16 []uint16, alpn []string) (Hello, error) {
	h := Hello{Len: handshakeHeaderLen + len(body)}
	s := cryptobyte.String(body)
	var sessionID, ciphers, compression cryptobyte.String
	if !s.ReadUint16(&h.Version) ||
		!s.Skip(32) || // random
		!s.ReadUint8LengthPrefixed(&sessionID) ||
		!s.ReadUint16LengthPrefixed(&ciphers) ||
		!s.ReadUint8LengthPrefixed(&compression) {
		return h, ErrMalformed
	}
	if len(ciphers)%2 != 0 {
		return h, fmt.Errorf("%w: odd cipher_suites length", ErrMalformed)
	}
	h.SessionID = sessionID
	h.CompressionMethods = compression
	var exts cryptobyte.String
	if !s.Empty() {
		// TLS 1.2 and earlier may omit the extensions (RFC 5246 §7.4.1.2).
		if !s.ReadUint16LengthPrefixed(&exts) || !s.Empty() {
			return h, fmt.Errorf("%w: extensions block", ErrMalformed)
		}
	}
	// One pass collects the types and the bodies the fingerprint reads;
	// the first occurrence of each wins.
	var tbuf [64]uint16
	types := tbuf[:0]
	var known [5]cryptobyte.String // by knownIndex
	var seen [5]bool
	for !exts.Empty() {
		// Type and length in one read: ReadBytes inlines where
		// ReadUint16LengthPrefixed does not, and this loop is hot.
		var hdr uint32
		var data []byte
		if !exts.ReadUint32(&hdr) || !exts.ReadBytes(&data, int(hdr&0xffff)) {
			return h, fmt.Errorf("%w: extension %d", ErrMalformed, len(types))
		}
		typ := uint16(hdr >> 16)
		types = append(types, typ)
		if i := knownIndex(typ); i >= 0 && !seen[i] {
			known[i], seen[i] = data, true
		}
	}
	// All 16-bit lists share one array, the caller's when it has room; the
	// server name and the ALPN protocols are substrings of one copy of
	// their two extension bodies.
	n := len(ciphers)/2 + len(types)
	for _, k := range known[2:] {
		n += len(k) / 2
	}
	if n > cap(u16) {
		u16 = make([]uint16, 0, n)
	}
	u16 = u16[:0]
	u16, h.CipherSuites = appendUint16s(u16, ciphers)
	start := len(u16)
	u16 = append(u16, types...)
	h.Extensions = u16[start:len(u16):len(u16)]
	d := decoder{
		bases: [2]cryptobyte.String{known[0], known[1]},
		str:   string(known[0]) + string(known[1]),
	}
	if seen[0] {
		h.ServerName = d.serverName(known[0])
	}
	if seen[1] {
		h.ALPN = d.alpn(known[1], alpn)
	}
	// RFC 8446 §4.2.1, §4.2.3 and §4.2.7. A malformed extension body is an
	// oddity of the client, not a reason to drop the fingerprint: the field
	// stays empty.
	var list cryptobyte.String
	if seen[2] && known[2].ReadUint8LengthPrefixed(&list) {
		u16, h.SupportedVersions = appendUint16s(u16, list)
	}
	if seen[3] && known[3].ReadUint16LengthPrefixed(&list) {
		u16, h.SignatureAlgorithms = appendUint16s(u16, list)
	}
	if seen[4] && known[4].ReadUint16LengthPrefixed(&list) {
		_, h.SupportedGroups = appendUint16s(u16, list)
	}
	return h, nil
}

// knownIndex numbers the extensions whose bodies unmarshalBody reads:
// server_name, ALPN, supported_versions, signature_algorithms and
// supported_groups, in the order of its known and seen arrays; -1 for the
// others, of which only the type is kept.
func knownIndex(typ uint16) int {
	switch typ {
	case extServerName:
		return 0
	case extALPN:
		return 1
	case extSupportedVersions:
		return 2
	case extSignatureAlgorithms:
		return 3
	case extSupportedGroups:
		return 4
	}
	return -1
}

// decoder holds the shared copy of a hello's strings.
type decoder struct {
	bases [2]cryptobyte.String // the server_name and ALPN bodies
	str   string               // their copy, concatenated
}

// appendUint16s appends the big-endian 16-bit values of s to the shared
// array dst and returns it with the list it added (never nil); a trailing
// odd byte is dropped.
func appendUint16s(dst []uint16, s []byte) (all, list []uint16) {
	start := len(dst)
	for ; len(s) >= 2; s = s[2:] {
		dst = append(dst, uint16(s[0])<<8|uint16(s[1]))
	}
	return dst, dst[start:len(dst):len(dst)]
}

// string returns s, which cryptobyte read from within bases[i], as a
// substring of the copy. Both slices share the input's array, which ends
// where both capacities end, so the capacities give the offset.
func (d *decoder) string(i int, s cryptobyte.String) string {
	off := cap(d.bases[i]) - cap(s)
	if i == 1 {
		off += len(d.bases[0])
	}
	return d.str[off : off+len(s)]
}

// serverName returns the first host_name of a server_name body (RFC 6066
// §3), or "" if there is none or the body is malformed.
func (d *decoder) serverName(data cryptobyte.String) string {
	var list cryptobyte.String
	if !data.ReadUint16LengthPrefixed(&list) {
		return ""
	}
	for !list.Empty() {
		var nameType uint8
		var name cryptobyte.String
		if !list.ReadUint8(&nameType) || !list.ReadUint16LengthPrefixed(&name) {
			return ""
		}
		if nameType == 0 { // host_name
			return d.string(0, name)
		}
	}
	return ""
}

// alpn appends the protocols of an application_layer_protocol_negotiation
// body (RFC 7301 §3.1) to dst; nil if the body is malformed.
func (d *decoder) alpn(data cryptobyte.String, dst []string) []string {
	var list cryptobyte.String
	if !data.ReadUint16LengthPrefixed(&list) {
		return nil
	}
	dst = dst[:0]
	if dst == nil {
		dst = make([]string, 0, 4)
	}
	for !list.Empty() {
		var proto cryptobyte.String
		if !list.ReadUint8LengthPrefixed(&proto) {
			return nil
		}
		dst = append(dst, d.string(1, proto))
	}
	return dst
}

// ParseRecords parses a ClientHello from TLS records (RFC 8446 §5.1) as they
// arrive on a TCP connection: one or more handshake records whose fragments
// together hold the hello. Bytes after the hello are ignored. A strict prefix
// returns ErrTruncated; a first byte that is not a handshake record returns
// ErrNotTLS.
func ParseRecords(b []byte) (*Hello, error) {
	var a assembler
	end, err := a.scan(b, handshakeHeaderLen+1<<24)
	switch {
	case err != nil:
		return nil, err
	case end == 0:
		return nil, ErrTruncated
	}
	return ParseHandshake(a.message(b[:end]))
}

// assembler follows the record layer incrementally, so that bytes arriving
// one at a time are each looked at once. It finds where the records holding
// the ClientHello end without copying them.
type assembler struct {
	off     int     // where the next record header starts
	recEnd  int     // end of the current record's fragment; 0 between records
	have    int     // handshake bytes seen so far
	hdr     [4]byte // the handshake header, possibly split across records
	msgLen  int     // handshake message length including its header; 0 until known
	records int     // records seen
}

// scan continues over b (which extends the b of earlier calls) and returns
// the end of the hello's last byte, or 0 if more bytes are needed. The
// record holding that byte may go on past it, in bytes not read yet. max
// bounds the handshake message, header included.
func (a *assembler) scan(b []byte, max int) (int, error) {
	for {
		if a.recEnd == 0 {
			if len(b) > a.off && b[a.off] != recordTypeHandshake {
				if a.records == 0 {
					return 0, ErrNotTLS
				}
				return 0, fmt.Errorf("%w: record type %d inside the hello", ErrMalformed, b[a.off])
			}
			if len(b)-a.off < recordHeaderLen {
				return 0, nil
			}
			n := int(b[a.off+3])<<8 | int(b[a.off+4])
			if n > maxPlaintext {
				return 0, fmt.Errorf("%w: record of %d bytes", ErrMalformed, n)
			}
			a.off += recordHeaderLen
			a.recEnd = a.off + n
			a.records++
		}
		// Consume the fragment bytes available in this record.
		avail := min(len(b), a.recEnd) - a.off
		for avail > 0 && a.have < handshakeHeaderLen {
			a.hdr[a.have] = b[a.off]
			a.have++
			a.off++
			avail--
			if a.have == handshakeHeaderLen {
				if a.hdr[0] != handshakeTypeClientHelo {
					return 0, fmt.Errorf("%w: handshake type %d", ErrMalformed, a.hdr[0])
				}
				a.msgLen = handshakeHeaderLen + (int(a.hdr[1])<<16 | int(a.hdr[2])<<8 | int(a.hdr[3]))
				if a.msgLen > max {
					return 0, fmt.Errorf("%w: %d bytes", ErrTooLarge, a.msgLen)
				}
			}
		}
		if a.msgLen > 0 {
			take := min(avail, a.msgLen-a.have)
			a.have += take
			a.off += take
			if a.have == a.msgLen {
				return a.off, nil
			}
		} else {
			a.off += avail
		}
		if a.off < a.recEnd {
			return 0, nil // the record continues in bytes not yet read
		}
		a.recEnd = 0
	}
}

// message returns the handshake message held by the records in b, which
// ends where scan found the hello complete (the last record may be cut
// there). A message within one record is returned in place; otherwise the
// fragments are copied together.
func (a *assembler) message(b []byte) []byte {
	if a.records == 1 {
		return b[recordHeaderLen : recordHeaderLen+a.msgLen]
	}
	msg := make([]byte, 0, a.msgLen)
	for p := 0; len(msg) < a.msgLen; {
		n := int(b[p+3])<<8 | int(b[p+4])
		p += recordHeaderLen
		frag := b[p:min(p+n, len(b))]
		msg = append(msg, frag[:min(len(frag), a.msgLen-len(msg))]...)
		p += n
	}
	return msg
}

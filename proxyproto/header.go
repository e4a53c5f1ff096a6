package proxyproto

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
)

// Errors returned by [Parse] and by a [Conn] whose header could not be read.
var (
	// ErrTruncated reports that the bytes end before the header does. It
	// wraps io.ErrUnexpectedEOF.
	ErrTruncated = fmt.Errorf("proxyproto: truncated PROXY header: %w", io.ErrUnexpectedEOF)
	// ErrMalformed reports a header that does not follow the specification,
	// or a CRC32C TLV that does not match the header.
	ErrMalformed = errors.New("proxyproto: malformed PROXY header")
	// ErrTooLarge reports a version 1 line longer than 107 bytes or a
	// version 2 header larger than the configured bound.
	ErrTooLarge = errors.New("proxyproto: PROXY header too large")
	// ErrNotProxy reports bytes that begin neither signature: the peer does
	// not speak the PROXY protocol (a client connecting past the balancer).
	ErrNotProxy = errors.New("proxyproto: no PROXY header")
	// ErrTimeout reports that the whole header did not arrive before
	// Config.Timeout.
	ErrTimeout = errors.New("proxyproto: PROXY header not received in time")
)

// Command is the command of a version 2 header (spec §2.2, 13th byte).
type Command uint8

// Commands. A version 1 header always has the command Proxy.
const (
	// Local: the balancer opened the connection itself (a health check);
	// the socket's own addresses stand.
	Local Command = 0x0
	// Proxy: the connection is relayed; the header carries the original
	// addresses.
	Proxy Command = 0x1
)

// Family is the address family of a header (spec §2.2, 14th byte, high
// nibble).
type Family uint8

// Address families. A version 1 header's TCP4 is AFInet, TCP6 is AFInet6 and
// UNKNOWN is AFUnspec.
const (
	AFUnspec Family = 0x0 // addresses not given; the socket's stand
	AFInet   Family = 0x1 // IPv4
	AFInet6  Family = 0x2 // IPv6
	AFUnix   Family = 0x3 // Unix socket paths
)

// Transport is the transport protocol of a header (spec §2.2, 14th byte,
// low nibble).
type Transport uint8

// Transports. A version 1 header's TCP4 and TCP6 are Stream.
const (
	TransportUnspec Transport = 0x0
	Stream          Transport = 0x1 // TCP, UNIX_STREAM
	Datagram        Transport = 0x2 // UDP, UNIX_DGRAM
)

// Type is the type of a TLV (spec §2.2, "pp2_tlv").
type Type uint8

// Registered TLV types (spec §2.2) and the subtypes found inside TypeSSL
// (§2.2.6). Types 0xE0–0xEF are for applications (AWS uses 0xEA for the VPC
// endpoint, Azure 0xEE, Google Cloud 0xE0), 0xF0–0xF7 for experiments.
const (
	TypeALPN      Type = 0x01 // §2.2.1: the negotiated ALPN protocol
	TypeAuthority Type = 0x02 // §2.2.2: the host name (SNI), UTF-8
	TypeCRC32C    Type = 0x03 // §2.2.3: CRC32c of the header; verified by Parse
	TypeNoop      Type = 0x04 // §2.2.4: padding
	TypeUniqueID  Type = 0x05 // §2.2.5: an opaque connection ID, at most 128 bytes
	TypeSSL       Type = 0x20 // §2.2.6: TLS facts; see ParseSSL
	TypeNetNS     Type = 0x30 // §2.2.7: the network namespace's name

	TypeSSLVersion Type = 0x21 // in TypeSSL: the TLS version, US-ASCII
	TypeSSLCN      Type = 0x22 // in TypeSSL: the client certificate's Common Name
	TypeSSLCipher  Type = 0x23 // in TypeSSL: the cipher's name
	TypeSSLSigAlg  Type = 0x24 // in TypeSSL: the certificate's signature algorithm
	TypeSSLKeyAlg  Type = 0x25 // in TypeSSL: the certificate's key algorithm
)

// TLV is one type-length-value vector of a version 2 header.
type TLV struct {
	Type  Type
	Value []byte // aliases the parsed bytes
}

// Header is a parsed PROXY protocol header.
type Header struct {
	// Version is 1 (text) or 2 (binary).
	Version int
	// Command is Local (a health check from the balancer) or Proxy.
	Command Command
	// Family and Transport describe the relayed connection.
	Family    Family
	Transport Transport
	// Source and Dest are the relayed connection's client and server
	// addresses for AFInet and AFInet6 (IPv4-mapped IPv6 addresses are
	// unmapped); zero otherwise.
	Source, Dest netip.AddrPort
	// UnixSource and UnixDest are the socket paths for AFUnix, without the
	// trailing NUL bytes (an abstract socket's name starts with a NUL).
	UnixSource, UnixDest string
	// TLVs lists the version 2 TLVs in wire order; values alias the
	// parsed bytes.
	TLVs []TLV
}

// Addrs returns the relayed connection's addresses when the header carries
// ones to use instead of the socket's: a Proxy command for an IPv4 or IPv6
// stream or datagram. For a LOCAL command, AF_UNSPEC, AF_UNIX (spec §2.2:
// a receiver may fall back to UNSPEC) or a version 1 UNKNOWN, ok is false and
// the socket's addresses stand.
func (h *Header) Addrs() (src, dst netip.AddrPort, ok bool) {
	if h.Command != Proxy || (h.Family != AFInet && h.Family != AFInet6) ||
		(h.Transport != Stream && h.Transport != Datagram) {
		return netip.AddrPort{}, netip.AddrPort{}, false
	}
	return h.Source, h.Dest, true
}

// Lookup returns the value of the first TLV of type t.
func (h *Header) Lookup(t Type) ([]byte, bool) {
	return lookup(h.TLVs, t)
}

func lookup(tlvs []TLV, t Type) ([]byte, bool) {
	for _, v := range tlvs {
		if v.Type == t {
			return v.Value, true
		}
	}
	return nil, false
}

// AppendBinary appends the header's wire form to b, as
// encoding.BinaryAppender: text for Version 1, binary for Version 2. If the
// header has a TypeCRC32C TLV, its value is computed over the encoded header.
// It fails with ErrMalformed for a header the version cannot express (a
// version 1 LOCAL or TLV, a family without its addresses).
func (h *Header) AppendBinary(b []byte) ([]byte, error) {
	switch h.Version {
	case 1:
		return h.appendV1(b)
	case 2:
		return h.appendV2(b)
	}
	return b, fmt.Errorf("%w: version %d", ErrMalformed, h.Version)
}

// Parse parses the PROXY header (version 1 or 2) at the start of b and
// returns it and its length; the bytes after it are not looked at. A strict
// prefix of a header returns ErrTruncated; bytes that begin neither
// signature return ErrNotProxy. A version 2 header is accepted up to the
// protocol's own bound of 16+65535 bytes (the [Conn] applies
// Config.MaxV2Bytes). A CRC32C TLV, if present, is verified.
func Parse(b []byte) (Header, int, error) {
	h, n, err := parse(b, maxV2Bytes)
	if err != nil {
		return Header{}, 0, err
	}
	return h, n, nil
}

// Signatures (spec §2.1 and §2.2) and sizes.
const (
	sigV1      = "PROXY "
	sigV2      = "\r\n\r\n\x00\r\nQUIT\n"
	v1MinLen   = len("PROXY UNKNOWN\r\n")
	v1MaxLen   = 107 // spec §2.1, the worst case including the CRLF
	v2FixedLen = 16  // signature, version and command, family, length
	maxV2Bytes = v2FixedLen + 0xffff
)

// parse parses a header as Parse does, bounding a version 2 header at maxV2
// bytes. On success n is the header's length. With ErrTruncated, n is a
// lower bound of the length of any valid header that begins with b (always
// more than len(b)): the connection reads that much more and never past the
// header's end.
func parse(b []byte, maxV2 int) (h Header, n int, err error) {
	switch {
	case len(b) == 0:
		return Header{}, v1MinLen, ErrTruncated // the shortest header of either version
	case hasPrefix(b, sigV2):
		return parseV2(b, maxV2)
	case hasPrefix(b, sigV1):
		return parseV1(b)
	}
	return Header{}, 0, ErrNotProxy
}

// hasPrefix reports whether b and sig agree on their common length.
func hasPrefix(b []byte, sig string) bool {
	n := min(len(b), len(sig))
	return string(b[:n]) == sig[:n]
}

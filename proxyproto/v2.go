package proxyproto

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"net/netip"

	"golang.org/x/crypto/cryptobyte"
)

// Sizes of the version 2 address blocks and TLVs (spec §2.2, §2.2.5).
const (
	inetAddrLen  = 4 + 4 + 2 + 2
	inet6AddrLen = 16 + 16 + 2 + 2
	unixPathLen  = 108
	maxUniqueID  = 128
)

// addrLen returns the size of the address block of family f.
func (f Family) addrLen() int {
	switch f {
	case AFInet:
		return inetAddrLen
	case AFInet6:
		return inet6AddrLen
	case AFUnix:
		return 2 * unixPathLen
	}
	return 0
}

// validFamily reports whether f and t make one of the protocol bytes the
// spec lists (§2.2): UNSPEC (0x00), or TCP or UDP over IPv4, IPv6 or Unix
// sockets (0x11, 0x12, 0x21, 0x22, 0x31, 0x32). Receivers must reject other
// families and transports; the other combinations of valid nibbles have no
// defined address block, so they are rejected too.
func validFamily(f Family, t Transport) bool {
	if f == AFUnspec {
		return t == TransportUnspec
	}
	return f <= AFUnix && (t == Stream || t == Datagram)
}

// parseV2 parses a version 2 header (spec §2.2): the 16-byte fixed part,
// then exactly the number of bytes its length field announces, no more than
// maxV2 in all.
func parseV2(b []byte, maxV2 int) (Header, int, error) {
	in := cryptobyte.String(b)
	var fixed []byte
	if !in.ReadBytes(&fixed, v2FixedLen) {
		return Header{}, v2FixedLen, ErrTruncated
	}
	var verCmd, famTr uint8
	var length uint16
	f := cryptobyte.String(fixed)
	if !f.Skip(len(sigV2)) || !f.ReadUint8(&verCmd) || !f.ReadUint8(&famTr) || !f.ReadUint16(&length) {
		return Header{}, 0, ErrMalformed // unreachable: fixed holds 16 bytes
	}
	h := Header{Version: 2, Command: Command(verCmd & 0xf), Family: Family(famTr >> 4), Transport: Transport(famTr & 0xf)}
	n := v2FixedLen + int(length)
	switch {
	case verCmd>>4 != 2:
		return Header{}, 0, fmt.Errorf("%w: version %d after the version 2 signature", ErrMalformed, verCmd>>4)
	case h.Command != Local && h.Command != Proxy:
		return Header{}, 0, fmt.Errorf("%w: command %d", ErrMalformed, h.Command)
	case !validFamily(h.Family, h.Transport):
		return Header{}, 0, fmt.Errorf("%w: family and transport 0x%02x", ErrMalformed, famTr)
	case n > maxV2:
		return Header{}, 0, fmt.Errorf("%w: version 2 header of %d bytes, more than %d", ErrTooLarge, n, maxV2)
	}
	var body []byte
	if !in.ReadBytes(&body, int(length)) {
		return Header{}, n, ErrTruncated
	}
	if err := h.unmarshalBody(fixed, body); err != nil {
		return Header{}, 0, err
	}
	return h, n, nil
}

// unmarshalBody parses the address block of h's family and the TLVs after
// it. The body is complete, so every shortfall inside it is ErrMalformed.
// A LOCAL header's addresses are parsed too (Addrs ignores them).
func (h *Header) unmarshalBody(fixed, body []byte) error {
	s := cryptobyte.String(body)
	var addr []byte
	if !s.ReadBytes(&addr, h.Family.addrLen()) {
		return fmt.Errorf("%w: %d bytes cannot hold the addresses of family %d", ErrMalformed, len(body), h.Family)
	}
	h.unmarshalAddrs(addr)
	if n := countTLVs(s); n > 0 {
		h.TLVs = make([]TLV, 0, n)
	}
	var crc []byte
	for !s.Empty() {
		t, ok := readTLV(&s)
		if !ok {
			return fmt.Errorf("%w: TLV %d overruns the header", ErrMalformed, len(h.TLVs)+1)
		}
		switch t.Type {
		case TypeCRC32C: // §2.2.3
			if len(t.Value) != 4 || crc != nil {
				return fmt.Errorf("%w: CRC32C TLV of %d bytes or repeated", ErrMalformed, len(t.Value))
			}
			crc = t.Value
		case TypeUniqueID: // §2.2.5
			if len(t.Value) > maxUniqueID {
				return fmt.Errorf("%w: UNIQUE_ID of %d bytes, more than %d", ErrMalformed, len(t.Value), maxUniqueID)
			}
		}
		h.TLVs = append(h.TLVs, t)
	}
	if crc != nil {
		var want uint32
		c := cryptobyte.String(crc)
		if !c.ReadUint32(&want) || checksum(fixed, addr, h.TLVs) != want {
			return fmt.Errorf("%w: CRC32C does not match", ErrMalformed)
		}
	}
	return nil
}

// unmarshalAddrs parses an address block of exactly h.Family.addrLen()
// bytes.
func (h *Header) unmarshalAddrs(addr []byte) {
	a := cryptobyte.String(addr)
	switch h.Family {
	case AFInet:
		var src, dst [4]byte
		var sp, dp uint16
		if a.CopyBytes(src[:]) && a.CopyBytes(dst[:]) && a.ReadUint16(&sp) && a.ReadUint16(&dp) {
			h.Source = netip.AddrPortFrom(netip.AddrFrom4(src), sp)
			h.Dest = netip.AddrPortFrom(netip.AddrFrom4(dst), dp)
		}
	case AFInet6:
		var src, dst [16]byte
		var sp, dp uint16
		if a.CopyBytes(src[:]) && a.CopyBytes(dst[:]) && a.ReadUint16(&sp) && a.ReadUint16(&dp) {
			h.Source = netip.AddrPortFrom(netip.AddrFrom16(src).Unmap(), sp)
			h.Dest = netip.AddrPortFrom(netip.AddrFrom16(dst).Unmap(), dp)
		}
	case AFUnix:
		var src, dst []byte
		if a.ReadBytes(&src, unixPathLen) && a.ReadBytes(&dst, unixPathLen) {
			h.UnixSource = string(bytes.TrimRight(src, "\x00"))
			h.UnixDest = string(bytes.TrimRight(dst, "\x00"))
		}
	}
}

// readTLV reads one TLV: a type byte, a 16-bit length and the value.
func readTLV(s *cryptobyte.String) (TLV, bool) {
	var typ uint8
	var v cryptobyte.String
	if !s.ReadUint8(&typ) || !s.ReadUint16LengthPrefixed(&v) {
		return TLV{}, false
	}
	return TLV{Type: Type(typ), Value: v}, true
}

// countTLVs counts the whole TLVs at the start of s.
func countTLVs(s cryptobyte.String) int {
	n := 0
	for _, ok := readTLV(&s); ok; _, ok = readTLV(&s) {
		n++
	}
	return n
}

// checksum computes the CRC32c (RFC 4960 Appendix B) of a version 2 header
// from its fixed part, its address block and its TLVs, with the value of
// the CRC32C TLV taken as zeros (spec §2.2.3).
func checksum(fixed, addr []byte, tlvs []TLV) uint32 {
	tab := crc32.MakeTable(crc32.Castagnoli)
	sum := crc32.Update(0, tab, fixed)
	sum = crc32.Update(sum, tab, addr)
	// One buffer for a TLV's type and length, then the zeroed CRC value:
	// crc32 takes its input through a function value, so it lives on the
	// heap, once.
	scratch := make([]byte, 3+4)
	th, zero := scratch[:3], scratch[3:]
	for _, t := range tlvs {
		v := t.Value
		if t.Type == TypeCRC32C {
			v = zero[:min(len(v), len(zero))]
		}
		th[0], th[1], th[2] = byte(t.Type), byte(len(v)>>8), byte(len(v))
		sum = crc32.Update(sum, tab, th)
		sum = crc32.Update(sum, tab, v)
	}
	return sum
}

// appendV2 appends the version 2 header of h, computing its CRC32C TLV if
// it has one: the header is built with a zero checksum, summed, and built
// again with the sum.
func (h *Header) appendV2(b []byte) ([]byte, error) {
	if err := h.checkV2(); err != nil {
		return b, err
	}
	out, err := h.buildV2(b, 0)
	if err != nil {
		return b, err
	}
	if _, ok := h.Lookup(TypeCRC32C); !ok {
		return out, nil
	}
	return h.buildV2(b, crc32.Checksum(out[len(b):], crc32.MakeTable(crc32.Castagnoli)))
}

// checkV2 reports what a version 2 header cannot say of h.
func (h *Header) checkV2() error {
	src, dst := h.Source.Addr(), h.Dest.Addr()
	var ok bool
	switch h.Family {
	case AFUnspec:
		ok = !src.IsValid() && !dst.IsValid() && h.UnixSource == "" && h.UnixDest == ""
	case AFInet:
		ok = src.Is4() && dst.Is4()
	case AFInet6:
		ok = src.IsValid() && dst.IsValid()
	case AFUnix:
		ok = !src.IsValid() && !dst.IsValid() && len(h.UnixSource) <= unixPathLen && len(h.UnixDest) <= unixPathLen
	}
	if !ok || (h.Command != Local && h.Command != Proxy) || !validFamily(h.Family, h.Transport) {
		return fmt.Errorf("%w: version 2 cannot express command %d, family %d, transport %d with addresses %v, %v, %q, %q",
			ErrMalformed, h.Command, h.Family, h.Transport, h.Source, h.Dest, h.UnixSource, h.UnixDest)
	}
	return nil
}

// buildV2 appends the version 2 header of h with sum as the value of its
// CRC32C TLV.
func (h *Header) buildV2(b []byte, sum uint32) ([]byte, error) {
	bld := cryptobyte.NewBuilder(b)
	bld.AddBytes([]byte(sigV2))
	bld.AddUint8(2<<4 | uint8(h.Command))
	bld.AddUint8(uint8(h.Family)<<4 | uint8(h.Transport))
	bld.AddUint16LengthPrefixed(func(bld *cryptobyte.Builder) {
		switch h.Family {
		case AFInet:
			src, dst := h.Source.Addr().As4(), h.Dest.Addr().As4()
			bld.AddBytes(src[:])
			bld.AddBytes(dst[:])
			bld.AddUint16(h.Source.Port())
			bld.AddUint16(h.Dest.Port())
		case AFInet6:
			src, dst := h.Source.Addr().As16(), h.Dest.Addr().As16()
			bld.AddBytes(src[:])
			bld.AddBytes(dst[:])
			bld.AddUint16(h.Source.Port())
			bld.AddUint16(h.Dest.Port())
		case AFUnix:
			var src, dst [unixPathLen]byte
			copy(src[:], h.UnixSource)
			copy(dst[:], h.UnixDest)
			bld.AddBytes(src[:])
			bld.AddBytes(dst[:])
		}
		for _, t := range h.TLVs {
			bld.AddUint8(uint8(t.Type))
			bld.AddUint16LengthPrefixed(func(bld *cryptobyte.Builder) {
				if t.Type == TypeCRC32C {
					bld.AddUint32(sum)
				} else {
					bld.AddBytes(t.Value)
				}
			})
		}
	})
	out, err := bld.Bytes()
	if err != nil {
		return b, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return out, nil
}

// SSL is the value of a TypeSSL TLV (spec §2.2.6): what the balancer knows
// of the client's TLS connection.
type SSL struct {
	// Client is a bit field of ClientSSL, ClientCertConn and ClientCertSess.
	Client uint8
	// Verify is zero if the client presented a certificate and it was
	// verified, non-zero otherwise.
	Verify uint32
	// TLVs lists the sub-TLVs (TypeSSLVersion, TypeSSLCN, TypeSSLCipher,
	// TypeSSLSigAlg, TypeSSLKeyAlg) in wire order; values alias the parsed
	// bytes.
	TLVs []TLV
}

// Bits of SSL.Client (spec §2.2.6).
const (
	ClientSSL      = 0x01 // the client connected over TLS
	ClientCertConn = 0x02 // it sent a certificate on this connection
	ClientCertSess = 0x04 // it sent one at least once in this TLS session
)

// ParseSSL parses the value of a TypeSSL TLV.
func ParseSSL(v []byte) (SSL, error) {
	s := cryptobyte.String(v)
	var ssl SSL
	if !s.ReadUint8(&ssl.Client) || !s.ReadUint32(&ssl.Verify) {
		return SSL{}, fmt.Errorf("%w: SSL TLV of %d bytes", ErrMalformed, len(v))
	}
	for !s.Empty() {
		t, ok := readTLV(&s)
		if !ok {
			return SSL{}, fmt.Errorf("%w: SSL sub-TLV %d overruns the TLV", ErrMalformed, len(ssl.TLVs)+1)
		}
		ssl.TLVs = append(ssl.TLVs, t)
	}
	return ssl, nil
}

// Lookup returns the value of the first sub-TLV of type t.
func (s *SSL) Lookup(t Type) ([]byte, bool) {
	return lookup(s.TLVs, t)
}

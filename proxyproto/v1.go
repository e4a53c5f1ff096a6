package proxyproto

import (
	"bytes"
	"fmt"
	"net/netip"
	"strconv"
)

// parseV1 parses a version 1 line (spec §2.1):
//
//	"PROXY" SP ("TCP4" / "TCP6") SP src SP dst SP sport SP dport CRLF
//	"PROXY" SP "UNKNOWN" [SP anything but CR and LF] CRLF
//
// with canonical addresses of the named family and ports without leading
// zeros, at most 107 bytes in all.
func parseV1(b []byte) (Header, int, error) {
	line, _, found := bytes.Cut(b[:min(len(b), v1MaxLen)], []byte("\n"))
	if !found {
		if len(b) >= v1MaxLen {
			return Header{}, 0, fmt.Errorf("%w: no CRLF in the first %d bytes of a version 1 line", ErrTooLarge, v1MaxLen)
		}
		return v1Truncated(b)
	}
	n := len(line) + 1
	line, ok := bytes.CutSuffix(line, []byte("\r"))
	if !ok || bytes.IndexByte(line, '\r') >= 0 {
		return Header{}, 0, fmt.Errorf("%w: a version 1 line ends at its first CRLF", ErrMalformed)
	}
	h := Header{Version: 1, Command: Proxy, Transport: Stream}
	proto, rest, _ := bytes.Cut(line[len(sigV1):], []byte(" "))
	switch string(proto) {
	case "UNKNOWN":
		// The receiver must ignore anything presented before the CRLF.
		return Header{Version: 1, Command: Proxy}, n, nil
	case "TCP4":
		h.Family = AFInet
	case "TCP6":
		h.Family = AFInet6
	default:
		return Header{}, 0, fmt.Errorf("%w: version 1 protocol %q", ErrMalformed, proto)
	}
	src, rest, _ := bytes.Cut(rest, []byte(" "))
	dst, rest, _ := bytes.Cut(rest, []byte(" "))
	sport, dport, _ := bytes.Cut(rest, []byte(" "))
	sa, ok1 := parseV1Addr(src, h.Family)
	da, ok2 := parseV1Addr(dst, h.Family)
	sp, ok3 := parsePort(sport)
	dp, ok4 := parsePort(dport)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return Header{}, 0, fmt.Errorf("%w: version 1 line %q", ErrMalformed, line)
	}
	h.Source, h.Dest = netip.AddrPortFrom(sa, sp), netip.AddrPortFrom(da, dp)
	return h, n, nil
}

// v1Truncated looks at a version 1 line whose LF has not arrived: it
// rejects what no further byte can mend, and otherwise returns ErrTruncated
// with a lower bound of the line's length. The bound counts what a valid
// line still needs: a space and at least one byte per field not begun, a
// byte for a field just begun, and the CRLF. The bound is exact often enough
// that a TCP4 line arrives in a handful of reads, none past its end.
func v1Truncated(b []byte) (Header, int, error) {
	if len(b) < v1MinLen {
		return Header{}, v1MinLen, ErrTruncated
	}
	crlf := 2
	if bytes.HasSuffix(b, []byte("\r")) {
		crlf = 1
	}
	if bytes.Count(b, []byte("\r")) > 2-crlf {
		return Header{}, 0, fmt.Errorf("%w: CR inside a version 1 line", ErrMalformed)
	}
	// At 15 bytes the protocol field of a valid line is complete.
	proto, fields, ok := bytes.Cut(b[len(sigV1):], []byte(" "))
	switch {
	case string(proto) == "UNKNOWN":
		return v1Need(b, crlf)
	case !ok || (string(proto) != "TCP4" && string(proto) != "TCP6"):
		return Header{}, 0, fmt.Errorf("%w: version 1 protocol %q", ErrMalformed, proto)
	}
	spaces := bytes.Count(fields, []byte(" ")) // between src, dst, sport, dport
	if spaces > 3 || (crlf == 1 && spaces < 3) {
		return Header{}, 0, fmt.Errorf("%w: version 1 %s line with the wrong number of fields", ErrMalformed, proto)
	}
	need := 2*(3-spaces) + crlf
	if len(fields) == 0 || bytes.HasSuffix(fields, []byte(" ")) {
		need++ // the field just begun has no byte yet
	}
	return v1Need(b, need)
}

// v1Need returns ErrTruncated with the length of b plus need, or
// ErrTooLarge if no valid line can be that long.
func v1Need(b []byte, need int) (Header, int, error) {
	if len(b)+need > v1MaxLen {
		return Header{}, 0, fmt.Errorf("%w: a version 1 line needs more than %d bytes", ErrTooLarge, v1MaxLen)
	}
	return Header{}, len(b) + need, ErrTruncated
}

// parseV1Addr parses a version 1 address of family fam: dotted decimal
// without leading zeros for TCP4, an IPv6 address without a zone for TCP6.
func parseV1Addr(b []byte, fam Family) (netip.Addr, bool) {
	a, err := netip.ParseAddr(string(b))
	switch {
	case err != nil || a.Zone() != "":
		return netip.Addr{}, false
	case fam == AFInet:
		return a, a.Is4()
	}
	return a.Unmap(), a.Is6()
}

// parsePort parses a decimal port in [0, 65535] without leading zeros.
func parsePort(b []byte) (uint16, bool) {
	if len(b) == 0 || len(b) > 5 || (len(b) > 1 && b[0] == '0') {
		return 0, false
	}
	var n uint32
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint32(c-'0')
	}
	return uint16(n), n <= 0xffff
}

// appendV1 appends the version 1 line of h.
func (h *Header) appendV1(b []byte) ([]byte, error) {
	if h.Command != Proxy || len(h.TLVs) > 0 || h.UnixSource != "" || h.UnixDest != "" {
		return b, fmt.Errorf("%w: version 1 has no LOCAL command, TLVs or Unix paths", ErrMalformed)
	}
	src, dst := h.Source.Addr(), h.Dest.Addr()
	switch {
	case h.Family == AFUnspec && h.Transport == TransportUnspec && !src.IsValid() && !dst.IsValid():
		return append(b, "PROXY UNKNOWN\r\n"...), nil
	case h.Family == AFInet && h.Transport == Stream && src.Is4() && dst.Is4():
		b = append(b, "PROXY TCP4 "...)
	case h.Family == AFInet6 && h.Transport == Stream && src.IsValid() && dst.IsValid():
		b = append(b, "PROXY TCP6 "...)
		src, dst = netip.AddrFrom16(src.As16()), netip.AddrFrom16(dst.As16())
	default:
		return b, fmt.Errorf("%w: version 1 cannot express family %d, transport %d with addresses %v, %v",
			ErrMalformed, h.Family, h.Transport, h.Source, h.Dest)
	}
	b = src.AppendTo(b)
	b = append(b, ' ')
	b = dst.AppendTo(b)
	b = append(b, ' ')
	b = strconv.AppendUint(b, uint64(h.Source.Port()), 10)
	b = append(b, ' ')
	b = strconv.AppendUint(b, uint64(h.Dest.Port()), 10)
	return append(b, "\r\n"...), nil
}

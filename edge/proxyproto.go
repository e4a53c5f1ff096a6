package edge

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"
)

// PROXY protocol v1 and v2 (HAProxy, "The PROXY protocol", versions 1 and
// 2), read from connections that an L4 balancer forwards. The header is read
// lazily, in the connection's own goroutine, bounded in size and time.

// Errors of the PROXY protocol reader.
var (
	ErrProxyHeader    = errors.New("edge: bad PROXY protocol header")
	ErrProxyTruncated = fmt.Errorf("edge: truncated PROXY protocol header: %w", io.ErrUnexpectedEOF)
)

var proxyV2Sig = []byte("\r\n\r\n\x00\r\nQUIT\n")

const (
	proxyV1Max = 107 // the v1 specification's longest line
	proxyV2Max = 16 + 216
)

// ProxyHeader is what a PROXY header says about a connection.
type ProxyHeader struct {
	Source, Dest netip.AddrPort // zero for LOCAL / UNKNOWN
	Local        bool           // v2 LOCAL or v1 UNKNOWN: use the socket's addresses
}

// ParseProxyHeader parses a PROXY protocol header at the start of b and
// returns it and its length. It returns ErrProxyTruncated when b holds only
// a prefix of a header, and ErrProxyHeader when b is not a header.
func ParseProxyHeader(b []byte) (ProxyHeader, int, error) {
	if len(b) >= 5 && string(b[:5]) == "PROXY" {
		return parseProxyV1(b)
	}
	n := min(len(b), len(proxyV2Sig))
	if !bytes.Equal(b[:n], proxyV2Sig[:n]) {
		if n >= 5 || !bytes.HasPrefix([]byte("PROXY"), b[:min(len(b), 5)]) {
			return ProxyHeader{}, 0, ErrProxyHeader
		}
		return ProxyHeader{}, 0, ErrProxyTruncated
	}
	if len(b) < 16 {
		return ProxyHeader{}, 0, ErrProxyTruncated
	}
	return parseProxyV2(b)
}

func parseProxyV1(b []byte) (ProxyHeader, int, error) {
	end := bytes.Index(b[:min(len(b), proxyV1Max)], []byte("\r\n"))
	if end < 0 {
		if len(b) >= proxyV1Max {
			return ProxyHeader{}, 0, fmt.Errorf("%w: v1 line longer than %d bytes", ErrProxyHeader, proxyV1Max)
		}
		return ProxyHeader{}, 0, ErrProxyTruncated
	}
	f := bytes.Split(b[:end], []byte(" "))
	if len(f) >= 2 && string(f[1]) == "UNKNOWN" {
		return ProxyHeader{Local: true}, end + 2, nil
	}
	if len(f) != 6 || (string(f[1]) != "TCP4" && string(f[1]) != "TCP6") {
		return ProxyHeader{}, 0, fmt.Errorf("%w: v1 wants PROXY TCP4|TCP6 src dst sport dport", ErrProxyHeader)
	}
	src, err1 := netip.ParseAddr(string(f[2]))
	dst, err2 := netip.ParseAddr(string(f[3]))
	sp, err3 := strconv.ParseUint(string(f[4]), 10, 16)
	dp, err4 := strconv.ParseUint(string(f[5]), 10, 16)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return ProxyHeader{}, 0, fmt.Errorf("%w: v1 addresses: %v", ErrProxyHeader, err)
	}
	if (string(f[1]) == "TCP4") != src.Is4() || src.Is4() != dst.Is4() {
		return ProxyHeader{}, 0, fmt.Errorf("%w: v1 address family mismatch", ErrProxyHeader)
	}
	return ProxyHeader{Source: netip.AddrPortFrom(src, uint16(sp)), Dest: netip.AddrPortFrom(dst, uint16(dp))}, end + 2, nil
}

func parseProxyV2(b []byte) (ProxyHeader, int, error) {
	verCmd, fam := b[12], b[13]
	length := int(binary.BigEndian.Uint16(b[14:16]))
	if verCmd>>4 != 2 {
		return ProxyHeader{}, 0, fmt.Errorf("%w: v2 version %d", ErrProxyHeader, verCmd>>4)
	}
	if 16+length > proxyV2Max+512 { // addresses plus TLVs; anything larger is not a balancer
		return ProxyHeader{}, 0, fmt.Errorf("%w: v2 header of %d bytes", ErrProxyHeader, 16+length)
	}
	if len(b) < 16+length {
		return ProxyHeader{}, 0, ErrProxyTruncated
	}
	body := b[16 : 16+length]
	switch verCmd & 0xF {
	case 0: // LOCAL: health checks from the balancer itself
		return ProxyHeader{Local: true}, 16 + length, nil
	case 1: // PROXY
	default:
		return ProxyHeader{}, 0, fmt.Errorf("%w: v2 command %d", ErrProxyHeader, verCmd&0xF)
	}
	var h ProxyHeader
	switch fam >> 4 {
	case 1: // AF_INET
		if len(body) < 12 {
			return ProxyHeader{}, 0, fmt.Errorf("%w: v2 IPv4 block too short", ErrProxyHeader)
		}
		h.Source = netip.AddrPortFrom(netip.AddrFrom4([4]byte(body[0:4])), binary.BigEndian.Uint16(body[8:10]))
		h.Dest = netip.AddrPortFrom(netip.AddrFrom4([4]byte(body[4:8])), binary.BigEndian.Uint16(body[10:12]))
	case 2: // AF_INET6
		if len(body) < 36 {
			return ProxyHeader{}, 0, fmt.Errorf("%w: v2 IPv6 block too short", ErrProxyHeader)
		}
		h.Source = netip.AddrPortFrom(netip.AddrFrom16([16]byte(body[0:16])).Unmap(), binary.BigEndian.Uint16(body[32:34]))
		h.Dest = netip.AddrPortFrom(netip.AddrFrom16([16]byte(body[16:32])).Unmap(), binary.BigEndian.Uint16(body[34:36]))
	default: // AF_UNSPEC or AF_UNIX: keep the socket's addresses
		h.Local = true
	}
	return h, 16 + length, nil
}

// proxyListener expects a PROXY header on every accepted connection.
type proxyListener struct {
	net.Listener
	timeout time.Duration
}

func (l *proxyListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &proxyConn{Conn: c, timeout: l.timeout}, nil
}

// proxyConn reads the PROXY header on its first Read (or RemoteAddr) and
// then behaves as the connection it forwards.
type proxyConn struct {
	net.Conn
	timeout time.Duration
	once    sync.Once
	hdr     ProxyHeader
	err     error
	rest    []byte // bytes read after the header
}

func (c *proxyConn) readHeader() {
	c.once.Do(func() {
		_ = c.Conn.SetReadDeadline(time.Now().Add(c.timeout))
		defer func() { _ = c.Conn.SetReadDeadline(time.Time{}) }()
		buf := make([]byte, 0, 256)
		for {
			if len(buf) == cap(buf) {
				c.err = fmt.Errorf("%w: too long", ErrProxyHeader)
				return
			}
			n, err := c.Conn.Read(buf[len(buf):cap(buf)])
			buf = buf[:len(buf)+n]
			h, hl, perr := ParseProxyHeader(buf)
			if perr == nil {
				c.hdr, c.rest = h, buf[hl:]
				return
			}
			if !errors.Is(perr, io.ErrUnexpectedEOF) {
				c.err = perr
				return
			}
			if err != nil {
				c.err = fmt.Errorf("%w (%v)", ErrProxyTruncated, err)
				return
			}
		}
	})
}

func (c *proxyConn) Read(p []byte) (int, error) {
	c.readHeader()
	if c.err != nil {
		return 0, c.err
	}
	if len(c.rest) > 0 {
		n := copy(p, c.rest)
		c.rest = c.rest[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// RemoteAddr is the client the balancer forwarded, once the header is read.
func (c *proxyConn) RemoteAddr() net.Addr {
	c.readHeader()
	if c.err != nil || c.hdr.Local || !c.hdr.Source.IsValid() {
		return c.Conn.RemoteAddr()
	}
	return net.TCPAddrFromAddrPort(c.hdr.Source)
}

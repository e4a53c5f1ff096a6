// Package proxyprotofuzz holds the fuzz targets of package proxyproto.
package proxyprotofuzz

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/maatproxy/maat/proxyproto"
)

// seeds are headers of every kind, as balancers send them, most followed
// by the start of a TLS ClientHello.
func seeds(f *testing.F) [][]byte {
	hello := "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"
	s := [][]byte{
		[]byte("PROXY TCP4 192.0.2.1 198.51.100.2 12345 443\r\n" + hello),
		[]byte("PROXY TCP6 2001:db8::1 2001:db8::2 1 2\r\nGET"),
		[]byte("PROXY TCP6 ::ffff:192.0.2.1 ::ffff:198.51.100.2 65535 0\r\n"),
		[]byte("PROXY UNKNOWN\r\n"),
		[]byte("PROXY UNKNOWN ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n"),
		[]byte("\r\n\r\n\x00\r\nQUIT\n\x21\x11\x00\x0c\xc0\x00\x02\x01\xc6\x33\x64\x02\x30\x39\x01\xbb" + hello),
		[]byte("\r\n\r\n\x00\r\nQUIT\n\x20\x00\x00\x00"),
		[]byte(hello),
		[]byte("GET / HTTP/1.1\r\n"),
	}
	ssl := "\x07\x00\x00\x00\x00\x21\x00\x07TLSv1.3\x22\x00\x12client.example.org"
	for _, h := range []proxyproto.Header{
		{Version: 2, Command: proxyproto.Proxy, Family: proxyproto.AFInet, Transport: proxyproto.Stream,
			Source: netip.MustParseAddrPort("203.0.113.7:51234"), Dest: netip.MustParseAddrPort("192.0.2.10:443"),
			TLVs: []proxyproto.TLV{
				{Type: proxyproto.TypeALPN, Value: []byte("h2")},
				{Type: proxyproto.TypeAuthority, Value: []byte("www.example.org")},
				{Type: proxyproto.TypeSSL, Value: []byte(ssl)},
				{Type: proxyproto.TypeUniqueID, Value: bytes.Repeat([]byte("u"), 128)},
				{Type: proxyproto.TypeNetNS, Value: []byte("blue")},
				{Type: 0xEA, Value: []byte("\x01vpce-0123456789abcdef0")},
				{Type: proxyproto.TypeCRC32C},
			}},
		{Version: 2, Command: proxyproto.Proxy, Family: proxyproto.AFInet6, Transport: proxyproto.Datagram,
			Source: netip.MustParseAddrPort("[2001:db8::1]:53"), Dest: netip.MustParseAddrPort("[2001:db8::2]:53")},
		{Version: 2, Command: proxyproto.Proxy, Family: proxyproto.AFUnix, Transport: proxyproto.Stream,
			UnixSource: "/run/a.sock", UnixDest: "\x00abstract"},
		{Version: 2, Command: proxyproto.Local, TLVs: []proxyproto.TLV{{Type: proxyproto.TypeCRC32C}}},
	} {
		b, err := h.AppendBinary(nil)
		if err != nil {
			f.Fatal(err)
		}
		s = append(s, append(b, hello...))
	}
	return s
}

// FuzzParse: no panic; errors are the package's; an accepted header is no
// longer than the input, is read the same with other bytes after it, has
// only truncated strict prefixes, and encodes back to a header read the
// same (version 2: to the very same bytes).
func FuzzParse(f *testing.F) {
	for _, s := range seeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, n, err := proxyproto.Parse(b)
		if err != nil {
			if !errors.Is(err, proxyproto.ErrTruncated) && !errors.Is(err, proxyproto.ErrMalformed) &&
				!errors.Is(err, proxyproto.ErrTooLarge) && !errors.Is(err, proxyproto.ErrNotProxy) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if n <= 0 || n > len(b) {
			t.Fatalf("length %d of %d bytes", n, len(b))
		}
		h2, n2, err := proxyproto.Parse(append(b[:n:n], "trailing"...))
		if err != nil || n2 != n || !reflect.DeepEqual(h, h2) {
			t.Fatalf("trailing bytes changed the parse: %+v %d %v", h2, n2, err)
		}
		for i := range n {
			if _, _, err := proxyproto.Parse(b[:i]); !errors.Is(err, proxyproto.ErrTruncated) {
				t.Fatalf("prefix of %d bytes of an accepted %d-byte header: %v", i, n, err)
			}
		}
		enc, err := h.AppendBinary(nil)
		if err != nil {
			t.Fatalf("an accepted header does not encode: %v (%+v)", err, h)
		}
		if h.Version == 2 && !bytes.Equal(enc, b[:n]) {
			t.Fatalf("re-encoded\n%x\nfrom\n%x", enc, b[:n])
		}
		h3, n3, err := proxyproto.Parse(enc)
		if err != nil || n3 != len(enc) || !reflect.DeepEqual(h, h3) {
			t.Fatalf("re-parsed %+v %d %v; want %+v", h3, n3, err, h)
		}
	})
}

// FuzzConn: bytes arriving in pieces of any size on a listener's
// connection. When the connection accepts a header, it is Parse's, the
// connection read exactly its bytes from the socket and no more, and
// everything after it reaches the reader unchanged. When Parse rejects the
// bytes outright, so does the connection.
func FuzzConn(f *testing.F) {
	for _, s := range seeds(f) {
		f.Add(s, uint8(0))
		f.Add(s, uint8(1))
		f.Add(s, uint8(7))
	}
	f.Fuzz(func(t *testing.T, b []byte, chunk uint8) {
		sock := &memConn{r: bytes.NewReader(b), chunk: int(chunk)}
		ln, err := proxyproto.NewListener(&oneListener{c: sock}, proxyproto.Config{})
		if err != nil {
			t.Fatal(err)
		}
		c, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		got, cerr := proxyproto.ConnOf(c).Header()
		want, n, perr := proxyproto.Parse(b)
		if cerr != nil {
			if perr == nil && n <= proxyproto.DefaultMaxV2Bytes {
				t.Fatalf("the connection refused what Parse accepts: %v", cerr)
			}
			return
		}
		if perr != nil {
			t.Fatalf("the connection accepted what Parse refuses (%v): %+v", perr, got)
		}
		if consumed := len(b) - sock.r.Len(); consumed != n {
			t.Fatalf("the connection read %d bytes of a %d-byte header", consumed, n)
		}
		if !reflect.DeepEqual(*got, want) {
			t.Fatalf("connection's header %+v, Parse's %+v", *got, want)
		}
		after, err := io.ReadAll(c)
		if err != nil || !bytes.Equal(after, b[n:]) {
			t.Fatalf("after the header read %q, %v; want %q", after, err, b[n:])
		}
	})
}

// memConn is a socket whose peer sent b, in reads of at most chunk bytes
// (any size if chunk is 0).
type memConn struct {
	r     *bytes.Reader
	chunk int
}

func (c *memConn) Read(p []byte) (int, error) {
	if c.chunk > 0 && len(p) > c.chunk {
		p = p[:c.chunk]
	}
	return c.r.Read(p)
}

func (c *memConn) Write(p []byte) (int, error)        { return len(p), nil }
func (c *memConn) Close() error                       { return nil }
func (c *memConn) LocalAddr() net.Addr                { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 443} }
func (c *memConn) RemoteAddr() net.Addr               { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2), Port: 50000} }
func (c *memConn) SetDeadline(t time.Time) error      { return nil }
func (c *memConn) SetReadDeadline(t time.Time) error  { return nil }
func (c *memConn) SetWriteDeadline(t time.Time) error { return nil }

// oneListener hands out one connection.
type oneListener struct{ c net.Conn }

func (l *oneListener) Accept() (net.Conn, error) {
	if l.c == nil {
		return nil, net.ErrClosed
	}
	c := l.c
	l.c = nil
	return c, nil
}

func (l *oneListener) Close() error   { return nil }
func (l *oneListener) Addr() net.Addr { return &net.TCPAddr{} }

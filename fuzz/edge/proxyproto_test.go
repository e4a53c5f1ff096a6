// Package edgefuzz holds the fuzz targets for the parsers of untrusted bytes
// that live in package edge.
package edgefuzz

import (
	"errors"
	"io"
	"testing"

	"github.com/maatproxy/maat/edge"
)

// FuzzParseProxyHeader: no panic; a header's length never exceeds the
// input; every strict prefix of an accepted header is reported truncated;
// trailing bytes do not change what is parsed.
func FuzzParseProxyHeader(f *testing.F) {
	f.Add([]byte("PROXY TCP4 192.0.2.1 198.51.100.2 12345 443\r\n"))
	f.Add([]byte("PROXY TCP6 2001:db8::1 2001:db8::2 1 2\r\nGET"))
	f.Add([]byte("PROXY UNKNOWN\r\n"))
	f.Add([]byte("\r\n\r\n\x00\r\nQUIT\n\x21\x11\x00\x0c\xc0\x00\x02\x01\xc6\x33\x64\x02\x30\x39\x01\xbb"))
	f.Add([]byte("\r\n\r\n\x00\r\nQUIT\n\x20\x00\x00\x00"))
	f.Add([]byte{0x16, 0x03, 0x01, 0x00, 0x10})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, n, err := edge.ParseProxyHeader(b)
		if err != nil {
			if !errors.Is(err, edge.ErrProxyHeader) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if n <= 0 || n > len(b) {
			t.Fatalf("length %d of %d bytes", n, len(b))
		}
		h2, n2, err := edge.ParseProxyHeader(append(b[:n:n], "trailing"...))
		if err != nil || n2 != n || h2 != h {
			t.Fatalf("trailing bytes changed the parse: %+v %d %v", h2, n2, err)
		}
		if n > 1 {
			if _, _, err := edge.ParseProxyHeader(b[:n-1]); !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("prefix of an accepted header: %v", err)
			}
		}
	})
}

package edge

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"testing"
)

func proxyV2(cmd, fam byte, body []byte) []byte {
	b := append([]byte{}, proxyV2Sig...)
	b = append(b, 0x20|cmd, fam)
	b = binary.BigEndian.AppendUint16(b, uint16(len(body)))
	return append(b, body...)
}

func TestParseProxyHeader(t *testing.T) {
	t.Parallel()
	v4 := append(append(netip.MustParseAddr("192.0.2.1").AsSlice(), netip.MustParseAddr("198.51.100.2").AsSlice()...), 0x30, 0x39, 0x01, 0xbb)
	v6 := append(append(netip.MustParseAddr("2001:db8::1").AsSlice(), netip.MustParseAddr("2001:db8::2").AsSlice()...), 0x30, 0x39, 0x01, 0xbb)
	for _, tt := range []struct {
		name  string
		in    []byte
		src   string
		local bool
		err   error
	}{
		{"v1 tcp4", []byte("PROXY TCP4 192.0.2.1 198.51.100.2 12345 443\r\nrest"), "192.0.2.1:12345", false, nil},
		{"v1 tcp6", []byte("PROXY TCP6 2001:db8::1 2001:db8::2 12345 443\r\n"), "[2001:db8::1]:12345", false, nil},
		{"v1 unknown", []byte("PROXY UNKNOWN\r\n"), "", true, nil},
		{"v1 family mismatch", []byte("PROXY TCP4 2001:db8::1 198.51.100.2 1 2\r\n"), "", false, ErrProxyHeader},
		{"v1 bad port", []byte("PROXY TCP4 192.0.2.1 198.51.100.2 99999 443\r\n"), "", false, ErrProxyHeader},
		{"v1 too long", append([]byte("PROXY TCP4 "), bytes.Repeat([]byte("1"), 200)...), "", false, ErrProxyHeader},
		{"v2 inet", proxyV2(1, 0x11, v4), "192.0.2.1:12345", false, nil},
		{"v2 inet6 with tlv", proxyV2(1, 0x21, append(v6, 0x04, 0x00, 0x01, 0x00)), "[2001:db8::1]:12345", false, nil},
		{"v2 local", proxyV2(0, 0x00, nil), "", true, nil},
		{"v2 short block", proxyV2(1, 0x11, v4[:8]), "", false, ErrProxyHeader},
		{"v2 bad version", append(append([]byte{}, proxyV2Sig...), 0x11, 0x11, 0, 0), "", false, ErrProxyHeader},
		{"tls hello", []byte{0x16, 0x03, 0x01, 0x02, 0x00}, "", false, ErrProxyHeader},
		{"http", []byte("GET / HTTP/1.1\r\n"), "", false, ErrProxyHeader},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, n, err := ParseProxyHeader(tt.in)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("err %v, want %v", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Local != tt.local || (!tt.local && h.Source.String() != tt.src) {
				t.Errorf("got %+v, want src %s local %v", h, tt.src, tt.local)
			}
			// Every strict prefix is truncated, never malformed or accepted.
			for i := 0; i < n; i++ {
				if _, _, err := ParseProxyHeader(tt.in[:i]); !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("prefix %d: %v, want truncated", i, err)
				}
			}
		})
	}
}

func TestProxyConnByteByByte(t *testing.T) {
	t.Parallel()
	client, server := net.Pipe()
	defer client.Close()
	pc := &proxyConn{Conn: server, timeout: 5e9}
	msg := []byte("PROXY TCP4 192.0.2.1 198.51.100.2 12345 443\r\nhello")
	go func() {
		for _, b := range msg {
			_, _ = client.Write([]byte{b})
		}
	}()
	buf := make([]byte, 5)
	if _, err := io.ReadFull(pc, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("read %q, %v", buf, err)
	}
	if got := pc.RemoteAddr().String(); got != "192.0.2.1:12345" {
		t.Errorf("RemoteAddr %s", got)
	}
}

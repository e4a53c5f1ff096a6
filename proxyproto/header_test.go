package proxyproto

import (
	"bytes"
	"errors"
	"hash/crc32"
	"io"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/crypto/cryptobyte"
)

// v2Header builds a version 2 header: the signature, the version and
// command byte, the family and transport byte, then the body, length-prefixed.
func v2Header(verCmd, famTr byte, body func(*cryptobyte.Builder)) []byte {
	var b cryptobyte.Builder
	b.AddBytes([]byte(sigV2))
	b.AddUint8(verCmd)
	b.AddUint8(famTr)
	b.AddUint16LengthPrefixed(body)
	return b.BytesOrPanic()
}

// addAddrs adds an IPv4 or IPv6 address block: the two addresses as 4 or
// 16 bytes (as the addresses are written), then the two ports.
func addAddrs(src, dst string) func(*cryptobyte.Builder) {
	s, d := netip.MustParseAddrPort(src), netip.MustParseAddrPort(dst)
	return func(b *cryptobyte.Builder) {
		b.AddBytes(s.Addr().AsSlice())
		b.AddBytes(d.Addr().AsSlice())
		b.AddUint16(s.Port())
		b.AddUint16(d.Port())
	}
}

func addTLV(b *cryptobyte.Builder, t Type, v string) {
	b.AddUint8(uint8(t))
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes([]byte(v)) })
}

// withCRC builds a header whose CRC32C TLV holds the CRC32c of the header
// built with a zero checksum, as a sender does (spec §2.2.3).
func withCRC(build func(sum uint32) []byte) []byte {
	return build(crc32.Checksum(build(0), crc32.MakeTable(crc32.Castagnoli)))
}

// sslValue is an SSL TLV as HAProxy sends it with proxy-v2-options ssl,
// cert-cn, ssl-cipher, cert-sig, cert-key.
func sslValue() string {
	var b cryptobyte.Builder
	b.AddUint8(ClientSSL | ClientCertConn | ClientCertSess)
	b.AddUint32(0)
	addTLV(&b, TypeSSLVersion, "TLSv1.3")
	addTLV(&b, TypeSSLCN, "client.example.org")
	addTLV(&b, TypeSSLCipher, "TLS_AES_256_GCM_SHA384")
	addTLV(&b, TypeSSLSigAlg, "RSA-SHA256")
	addTLV(&b, TypeSSLKeyAlg, "RSA2048")
	return string(b.BytesOrPanic())
}

var uniqueID = strings.Repeat("a1b2c3d4", 16) // 128 bytes, the spec's most

// haproxyTLVs is a TCP over IPv4 header with the TLVs HAProxy and AWS's NLB
// send, more than 256 bytes in all, with a CRC32C.
func haproxyTLVs() []byte {
	return withCRC(func(sum uint32) []byte {
		return v2Header(0x21, 0x11, func(b *cryptobyte.Builder) {
			addAddrs("203.0.113.7:51234", "192.0.2.10:443")(b)
			addTLV(b, TypeALPN, "h2")
			addTLV(b, TypeAuthority, "www.example.org")
			addTLV(b, TypeSSL, sslValue())
			addTLV(b, TypeUniqueID, uniqueID)
			addTLV(b, TypeNetNS, "blue")
			addTLV(b, 0xEA, "\x01vpce-0123456789abcdef0") // AWS VPC endpoint
			addTLV(b, TypeNoop, "")
			b.AddUint8(uint8(TypeCRC32C))
			b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddUint32(sum) })
		})
	})
}

func tlv(t Type, v string) TLV { return TLV{Type: t, Value: []byte(v)} }

func ap(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

// good are headers Parse accepts, as real senders write them.
var good = []struct {
	name string
	in   []byte
	want Header
}{
	{"v1 tcp4", []byte("PROXY TCP4 192.0.2.1 198.51.100.2 12345 443\r\n"),
		Header{Version: 1, Command: Proxy, Family: AFInet, Transport: Stream, Source: ap("192.0.2.1:12345"), Dest: ap("198.51.100.2:443")}},
	{"v1 tcp4 zero port", []byte("PROXY TCP4 0.0.0.0 255.255.255.255 0 65535\r\n"),
		Header{Version: 1, Command: Proxy, Family: AFInet, Transport: Stream, Source: ap("0.0.0.0:0"), Dest: ap("255.255.255.255:65535")}},
	{"v1 tcp6", []byte("PROXY TCP6 2001:db8::1 2001:db8::2 12345 443\r\n"),
		Header{Version: 1, Command: Proxy, Family: AFInet6, Transport: Stream, Source: ap("[2001:db8::1]:12345"), Dest: ap("[2001:db8::2]:443")}},
	{"v1 tcp6 longest", []byte("PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe 65535 65535\r\n"),
		Header{Version: 1, Command: Proxy, Family: AFInet6, Transport: Stream,
			Source: ap("[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535"), Dest: ap("[ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe]:65535")}},
	{"v1 tcp6 mapped", []byte("PROXY TCP6 ::ffff:192.0.2.1 ::ffff:198.51.100.2 1 2\r\n"),
		Header{Version: 1, Command: Proxy, Family: AFInet6, Transport: Stream, Source: ap("192.0.2.1:1"), Dest: ap("198.51.100.2:2")}},
	{"v1 unknown", []byte("PROXY UNKNOWN\r\n"), Header{Version: 1, Command: Proxy}},
	{"v1 unknown worst case", []byte("PROXY UNKNOWN ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n"),
		Header{Version: 1, Command: Proxy}},
	{"v2 tcp4", v2Header(0x21, 0x11, addAddrs("192.0.2.1:12345", "198.51.100.2:443")),
		Header{Version: 2, Command: Proxy, Family: AFInet, Transport: Stream, Source: ap("192.0.2.1:12345"), Dest: ap("198.51.100.2:443")}},
	{"v2 udp4", v2Header(0x21, 0x12, addAddrs("192.0.2.1:53", "198.51.100.2:53")),
		Header{Version: 2, Command: Proxy, Family: AFInet, Transport: Datagram, Source: ap("192.0.2.1:53"), Dest: ap("198.51.100.2:53")}},
	{"v2 tcp6", v2Header(0x21, 0x21, addAddrs("[2001:db8::1]:12345", "[2001:db8::2]:443")),
		Header{Version: 2, Command: Proxy, Family: AFInet6, Transport: Stream, Source: ap("[2001:db8::1]:12345"), Dest: ap("[2001:db8::2]:443")}},
	{"v2 tcp6 mapped", v2Header(0x21, 0x21, addAddrs("[::ffff:192.0.2.1]:1", "[::ffff:198.51.100.2]:2")),
		Header{Version: 2, Command: Proxy, Family: AFInet6, Transport: Stream, Source: ap("192.0.2.1:1"), Dest: ap("198.51.100.2:2")}},
	{"v2 unix stream", v2Header(0x21, 0x31, func(b *cryptobyte.Builder) {
		b.AddBytes(append([]byte("/run/client.sock"), make([]byte, unixPathLen-16)...))
		b.AddBytes(append([]byte("\x00abstract"), make([]byte, unixPathLen-9)...))
	}), Header{Version: 2, Command: Proxy, Family: AFUnix, Transport: Stream, UnixSource: "/run/client.sock", UnixDest: "\x00abstract"}},
	{"v2 local", v2Header(0x20, 0x00, func(*cryptobyte.Builder) {}), Header{Version: 2, Command: Local}},
	{"v2 local with addresses", v2Header(0x20, 0x11, addAddrs("10.0.0.1:1", "10.0.0.2:2")),
		Header{Version: 2, Command: Local, Family: AFInet, Transport: Stream, Source: ap("10.0.0.1:1"), Dest: ap("10.0.0.2:2")}},
	{"v2 local with crc", localWithCRC(), Header{Version: 2, Command: Local, TLVs: []TLV{{TypeCRC32C, crcOf(localWithCRC())}}}},
	{"v2 proxy unspec with tlv", v2Header(0x21, 0x00, func(b *cryptobyte.Builder) { addTLV(b, TypeAuthority, "example.org") }),
		Header{Version: 2, Command: Proxy, TLVs: []TLV{tlv(TypeAuthority, "example.org")}}},
	{"v2 haproxy tlvs", haproxyTLVs(), Header{Version: 2, Command: Proxy, Family: AFInet, Transport: Stream,
		Source: ap("203.0.113.7:51234"), Dest: ap("192.0.2.10:443"),
		TLVs: []TLV{
			tlv(TypeALPN, "h2"), tlv(TypeAuthority, "www.example.org"), tlv(TypeSSL, sslValue()),
			tlv(TypeUniqueID, uniqueID), tlv(TypeNetNS, "blue"), tlv(0xEA, "\x01vpce-0123456789abcdef0"),
			tlv(TypeNoop, ""), {TypeCRC32C, crcOf(haproxyTLVs())},
		}}},
}

// localWithCRC is a LOCAL header with only a CRC32C TLV, as HAProxy's
// health checks send with proxy-v2-options crc32c.
func localWithCRC() []byte {
	return withCRC(func(sum uint32) []byte {
		return v2Header(0x20, 0x00, func(b *cryptobyte.Builder) {
			b.AddUint8(uint8(TypeCRC32C))
			b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddUint32(sum) })
		})
	})
}

// crcOf returns the value of the last 4 bytes of a header that ends with its
// CRC32C TLV.
func crcOf(h []byte) []byte { return h[len(h)-4:] }

func TestParse(t *testing.T) {
	t.Parallel()
	for _, tt := range good {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// Bytes after the header are not looked at.
			h, n, err := Parse(append(tt.in[:len(tt.in):len(tt.in)], "\x16\x03\x01 hello"...))
			if err != nil {
				t.Fatal(err)
			}
			if n != len(tt.in) {
				t.Errorf("length %d, want %d", n, len(tt.in))
			}
			if !reflect.DeepEqual(h, tt.want) {
				t.Errorf("got  %+v\nwant %+v", h, tt.want)
			}
		})
	}
}

// TestParsePrefixes: every strict prefix of a header is truncated, and the
// length parse promises is more than the prefix and no more than the header:
// a reader that reads up to it never reads past the header.
func TestParsePrefixes(t *testing.T) {
	t.Parallel()
	for _, tt := range good {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for i := range len(tt.in) {
				_, n, err := parse(tt.in[:i], maxV2Bytes)
				if !errors.Is(err, ErrTruncated) || !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("prefix of %d bytes: %v, want ErrTruncated", i, err)
				}
				if n <= i || n > len(tt.in) {
					t.Fatalf("prefix of %d bytes: parse wants %d bytes of a %d-byte header", i, n, len(tt.in))
				}
			}
		})
	}
}

// TestAppendBinary: what Parse accepted encodes back to a header Parse
// reads the same; version 2 headers encode to the very same bytes.
func TestAppendBinary(t *testing.T) {
	t.Parallel()
	for _, tt := range good {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, _, err := Parse(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			enc, err := h.AppendBinary([]byte("prefix"))
			if err != nil {
				t.Fatal(err)
			}
			enc, ok := bytes.CutPrefix(enc, []byte("prefix"))
			if !ok {
				t.Fatalf("AppendBinary lost what it appended to: %q", enc)
			}
			if h.Version == 2 && !bytes.Equal(enc, tt.in) {
				t.Errorf("re-encoded\n%x\nwant\n%x", enc, tt.in)
			}
			h2, n, err := Parse(enc)
			if err != nil || n != len(enc) || !reflect.DeepEqual(h, h2) {
				t.Errorf("re-parsed %+v, %d, %v; want %+v", h2, n, err, h)
			}
		})
	}
}

func TestAppendBinaryComputesCRC(t *testing.T) {
	t.Parallel()
	h := Header{Version: 2, Command: Proxy, Family: AFInet6, Transport: Stream,
		Source: ap("[2001:db8::1]:1"), Dest: ap("[2001:db8::2]:2"),
		TLVs: []TLV{tlv(TypeAuthority, "example.org"), {Type: TypeCRC32C}}}
	enc, err := h.AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := Parse(enc) // verifies the checksum
	if err != nil {
		t.Fatal(err)
	}
	want := withCRC(func(sum uint32) []byte {
		return v2Header(0x21, 0x21, func(b *cryptobyte.Builder) {
			addAddrs("[2001:db8::1]:1", "[2001:db8::2]:2")(b)
			addTLV(b, TypeAuthority, "example.org")
			b.AddUint8(uint8(TypeCRC32C))
			b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddUint32(sum) })
		})
	})
	if !bytes.Equal(enc, want) {
		t.Errorf("encoded\n%x\nwant\n%x", enc, want)
	}
	if v, _ := got.Lookup(TypeCRC32C); !bytes.Equal(v, crcOf(want)) {
		t.Errorf("CRC32C %x, want %x", v, crcOf(want))
	}
}

func TestAppendBinaryRefuses(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		h    Header
	}{
		{"version 3", Header{Version: 3}},
		{"v1 local", Header{Version: 1, Command: Local}},
		{"v1 tlv", Header{Version: 1, Command: Proxy, TLVs: []TLV{tlv(TypeALPN, "h2")}}},
		{"v1 udp", Header{Version: 1, Command: Proxy, Family: AFInet, Transport: Datagram, Source: ap("192.0.2.1:1"), Dest: ap("192.0.2.2:2")}},
		{"v1 unix", Header{Version: 1, Command: Proxy, Family: AFUnix, Transport: Stream, UnixSource: "/a"}},
		{"v1 tcp4 with ipv6", Header{Version: 1, Command: Proxy, Family: AFInet, Transport: Stream, Source: ap("[2001:db8::1]:1"), Dest: ap("192.0.2.2:2")}},
		{"v2 inet with ipv6", Header{Version: 2, Command: Proxy, Family: AFInet, Transport: Stream, Source: ap("[2001:db8::1]:1"), Dest: ap("192.0.2.2:2")}},
		{"v2 inet without addresses", Header{Version: 2, Command: Proxy, Family: AFInet, Transport: Stream}},
		{"v2 command 2", Header{Version: 2, Command: 2}},
		{"v2 family 4", Header{Version: 2, Command: Proxy, Family: 4, Transport: Stream}},
		{"v2 unix path too long", Header{Version: 2, Command: Proxy, Family: AFUnix, Transport: Stream, UnixSource: strings.Repeat("x", 109)}},
		{"v2 tlv too long", Header{Version: 2, Command: Local, TLVs: []TLV{{Type: 0xE0, Value: make([]byte, 0x10000)}}}},
		{"v2 tlvs too long", Header{Version: 2, Command: Local, TLVs: []TLV{{Type: 0xE0, Value: make([]byte, 0xffff)}, {Type: 0xE1}}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, err := tt.h.AppendBinary([]byte("keep"))
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("err %v, want ErrMalformed", err)
			}
			if string(b) != "keep" {
				t.Errorf("AppendBinary changed its buffer to %q on failure", b)
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	t.Parallel()
	v4 := addAddrs("192.0.2.1:1", "192.0.2.2:2")
	for _, tt := range []struct {
		name string
		in   []byte
		err  error
	}{
		{"tls hello", []byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01}, ErrNotProxy},
		{"http", []byte("GET / HTTP/1.1\r\n"), ErrNotProxy},
		{"proxy without space", []byte("PROXY\r\n"), ErrNotProxy},
		{"v2 signature broken", []byte("\r\n\r\n\x00\r\nQUIX\n\x21\x11\x00\x00"), ErrNotProxy},

		{"v1 lower-case protocol", []byte("PROXY tcp4 192.0.2.1 192.0.2.2 1 2\r\n"), ErrMalformed},
		{"v1 udp4", []byte("PROXY UDP4 192.0.2.1 192.0.2.2 1 2\r\n"), ErrMalformed},
		{"v1 family mismatch", []byte("PROXY TCP4 2001:db8::1 192.0.2.2 1 2\r\n"), ErrMalformed},
		{"v1 tcp6 with ipv4", []byte("PROXY TCP6 192.0.2.1 2001:db8::2 1 2\r\n"), ErrMalformed},
		{"v1 zone", []byte("PROXY TCP6 fe80::1%eth0 fe80::2 1 2\r\n"), ErrMalformed},
		{"v1 leading zero address", []byte("PROXY TCP4 192.0.2.01 192.0.2.2 1 2\r\n"), ErrMalformed},
		{"v1 leading zero port", []byte("PROXY TCP4 192.0.2.1 192.0.2.2 01 2\r\n"), ErrMalformed},
		{"v1 port too big", []byte("PROXY TCP4 192.0.2.1 192.0.2.2 65536 2\r\n"), ErrMalformed},
		{"v1 signed port", []byte("PROXY TCP4 192.0.2.1 192.0.2.2 +1 2\r\n"), ErrMalformed},
		{"v1 double space", []byte("PROXY TCP4 192.0.2.1  192.0.2.2 1 2\r\n"), ErrMalformed},
		{"v1 extra field", []byte("PROXY TCP4 192.0.2.1 192.0.2.2 1 2 3\r\n"), ErrMalformed},
		{"v1 missing field", []byte("PROXY TCP4 192.0.2.1 192.0.2.2 1\r\n"), ErrMalformed},
		{"v1 lone LF", []byte("PROXY TCP4 192.0.2.1 192.0.2.2 1 2\n"), ErrMalformed},
		{"v1 CR inside", []byte("PROXY TCP4 192.0.2.1\r192.0.2.2 1 2\r\n"), ErrMalformed},
		{"v1 CR inside, no LF yet", []byte("PROXY UNKNOWN \r more"), ErrMalformed},
		{"v1 unknown glued", []byte("PROXY UNKNOWNX\r\n"), ErrMalformed},
		{"v1 garbage, no LF yet", []byte("PROXY GARBAGE-GARBAGE"), ErrMalformed},
		{"v1 too many fields, no LF yet", []byte("PROXY TCP4 1 2 3 4 5"), ErrMalformed},
		{"v1 CR before the last field", []byte("PROXY TCP4 192.0.2.1 192.0.2.2\r"), ErrMalformed},
		{"v1 longer than 107 bytes", []byte("PROXY UNKNOWN " + strings.Repeat("x", 92) + "\r\n"), ErrTooLarge},
		{"v1 no CRLF in 107 bytes", []byte("PROXY UNKNOWN " + strings.Repeat("x", 200)), ErrTooLarge},

		{"v2 version 1", v2Header(0x11, 0x11, v4), ErrMalformed},
		{"v2 version 3", v2Header(0x31, 0x11, v4), ErrMalformed},
		{"v2 command 2", v2Header(0x22, 0x11, v4), ErrMalformed},
		{"v2 family 4", v2Header(0x21, 0x41, v4), ErrMalformed},
		{"v2 transport 3", v2Header(0x21, 0x13, v4), ErrMalformed},
		{"v2 inet without transport", v2Header(0x21, 0x10, v4), ErrMalformed},
		{"v2 unspec with transport", v2Header(0x21, 0x01, v4), ErrMalformed},
		{"v2 short inet block", v2Header(0x21, 0x11, func(b *cryptobyte.Builder) { b.AddBytes(make([]byte, 11)) }), ErrMalformed},
		{"v2 short inet6 block", v2Header(0x21, 0x21, v4), ErrMalformed},
		{"v2 short unix block", v2Header(0x21, 0x31, func(b *cryptobyte.Builder) { b.AddBytes(make([]byte, 215)) }), ErrMalformed},
		{"v2 tlv overrun", v2Header(0x21, 0x11, func(b *cryptobyte.Builder) { v4(b); b.AddBytes([]byte{0x01, 0x00, 0x05, 'h', '2'}) }), ErrMalformed},
		{"v2 half a tlv header", v2Header(0x21, 0x11, func(b *cryptobyte.Builder) { v4(b); b.AddBytes([]byte{0x01, 0x00}) }), ErrMalformed},
		{"v2 crc mismatch", v2Header(0x21, 0x11, func(b *cryptobyte.Builder) { v4(b); addTLV(b, TypeCRC32C, "\x01\x02\x03\x04") }), ErrMalformed},
		{"v2 crc of 3 bytes", v2Header(0x21, 0x11, func(b *cryptobyte.Builder) { v4(b); addTLV(b, TypeCRC32C, "\x01\x02\x03") }), ErrMalformed},
		{"v2 crc twice", withCRC(func(sum uint32) []byte {
			return v2Header(0x21, 0x11, func(b *cryptobyte.Builder) {
				v4(b)
				for range 2 {
					b.AddUint8(uint8(TypeCRC32C))
					b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddUint32(sum) })
				}
			})
		}), ErrMalformed},
		{"v2 unique id of 129 bytes", v2Header(0x21, 0x11, func(b *cryptobyte.Builder) { v4(b); addTLV(b, TypeUniqueID, uniqueID+"x") }), ErrMalformed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, n, err := Parse(tt.in); !errors.Is(err, tt.err) || n != 0 {
				t.Fatalf("Parse: %d, %v; want %v", n, err, tt.err)
			}
		})
	}
}

// TestParseV2Bound: one bound, checked on the fixed part before the body
// is read.
func TestParseV2Bound(t *testing.T) {
	t.Parallel()
	in := v2Header(0x21, 0x11, func(b *cryptobyte.Builder) {
		addAddrs("192.0.2.1:1", "192.0.2.2:2")(b)
		addTLV(b, 0xE0, strings.Repeat("x", 100))
	})
	if _, n, err := parse(in, len(in)); err != nil || n != len(in) {
		t.Errorf("at the bound: %d, %v", n, err)
	}
	if _, _, err := parse(in[:v2FixedLen], len(in)-1); !errors.Is(err, ErrTooLarge) {
		t.Errorf("one byte over the bound, fixed part only: %v, want ErrTooLarge", err)
	}
	// The protocol's own bound: a 65535-byte body parses.
	big := v2Header(0x20, 0x00, func(b *cryptobyte.Builder) { addTLV(b, TypeNoop, strings.Repeat("x", 0xffff-3)) })
	if _, n, err := Parse(big); err != nil || n != maxV2Bytes {
		t.Errorf("largest header: %d, %v", n, err)
	}
}

func TestHeaderAddrs(t *testing.T) {
	t.Parallel()
	for _, tt := range good {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			src, dst, ok := tt.want.Addrs()
			wantOK := tt.want.Command == Proxy && (tt.want.Family == AFInet || tt.want.Family == AFInet6)
			if ok != wantOK {
				t.Fatalf("Addrs ok = %v, want %v", ok, wantOK)
			}
			if ok && (src != tt.want.Source || dst != tt.want.Dest) {
				t.Errorf("Addrs %v %v", src, dst)
			}
			if !ok && (src.IsValid() || dst.IsValid()) {
				t.Errorf("Addrs without ok returned %v %v", src, dst)
			}
		})
	}
}

func TestParseSSL(t *testing.T) {
	t.Parallel()
	h, _, err := Parse(haproxyTLVs())
	if err != nil {
		t.Fatal(err)
	}
	v, ok := h.Lookup(TypeSSL)
	if !ok {
		t.Fatal("no SSL TLV")
	}
	ssl, err := ParseSSL(v)
	if err != nil {
		t.Fatal(err)
	}
	if ssl.Client != ClientSSL|ClientCertConn|ClientCertSess || ssl.Verify != 0 || len(ssl.TLVs) != 5 {
		t.Errorf("SSL %+v", ssl)
	}
	for typ, want := range map[Type]string{
		TypeSSLVersion: "TLSv1.3", TypeSSLCN: "client.example.org", TypeSSLCipher: "TLS_AES_256_GCM_SHA384",
		TypeSSLSigAlg: "RSA-SHA256", TypeSSLKeyAlg: "RSA2048",
	} {
		if got, ok := ssl.Lookup(typ); !ok || string(got) != want {
			t.Errorf("sub-TLV 0x%02x = %q, %v; want %q", typ, got, ok, want)
		}
	}
	if _, ok := ssl.Lookup(TypeALPN); ok {
		t.Error("found a sub-TLV that is not there")
	}
	for _, bad := range []string{"", "\x01\x00\x00\x00", "\x01\x00\x00\x00\x00\x21\x00\x05TLS"} {
		if _, err := ParseSSL([]byte(bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseSSL(%q): %v, want ErrMalformed", bad, err)
		}
	}
}

func BenchmarkParse(b *testing.B) {
	for _, bm := range []struct {
		name string
		in   []byte
	}{
		{"v1-tcp4", []byte("PROXY TCP4 203.0.113.7 192.0.2.10 51234 443\r\n")},
		{"v1-tcp6", []byte("PROXY TCP6 2001:db8:85a3::8a2e:370:7334 2001:db8::10 51234 443\r\n")},
		{"v2-tcp4", v2Header(0x21, 0x11, addAddrs("203.0.113.7:51234", "192.0.2.10:443"))},
		{"v2-tcp6", v2Header(0x21, 0x21, addAddrs("[2001:db8:85a3::8a2e:370:7334]:51234", "[2001:db8::10]:443"))},
		{"v2-haproxy-tlvs-crc", haproxyTLVs()},
	} {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bm.in)))
			for b.Loop() {
				if _, _, err := Parse(bm.in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

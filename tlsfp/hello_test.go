package tlsfp

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"testing"

	"golang.org/x/crypto/cryptobyte"
)

// ext is one extension of a synthetic hello.
type ext struct {
	typ  uint16
	data []byte
}

// spec describes a synthetic ClientHello.
type spec struct {
	version uint16
	ciphers []uint16
	exts    []ext
	noExts  bool // omit the extensions block (TLS 1.2 and earlier)
}

// build marshals s as a ClientHello handshake message.
func (s spec) build() []byte {
	var b cryptobyte.Builder
	b.AddUint8(handshakeTypeClientHelo)
	b.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) {
		b.AddUint16(s.version)
		b.AddBytes(make([]byte, 32))
		b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) {})
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
			for _, c := range s.ciphers {
				b.AddUint16(c)
			}
		})
		b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddUint8(0) })
		if s.noExts {
			return
		}
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
			for _, e := range s.exts {
				b.AddUint16(e.typ)
				b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(e.data) })
			}
		})
	})
	return b.BytesOrPanic()
}

func sni(name string) ext {
	var b cryptobyte.Builder
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
		b.AddUint8(0)
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes([]byte(name)) })
	})
	return ext{extServerName, b.BytesOrPanic()}
}

func alpn(protos ...string) ext {
	var b cryptobyte.Builder
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
		for _, p := range protos {
			b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes([]byte(p)) })
		}
	})
	return ext{extALPN, b.BytesOrPanic()}
}

func versions(vs ...uint16) ext {
	var b cryptobyte.Builder
	b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) {
		for _, v := range vs {
			b.AddUint16(v)
		}
	})
	return ext{extSupportedVersions, b.BytesOrPanic()}
}

func sigalgs(vs ...uint16) ext {
	var b cryptobyte.Builder
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
		for _, v := range vs {
			b.AddUint16(v)
		}
	})
	return ext{extSignatureAlgorithms, b.BytesOrPanic()}
}

// records wraps msg in handshake records whose fragments have the given
// sizes; the last size repeats until msg is used up.
func records(msg []byte, sizes ...int) []byte {
	var out []byte
	for i := 0; len(msg) > 0; i++ {
		n := min(sizes[min(i, len(sizes)-1)], len(msg))
		out = append(out, recordTypeHandshake, 3, 1, byte(n>>8), byte(n))
		out = append(out, msg[:n]...)
		msg = msg[n:]
	}
	return out
}

func seq(from, n int) []uint16 {
	out := make([]uint16, n)
	for i := range out {
		out[i] = uint16(from + i)
	}
	return out
}

// hashedJA4 computes a hashed JA4 form from its raw form as the JA4
// specification says, independently of the package: the first 12 hex
// digits of SHA-256 of the cipher list, then of the extension list joined
// to the signature algorithms with "_"; 12 zeros for an empty list.
func hashedJA4(raw string) string {
	parts := strings.SplitN(raw, "_", 4)
	for len(parts) < 4 {
		parts = append(parts, "")
	}
	hash := func(s string) string {
		if s == "" {
			return "000000000000"
		}
		sum := sha256.Sum256([]byte(s))
		return hex.EncodeToString(sum[:])[:12]
	}
	exts := parts[2]
	if parts[3] != "" {
		exts += "_" + parts[3]
	}
	if parts[2] == "" {
		exts = ""
	}
	return parts[0] + "_" + hash(parts[1]) + "_" + hash(exts)
}

// TestHashedJA4 checks hashedJA4 on the reference vectors, whose hashed
// forms come from FoxIO's captures: it is a reference only if it agrees.
func TestHashedJA4(t *testing.T) {
	t.Parallel()
	for _, v := range loadVectors(t) { // 160 of them with raw forms
		e := v.Expected
		if e.JA4R == "" {
			continue // QUIC hellos carry the hashed form only
		}
		if got := hashedJA4(e.JA4R); got != e.JA4 {
			t.Errorf("%s: hashedJA4(ja4_r) = %s, want ja4 %s", v.name(), got, e.JA4)
		}
		if got := hashedJA4(e.JA4RO); got != e.JA4O {
			t.Errorf("%s: hashedJA4(ja4_ro) = %s, want ja4_o %s", v.name(), got, e.JA4O)
		}
	}
}

func TestFingerprintSynthetic(t *testing.T) {
	t.Parallel()
	// Every case states the raw forms and the version; the hashed forms
	// are checked against hashedJA4 of the raw ones, and against the
	// literal where the case gives one.
	tests := []struct {
		name        string
		spec        spec
		quic        bool
		ja4r, ja4ro string
		ja4, ja4o   string // "" = checked through hashedJA4 only
		version     string // "" = none known
	}{
		{
			name: "no ciphers, no extensions",
			spec: spec{version: 0x0303, noExts: true},
			ja4r: "t12i000000__", ja4ro: "t12i000000__",
			ja4: "t12i000000_000000000000_000000000000", ja4o: "t12i000000_000000000000_000000000000",
			version: "1.2",
		},
		{
			// JA4 takes the highest listed version, even an unknown one,
			// and legacy_version only when the list has none but GREASE.
			name:    "supported_versions of zero",
			spec:    spec{version: 0x0303, ciphers: []uint16{0x1301}, exts: []ext{versions(0x0000)}},
			ja4r:    "t00i010100_1301_002b",
			ja4ro:   "t00i010100_1301_002b",
			version: "",
		},
		{
			name:    "supported_versions of GREASE only",
			spec:    spec{version: 0x0303, ciphers: []uint16{0x1301}, exts: []ext{versions(0x0a0a)}},
			ja4r:    "t12i010100_1301_002b",
			ja4ro:   "t12i010100_1301_002b",
			ja4:     "t12i010100_0f2cb44170f4_b9a491fefe05",
			version: "1.2",
		},
		{
			name: "empty extensions block",
			spec: spec{version: 0x0303, ciphers: []uint16{0x1301}},
			ja4r: "t12i010000_1301_", ja4ro: "t12i010000_1301_",
			ja4: "t12i010000_0f2cb44170f4_000000000000", ja4o: "t12i010000_0f2cb44170f4_000000000000",
			version: "1.2",
		},
		{
			name: "TLS 1.0",
			spec: spec{version: 0x0301, ciphers: []uint16{0x1301}, noExts: true},
			ja4r: "t10i010000_1301_", ja4ro: "t10i010000_1301_",
			ja4:     "t10i010000_0f2cb44170f4_000000000000",
			version: "1.0",
		},
		{
			name: "SSLv3",
			spec: spec{version: 0x0300, ciphers: []uint16{0x1301}, noExts: true},
			ja4r: "ts3i010000_1301_", ja4ro: "ts3i010000_1301_",
			ja4:     "ts3i010000_0f2cb44170f4_000000000000",
			version: "ssl3",
		},
		{
			name: "unknown version",
			spec: spec{version: 0x7f1c, ciphers: []uint16{0x1301}, noExts: true},
			ja4r: "t00i010000_1301_", ja4ro: "t00i010000_1301_",
			ja4:     "t00i010000_0f2cb44170f4_000000000000",
			version: "",
		},
		{
			name: "more than 99 ciphers",
			spec: spec{version: 0x0303, ciphers: seq(1, 120), noExts: true},
			ja4r: "t12i990000_" + hexList(seq(1, 120)) + "_", ja4ro: "t12i990000_" + hexList(seq(1, 120)) + "_",
			ja4:     "t12i990000_0f8860b09f90_000000000000",
			version: "1.2",
		},
		{
			name: "only GREASE",
			spec: spec{
				version: 0x0303,
				ciphers: []uint16{0x0a0a, 0x1a1a},
				exts:    []ext{{typ: 0x2a2a}, {typ: 0xfafa, data: []byte{0}}},
			},
			ja4r: "t12i000000__", ja4ro: "t12i000000__",
			ja4: "t12i000000_000000000000_000000000000", ja4o: "t12i000000_000000000000_000000000000",
			version: "1.2",
		},
		{
			name: "GREASE ignored everywhere",
			spec: spec{
				version: 0x0303,
				ciphers: []uint16{0x3a3a, 0xc02f, 0x1301},
				exts: []ext{
					{typ: 0x4a4a}, versions(0x5a5a, 0x0304, 0x0303),
					sigalgs(0x6a6a, 0x0403), {typ: extSupportedGroups, data: []byte{0, 2, 0x7a, 0x7a}},
				},
			},
			ja4:     "t13i0203" + "00_c1929292aa6b_9a0586ea5dd0",
			ja4r:    "t13i020300_1301,c02f_000a,000d,002b_0403",
			ja4ro:   "t13i020300_c02f,1301_002b,000d,000a_0403",
			version: "1.3",
		},
		{
			name: "SNI and ALPN only: sorted list empty, wire list hashed",
			spec: spec{version: 0x0303, ciphers: []uint16{0x1301}, exts: []ext{sni("a.example"), alpn("h2")}},
			ja4:  "t12d0102h2_0f2cb44170f4_000000000000", ja4r: "t12d0102h2_1301_",
			ja4ro:   "t12d0102h2_1301_0000,0010",
			version: "1.2",
		},
		{
			name: "QUIC",
			spec: spec{
				version: 0x0303, ciphers: []uint16{0x1301},
				exts: []ext{sni("a.example"), alpn("h3"), versions(0x0304), sigalgs(0x0403)},
			},
			quic:    true,
			ja4:     "q13d0104h3_0f2cb44170f4_3953dc75acc4",
			ja4r:    "q13d0104h3_1301_000d,002b_0403",
			ja4ro:   "q13d0104h3_1301_0000,0010,002b,000d_0403",
			ja4o:    "q13d0104h3_0f2cb44170f4_aa4cf9a49251",
			version: "1.3",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, err := ParseHandshake(tt.spec.build())
			if err != nil {
				t.Fatal(err)
			}
			fp := h.Fingerprint(tt.quic)
			checks := []struct{ field, got, want string }{
				{"ja4_r", fp.JA4R, tt.ja4r}, {"ja4_ro", fp.JA4RO, tt.ja4ro},
				{"ja4 (hashed ja4_r)", fp.JA4, hashedJA4(tt.ja4r)}, {"ja4_o (hashed ja4_ro)", fp.JA4O, hashedJA4(tt.ja4ro)},
				{"tls_version", fp.TLSVersion, tt.version},
			}
			if tt.ja4 != "" {
				checks = append(checks, struct{ field, got, want string }{"ja4", fp.JA4, tt.ja4})
			}
			if tt.ja4o != "" {
				checks = append(checks, struct{ field, got, want string }{"ja4_o", fp.JA4O, tt.ja4o})
			}
			for _, c := range checks {
				if c.got != c.want {
					t.Errorf("%s:\n got %q\nwant %q", c.field, c.got, c.want)
				}
			}
		})
	}
}

// hexList writes vs as JA4's raw lists do: four hex digits each, joined
// with ",".
func hexList(vs []uint16) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = fmt.Sprintf("%04x", v)
	}
	return strings.Join(parts, ",")
}

// TestALPN covers the ALPN rules of the JA4 specification: first and last
// characters, the hex rule for non-alphanumeric values, one character
// repeated, "00" when there is none.
func TestALPN(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ext  *ext
		want string
		alpn string
	}{
		{"h2", new(alpn("h2", "http/1.1")), "h2", "h2"},
		{"http/1.1", new(alpn("http/1.1")), "h1", "http/1.1"},
		{"one character", new(alpn("h")), "hh", "h"},
		{"one non-alphanumeric byte", new(alpn("\xab")), "ab", "\xab"},
		{"two non-alphanumeric bytes", new(alpn("\xab\xcd")), "ad", "\xab\xcd"},
		{"non-alphanumeric last", new(alpn("0\xab")), "3b", "0\xab"},
		{"non-alphanumeric first", new(alpn("\xab0")), "a0", "\xab0"},
		{"long with non-alphanumeric last", new(alpn("0\x12\x34\x56\x78\xab")), "3b", "0\x12\x34\x56\x78\xab"},
		{"digits", new(alpn("0123")), "03", "0123"},
		{"punctuation", new(alpn("h2/")), "6f", "h2/"},
		{"empty list", new(alpn()), "00", ""},
		{"empty value", new(alpn("")), "00", ""},
		{"malformed", &ext{extALPN, []byte{0, 9, 2}}, "00", ""},
		{"absent", nil, "00", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := spec{version: 0x0303, ciphers: []uint16{0x1301}, exts: []ext{{typ: extSupportedGroups}}}
			if tt.ext != nil {
				s.exts = append(s.exts, *tt.ext)
			}
			h, err := ParseHandshake(s.build())
			if err != nil {
				t.Fatal(err)
			}
			fp := h.Fingerprint(false)
			if got := fp.JA4[8:10]; got != tt.want {
				t.Errorf("ALPN part = %q, want %q (JA4 %s)", got, tt.want, fp.JA4)
			}
			if fp.ALPN != tt.alpn {
				t.Errorf("ALPN = %q, want %q", fp.ALPN, tt.alpn)
			}
		})
	}
}

func TestFingerprintFacts(t *testing.T) {
	t.Parallel()
	msg := spec{
		version: 0x0303,
		ciphers: []uint16{0x0a0a, 0x1301, 0x1302},
		exts: []ext{
			{typ: 0x1a1a}, sni("www.example.org"), alpn("h2", "http/1.1"), versions(0x0304, 0x0303),
			{typ: extECH, data: []byte{1}}, {typ: extPreSharedKey, data: []byte{0}},
		},
	}.build()
	h, err := ParseHandshake(msg)
	if err != nil {
		t.Fatal(err)
	}
	fp := h.Fingerprint(false)
	want := Fingerprint{
		TLSVersion: "1.3", SNI: "www.example.org", ALPN: "h2",
		Resumption: true, ECH: true, GREASE: true, Ciphers: 2, Extensions: 5,
	}
	got := *fp
	got.JA4, got.JA4R, got.JA4O, got.JA4RO, got.JA4Session = "", "", "", "", ""
	if got != want {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	// The session's JA4: the same hello without pre_shared_key, one
	// extension fewer and another hash.
	if !strings.HasPrefix(fp.JA4Session, "t13d0204h2_") || fp.JA4Session == fp.JA4 || fp.JA4[:10] != "t13d0205h2" {
		t.Errorf("JA4 %s, JA4Session %s: want t13d0205h2_… and t13d0204h2_…", fp.JA4, fp.JA4Session)
	}
	if h.Len != len(msg) || !bytes.Equal(h.CompressionMethods, []byte{0}) || len(h.ALPN) != 2 {
		t.Errorf("hello = %+v", h)
	}
}

// TestRecordSplits feeds hellos split over several records, including
// records of one byte, which split even the handshake header.
func TestRecordSplits(t *testing.T) {
	t.Parallel()
	vs := loadVectors(t)
	v := vs[0]
	want, err := ParseHandshake(v.handshake)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		sizes []int
	}{
		{"one record", []int{1 << 14}},
		{"two records", []int{100, 1 << 14}},
		{"split handshake header", []int{2, 1 << 14}},
		{"one-byte records", []int{1}},
		{"uneven", []int{3, 1, 700, 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := records(v.handshake, tt.sizes...)
			h, err := ParseRecords(append(rec, 0x14, 3, 3, 0, 1, 1)) // plus a trailing record
			if err != nil {
				t.Fatal(err)
			}
			if got, want := h.Fingerprint(false).JA4RO, want.Fingerprint(false).JA4RO; got != want {
				t.Errorf("JA4_ro = %s, want %s", got, want)
			}
		})
	}
}

// TestHelloInsideLongerRecord: a record may go on after the hello's last
// byte, in bytes not sent yet. The hello is complete at its last byte, from
// one record or several.
func TestHelloInsideLongerRecord(t *testing.T) {
	t.Parallel()
	v := loadVectors(t)[0]
	want, err := ParseHandshake(v.handshake)
	if err != nil {
		t.Fatal(err)
	}
	// longer declares 50 more bytes in the last record than b holds.
	longer := func(b []byte, lastHeader int) []byte {
		n := int(b[lastHeader+3])<<8 | int(b[lastHeader+4]) + 50
		b[lastHeader+3], b[lastHeader+4] = byte(n>>8), byte(n)
		return slices.Clip(b) // nothing past the hello, not even capacity
	}
	one := records(v.handshake, 1<<14)
	two := records(v.handshake, 3, 1<<14)
	for name, rec := range map[string][]byte{
		"one record":  longer(one, 0),
		"two records": longer(two, recordHeaderLen+3),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h, err := ParseRecords(rec)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := h.Fingerprint(false).JA4RO, want.Fingerprint(false).JA4RO; got != want {
				t.Errorf("JA4_ro = %s, want %s", got, want)
			}
			// Through the listener, byte by byte, without the rest of
			// the record.
			client, server := net.Pipe()
			defer client.Close()
			c := newConn(server, &Config{})
			defer c.Close()
			go func() {
				for i := range rec {
					if _, err := client.Write(rec[i : i+1]); err != nil {
						return
					}
				}
			}()
			got := make([]byte, len(rec))
			if _, err := io.ReadFull(c, got); err != nil {
				t.Fatal(err)
			}
			if fp := c.Fingerprint(); fp == nil || fp.JA4RO != want.Fingerprint(false).JA4RO {
				t.Errorf("listener: fingerprint %+v (%v)", fp, c.Err())
			}
		})
	}
}

// TestPrefixesTruncated checks that every strict prefix of every vector
// returns ErrTruncated from both parsers.
func TestPrefixesTruncated(t *testing.T) {
	t.Parallel()
	for _, v := range loadVectors(t) {
		t.Run(v.name(), func(t *testing.T) {
			t.Parallel()
			for n := range len(v.handshake) {
				if _, err := ParseHandshake(v.handshake[:n]); !errors.Is(err, ErrTruncated) || !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("ParseHandshake(%d of %d bytes) = %v, want ErrTruncated", n, len(v.handshake), err)
				}
			}
			for n := range len(v.records) {
				if _, err := ParseRecords(v.records[:n]); !errors.Is(err, ErrTruncated) {
					t.Fatalf("ParseRecords(%d of %d bytes) = %v, want ErrTruncated", n, len(v.records), err)
				}
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	good := spec{version: 0x0303, ciphers: []uint16{0x1301}, exts: []ext{sni("a.example")}}.build()
	body := func(f func(b *cryptobyte.Builder)) []byte {
		var b cryptobyte.Builder
		b.AddUint8(1)
		b.AddUint24LengthPrefixed(f)
		return b.BytesOrPanic()
	}
	header := func(b *cryptobyte.Builder) {
		b.AddUint16(0x0303)
		b.AddBytes(make([]byte, 32))
		b.AddUint8(0)
	}
	tests := []struct {
		name    string
		records bool
		in      []byte
		want    error
	}{
		{"empty", false, nil, ErrTruncated},
		{"server hello", false, append([]byte{2}, good[1:]...), ErrMalformed},
		{"trailing byte", false, append(good[:len(good):len(good)], 0), ErrMalformed},
		{"odd cipher list", false, body(func(b *cryptobyte.Builder) {
			header(b)
			b.AddUint16(3)
			b.AddBytes([]byte{0x13, 0x01, 0x13, 1, 0})
		}), ErrMalformed},
		{"cipher list overruns body", false, body(func(b *cryptobyte.Builder) {
			header(b)
			b.AddUint16(0xfffe)
		}), ErrMalformed},
		{"huge extensions length", false, body(func(b *cryptobyte.Builder) {
			header(b)
			b.AddUint16(0)
			b.AddUint8(0)
			b.AddUint16(0xffff)
		}), ErrMalformed},
		{"extension overruns block", false, body(func(b *cryptobyte.Builder) {
			header(b)
			b.AddUint16(0)
			b.AddUint8(0)
			b.AddUint16(4)
			b.AddBytes([]byte{0, 0, 0, 9})
		}), ErrMalformed},
		{"bytes after extensions", false, body(func(b *cryptobyte.Builder) {
			header(b)
			b.AddUint16(0)
			b.AddUint8(0)
			b.AddUint16(0)
			b.AddUint8(7)
		}), ErrMalformed},
		{"no random", false, body(func(b *cryptobyte.Builder) { b.AddUint16(0x0303) }), ErrMalformed},
		{"plain HTTP", true, []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), ErrNotTLS},
		{"SSLv2 hello", true, []byte{0x80, 0x2e, 0x01, 0x00, 0x02}, ErrNotTLS},
		{"alert record", true, []byte{0x15, 3, 1, 0, 2, 2, 40}, ErrNotTLS},
		{"record too long", true, []byte{0x16, 3, 1, 0x40, 0x01}, ErrMalformed},
		{"alert inside hello", true, append(records(good[:10], 1<<14), 0x15, 3, 3, 0, 2, 2, 40), ErrMalformed},
		{"finished, not hello", true, records(append([]byte{20}, good[1:]...), 1<<14), ErrMalformed},
		{"huge length", true, []byte{0x16, 3, 1, 0, 4, 1, 0xff, 0xff, 0xff}, ErrTruncated},
		{"malformed body in records", true, records(body(func(b *cryptobyte.Builder) { b.AddUint16(0x0303) }), 1<<14), ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			parse := ParseHandshake
			if tt.records {
				parse = ParseRecords
			}
			h, err := parse(tt.in)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if h != nil {
				t.Errorf("hello %+v with error", h)
			}
		})
	}
}

// TestLenientExtensions checks that malformed extension bodies are recorded
// as empty fields, not rejected.
func TestLenientExtensions(t *testing.T) {
	t.Parallel()
	msg := spec{version: 0x0303, ciphers: []uint16{0x1301}, exts: []ext{
		{extServerName, []byte{0, 5, 0}}, {extSupportedVersions, []byte{9}}, {extSignatureAlgorithms, nil},
	}}.build()
	h, err := ParseHandshake(msg)
	if err != nil {
		t.Fatal(err)
	}
	fp := h.Fingerprint(false)
	if fp.JA4[:10] != "t12d010300" || fp.SNI != "" || h.SupportedVersions != nil {
		t.Errorf("JA4 %s, SNI %q, versions %v", fp.JA4, fp.SNI, h.SupportedVersions)
	}
}

func TestIsGREASE(t *testing.T) {
	t.Parallel()
	n := 0
	for v := range 1 << 16 {
		if IsGREASE(uint16(v)) {
			n++
			if v&0xff != v>>8 || v&0x0f != 0x0a {
				t.Errorf("IsGREASE(%#04x)", v)
			}
		}
	}
	if n != 16 {
		t.Errorf("%d GREASE values, want 16", n)
	}
}

// Package tlsfpfuzz holds the fuzz targets of package tlsfp: the
// ClientHello parsers over arbitrary bytes, the capturing Conn, and a
// differential check of the raw-bytes JA4 against the JA4 that tlsfp
// computes from crypto/tls's ClientHelloInfo for the same hello.
//
// Seeds: the 212 ClientHellos of FoxIO's captures
// (../../tlsfp/testdata/tls-clienthellos.jsonl), the utls browser parrots
// (Chrome's post-quantum hello among them) and synthetic edge cases; and
// the files under testdata/fuzz/.
package tlsfpfuzz

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/maatproxy/maat/internal/testclient"
	"github.com/maatproxy/maat/tlsfp"
)

// ja4Pattern is the shape of every JA4 tlsfp produces.
var ja4Pattern = regexp.MustCompile(`^[tq](13|12|11|10|s3|s2|s1|d1|d2|d3|00)[di]\d{4}[0-9a-zA-Z]{2}_[0-9a-f]{12}_[0-9a-f]{12}$`)

// addSeeds adds the handshake messages of the vectors and the parrots.
func addSeeds(f *testing.F) {
	file, err := os.Open("../../tlsfp/testdata/tls-clienthellos.jsonl")
	if err != nil {
		f.Fatal(err)
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var v struct {
			HandshakeHex string `json:"handshake_hex"`
		}
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			f.Fatal(err)
		}
		b, err := hex.DecodeString(v.HandshakeHex)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, p := range testclient.Parrots() {
		msg, err := testclient.HelloMessage(p.ID, "www.example.org")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(msg)
	}
	f.Add([]byte{})
	f.Add([]byte{1, 0, 0, 0})
	f.Add([]byte{1, 0, 0, 38, 3, 3})
}

// records wraps msg in handshake records of at most size bytes each.
func records(msg []byte, size int) []byte {
	var out []byte
	for len(msg) > 0 {
		n := min(size, len(msg))
		out = append(out, 0x16, 3, 1, byte(n>>8), byte(n))
		out = append(out, msg[:n]...)
		msg = msg[n:]
	}
	return out
}

// checkFingerprint checks the invariants of a fingerprint.
func checkFingerprint(t *testing.T, fp *tlsfp.Fingerprint, quic bool) {
	t.Helper()
	for _, s := range []string{fp.JA4, fp.JA4O} {
		if !ja4Pattern.MatchString(s) {
			t.Fatalf("malformed JA4 %q", s)
		}
	}
	a := fp.JA4[:10]
	if fp.JA4O[:10] != a || fp.JA4R[:10] != a || fp.JA4RO[:10] != a {
		t.Fatalf("part a differs: %s %s %s %s", fp.JA4, fp.JA4O, fp.JA4R, fp.JA4RO)
	}
	if (a[0] == 'q') != quic || fp.QUIC != quic {
		t.Fatalf("JA4 %s for quic=%v", fp.JA4, quic)
	}
}

// FuzzParseHandshake parses arbitrary bytes as a handshake message. A
// parsed hello gives well-formed fingerprints, the same through TLS records
// of any size, and each strict prefix of it is reported as truncated.
func FuzzParseHandshake(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, msg []byte) {
		h, err := tlsfp.ParseHandshake(msg)
		if err != nil {
			if h != nil || !errors.Is(err, tlsfp.ErrTruncated) && !errors.Is(err, tlsfp.ErrMalformed) {
				t.Fatalf("hello %v with error %v", h, err)
			}
			return
		}
		fp := h.Fingerprint(false)
		checkFingerprint(t, fp, false)
		qfp := h.Fingerprint(true)
		checkFingerprint(t, qfp, true)
		if qfp.JA4[1:] != fp.JA4[1:] || qfp.JA4RO[1:] != fp.JA4RO[1:] {
			t.Fatalf("QUIC and TCP differ beyond the prefix: %s %s", qfp.JA4, fp.JA4)
		}
		for _, size := range []int{1, 7, 1 << 14} {
			hr, err := tlsfp.ParseRecords(records(msg, size))
			if err != nil {
				t.Fatalf("records of %d: %v", size, err)
			}
			if got := hr.Fingerprint(false); *got != *fp {
				t.Fatalf("records of %d: %+v, want %+v", size, got, fp)
			}
		}
		for _, n := range []int{0, len(msg) / 2, len(msg) - 1} {
			if _, err := tlsfp.ParseHandshake(msg[:n]); !errors.Is(err, tlsfp.ErrTruncated) {
				t.Fatalf("prefix of %d bytes: %v, want ErrTruncated", n, err)
			}
		}
	})
}

// FuzzParseRecords parses arbitrary bytes as TLS records.
func FuzzParseRecords(f *testing.F) {
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Add([]byte{0x16, 3, 1, 0, 0, 0x16, 3, 1, 0, 1, 1})
	f.Add([]byte{0x16, 3, 1, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := tlsfp.ParseRecords(b)
		if err != nil {
			if h != nil {
				t.Fatalf("hello with error %v", err)
			}
			if len(b) > 0 && b[0] != 0x16 && !errors.Is(err, tlsfp.ErrNotTLS) {
				t.Fatalf("first byte %#x: %v, want ErrNotTLS", b[0], err)
			}
			return
		}
		checkFingerprint(t, h.Fingerprint(false), false)
	})
}

// FuzzConn writes arbitrary bytes to a capturing Conn: the reader gets
// every byte unchanged (unless the hello is too large), and the outcome
// matches ParseRecords on the same bytes.
func FuzzConn(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, msg []byte) {
		in := records(msg, 300)
		if len(msg) > 0 && msg[0] != 1 {
			in = msg // also raw bytes: plain HTTP, garbage
		}
		client, server := net.Pipe()
		defer client.Close()
		ln := &oneConn{c: server}
		c, err := tlsfp.NewListener(ln, tlsfp.Config{HelloTimeout: time.Minute}).Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		go func() {
			client.Write(in)
			client.Close()
		}()
		got, err := io.ReadAll(c)
		fc := tlsfp.ConnOf(c)
		if errors.Is(fc.Err(), tlsfp.ErrTooLarge) {
			return
		}
		if err != nil || !bytes.Equal(got, in) {
			t.Fatalf("reader got %d bytes (%v), want %d", len(got), err, len(in))
		}
		h, perr := tlsfp.ParseRecords(in)
		switch {
		case perr != nil && fc.Fingerprint() != nil:
			t.Fatalf("Conn fingerprinted what ParseRecords refuses: %v", perr)
		case perr == nil && (fc.Fingerprint() == nil || fc.Fingerprint().JA4RO != h.Fingerprint(false).JA4RO):
			t.Fatalf("Conn: %+v (%v), ParseRecords: %+v", fc.Fingerprint(), fc.Err(), h.Fingerprint(false))
		}
	})
}

// oneConn is a listener that accepts one connection.
type oneConn struct{ c net.Conn }

func (l *oneConn) Accept() (net.Conn, error) { return l.c, nil }
func (l *oneConn) Close() error              { return nil }
func (l *oneConn) Addr() net.Addr            { return l.c.LocalAddr() }

var errStop = errors.New("stop after the ClientHello")

// FuzzDifferential checks that the JA4 of the raw bytes equals the JA4
// that tlsfp computes from the ClientHelloInfo crypto/tls parses from the
// same bytes, whenever crypto/tls accepts the hello far enough to call
// GetConfigForClient.
func FuzzDifferential(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, msg []byte) {
		h, err := tlsfp.ParseHandshake(msg)
		if err != nil || len(msg) > 1<<16 {
			return
		}
		if h.SupportedVersions == nil && (h.Version < tls.VersionTLS10 || h.Version > tls.VersionTLS13) {
			// Without supported_versions crypto/tls reports the versions it
			// supports up to legacy_version, not legacy_version itself.
			return
		}
		if h.SupportedVersions != nil && h.Version != tls.VersionTLS12 &&
			!slices.ContainsFunc(h.SupportedVersions, func(v uint16) bool { return !tlsfp.IsGREASE(v) }) {
			// With it, crypto/tls does not report legacy_version, which
			// JA4 falls back to when the list holds only GREASE.
			return
		}
		client, server := net.Pipe()
		defer client.Close()
		defer server.Close()
		var fromCHI *tlsfp.Fingerprint
		srv := tls.Server(server, &tls.Config{
			GetConfigForClient: func(chi *tls.ClientHelloInfo) (*tls.Config, error) {
				fromCHI, _ = tlsfp.FromClientHelloInfo(chi, false)
				return nil, errStop
			},
		})
		go func() {
			client.Write(records(msg, 1<<14))
			io.Copy(io.Discard, client)
		}()
		srv.SetDeadline(time.Now().Add(10 * time.Second))
		srv.Handshake()
		if fromCHI == nil {
			return // crypto/tls refused the hello before the callback
		}
		raw := h.Fingerprint(false)
		if raw.JA4 != fromCHI.JA4 || raw.JA4R != fromCHI.JA4R || raw.JA4O != fromCHI.JA4O || raw.JA4RO != fromCHI.JA4RO {
			t.Fatalf("raw bytes:\n %s\n %s\nClientHelloInfo:\n %s\n %s", raw.JA4, raw.JA4RO, fromCHI.JA4, fromCHI.JA4RO)
		}
	})
}

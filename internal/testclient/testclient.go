// Package testclient holds test-only TLS clients: utls parrots that send
// the ClientHello of real browsers, a recorder that keeps the bytes a client
// wrote (so that a test can fingerprint the very hello the server saw), and a
// throwaway self-signed certificate for loopback servers. It imports utls,
// which must never reach the edge binary: only tests and generators use it.
//
// Specifications: RFC 8446 (TLS 1.3), RFC 9001 (TLS in QUIC) for the clients;
// the parrots are utls's (github.com/refraction-networking/utls).
package testclient

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"sync"
	"time"

	utls "github.com/refraction-networking/utls"
)

// Parrot is a utls ClientHello parrot of a real client.
type Parrot struct {
	// Name is utls's name for the parrot, e.g. "HelloChrome_133".
	Name string
	// Family and Version name the client it imitates, e.g. "chrome", "133".
	Family, Version string
	// ID selects the parrot in utls.
	ID utls.ClientHelloID
}

// Parrots returns the browser parrots of utls that complete a handshake
// with crypto/tls, newest of each family first.
func Parrots() []Parrot {
	return []Parrot{
		{"HelloChrome_133", "chrome", "133", utls.HelloChrome_133},
		{"HelloChrome_131", "chrome", "131", utls.HelloChrome_131},
		{"HelloChrome_120_PQ", "chrome", "120", utls.HelloChrome_120_PQ},
		{"HelloChrome_120", "chrome", "120", utls.HelloChrome_120},
		{"HelloChrome_115_PQ", "chrome", "115", utls.HelloChrome_115_PQ},
		{"HelloChrome_106_Shuffle", "chrome", "106", utls.HelloChrome_106_Shuffle},
		{"HelloChrome_102", "chrome", "102", utls.HelloChrome_102},
		{"HelloChrome_96", "chrome", "96", utls.HelloChrome_96},
		{"HelloChrome_87", "chrome", "87", utls.HelloChrome_87},
		{"HelloChrome_83", "chrome", "83", utls.HelloChrome_83},
		{"HelloChrome_72", "chrome", "72", utls.HelloChrome_72},
		{"HelloChrome_70", "chrome", "70", utls.HelloChrome_70},
		{"HelloFirefox_120", "firefox", "120", utls.HelloFirefox_120},
		{"HelloFirefox_105", "firefox", "105", utls.HelloFirefox_105},
		{"HelloFirefox_102", "firefox", "102", utls.HelloFirefox_102},
		{"HelloFirefox_99", "firefox", "99", utls.HelloFirefox_99},
		{"HelloFirefox_65", "firefox", "65", utls.HelloFirefox_65},
		{"HelloFirefox_63", "firefox", "63", utls.HelloFirefox_63},
		{"HelloSafari_16_0", "safari", "16.0", utls.HelloSafari_16_0},
		{"HelloIOS_14", "ios", "14", utls.HelloIOS_14},
		{"HelloIOS_13", "ios", "13", utls.HelloIOS_13},
		{"HelloIOS_12_1", "ios", "12.1", utls.HelloIOS_12_1},
		{"HelloEdge_85", "edge", "85", utls.HelloEdge_85},
		{"HelloEdge_106", "edge", "106", utls.HelloEdge_106},
		{"HelloAndroid_11_OkHttp", "android", "11", utls.HelloAndroid_11_OkHttp},
	}
}

// Recorder is a net.Conn that keeps a copy of the first bytes written to
// it, up to a limit: the records of the ClientHello on a client connection.
type Recorder struct {
	net.Conn
	limit int

	mu      sync.Mutex
	written []byte
}

// NewRecorder wraps c, keeping up to limit written bytes.
func NewRecorder(c net.Conn, limit int) *Recorder {
	return &Recorder{Conn: c, limit: limit}
}

// Write writes to the connection and records what was written.
func (r *Recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	if n := min(len(p), r.limit-len(r.written)); n > 0 {
		r.written = append(r.written, p[:n]...)
	}
	r.mu.Unlock()
	return r.Conn.Write(p)
}

// Written returns a copy of the recorded bytes.
func (r *Recorder) Written() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]byte(nil), r.written...)
}

// Hello returns the first TLS record(s) a client wrote: its ClientHello,
// complete when the handshake has progressed past it.
func (r *Recorder) Hello() []byte { return r.Written() }

// Dial connects to addr on loopback, sends the ClientHello of parrot id with
// the given server name (none if empty) and completes the handshake without
// verifying the certificate. It returns the connection and the recorder of
// the bytes it wrote.
func Dial(ctx context.Context, addr string, id utls.ClientHelloID, serverName string) (*utls.UConn, *Recorder, error) {
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	rec := NewRecorder(raw, 1<<17)
	conn := utls.UClient(rec, &utls.Config{
		ServerName:         serverName,
		InsecureSkipVerify: true,
	}, id)
	if err := conn.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, rec, err
	}
	return conn, rec, nil
}

// HelloMessage returns the ClientHello handshake message (type 1, length,
// body) that parrot id builds for serverName, without any connection.
func HelloMessage(id utls.ClientHelloID, serverName string) ([]byte, error) {
	conn := utls.UClient(nil, &utls.Config{ServerName: serverName, InsecureSkipVerify: true}, id)
	if err := conn.BuildHandshakeState(); err != nil {
		return nil, err
	}
	return append([]byte(nil), conn.HandshakeState.Hello.Raw...), nil
}

// Certificate returns a fresh self-signed ECDSA P-256 certificate for
// localhost, 127.0.0.1 and ::1, valid for a day.
func Certificate() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "localhost"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// ServerConfig returns a server configuration with a fresh certificate,
// offering h2 and http/1.1.
func ServerConfig() (*tls.Config, error) {
	cert, err := Certificate()
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		NextProtos:   []string{"h2", "http/1.1"},
	}, nil
}

package tlsfp

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/maatproxy/maat/internal/testclient"
	"github.com/quic-go/quic-go"
)

// serverResult is what a loopback server saw of one connection.
type serverResult struct {
	conn    *Fingerprint // from the listener's raw bytes
	connErr error
	chi     *Fingerprint // from crypto/tls's ClientHelloInfo
	hsErr   error        // the server's handshake error
}

// startServer runs a crypto/tls server on 127.0.0.1 behind NewListener and
// reports each connection. Plain HTTP gets the answer net/http gives.
func startServer(t *testing.T, base *tls.Config) (string, <-chan serverResult) {
	t.Helper()
	results := make(chan serverResult, 1)
	addr := acceptLoopback(t, func(raw net.Conn) {
		var res serverResult
		conf := base.Clone()
		conf.GetConfigForClient = func(chi *tls.ClientHelloInfo) (*tls.Config, error) {
			res.chi, _ = FromClientHelloInfo(chi, false)
			return nil, nil
		}
		tc := tls.Server(raw, conf)
		tc.SetDeadline(time.Now().Add(10 * time.Second))
		res.hsErr = tc.Handshake()
		var rhe tls.RecordHeaderError
		if errors.As(res.hsErr, &rhe) && rhe.Conn != nil {
			rhe.Conn.Write([]byte("HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n"))
		}
		fc := ConnOf(tc)
		res.conn, res.connErr = fc.Fingerprint(), fc.Err()
		results <- res
	})
	return addr, results
}

// acceptLoopback listens on 127.0.0.1 behind NewListener until the test
// ends, and serves each connection on a goroutine of its own, closing it
// after.
func acceptLoopback(t *testing.T, serve func(raw net.Conn)) string {
	t.Helper()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := NewListener(tcp, Config{})
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			raw, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer raw.Close()
				serve(raw)
			}()
		}
	}()
	return tcp.Addr().String()
}

// quicLoopback is a quic-go Transport on 127.0.0.1 whose connections'
// contexts carry a Capture, closed when the test ends.
func quicLoopback(t *testing.T) *quic.Transport {
	t.Helper()
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	tr := &quic.Transport{
		Conn: udp,
		ConnContext: func(ctx context.Context, _ *quic.ClientInfo) (context.Context, error) {
			return NewContext(ctx, NewCapture()), nil
		},
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

func serverConfig(t *testing.T) *tls.Config {
	t.Helper()
	conf, err := testclient.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	return conf
}

// sameJA4 reports the first difference between two fingerprints.
func sameJA4(t *testing.T, what string, got, want *Fingerprint) {
	t.Helper()
	if got == nil || want == nil {
		t.Fatalf("%s: fingerprint %v, want %v", what, got, want)
	}
	if got.JA4 != want.JA4 || got.JA4R != want.JA4R || got.JA4O != want.JA4O || got.JA4RO != want.JA4RO {
		t.Errorf("%s:\n got %s %s\nwant %s %s", what, got.JA4, got.JA4RO, want.JA4, want.JA4RO)
	}
}

// TestDifferentialTCP connects real clients (Go's crypto/tls and the utls
// parrots) to a crypto/tls server behind NewListener, and checks that the
// listener's fingerprint, the ClientHelloInfo fingerprint and the
// fingerprint of the bytes the client wrote are the same.
func TestDifferentialTCP(t *testing.T) {
	t.Parallel()
	base := serverConfig(t)
	type dialer func(ctx context.Context, addr string) (*testclient.Recorder, error)
	goClient := func(conf *tls.Config) dialer {
		return func(ctx context.Context, addr string) (*testclient.Recorder, error) {
			var d net.Dialer
			raw, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				return nil, err
			}
			rec := testclient.NewRecorder(raw, 1<<17)
			c := tls.Client(rec, conf)
			defer c.Close()
			return rec, c.HandshakeContext(ctx)
		}
	}
	tests := []struct {
		name   string
		dial   dialer
		family string // the known-client family it must be identified as
		source string // what the known-client row must name
		minLen int
	}{
		{name: "go default", dial: goClient(&tls.Config{ServerName: "localhost", InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}})},
		{name: "go TLS 1.2 without SNI", dial: goClient(&tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS12})},
		{name: "go one-character ALPN", dial: goClient(&tls.Config{ServerName: "localhost", InsecureSkipVerify: true, NextProtos: []string{"h", "h2"}})},
	}
	for _, p := range testclient.Parrots() {
		tt := struct {
			name   string
			dial   dialer
			family string // the known-client family it must be identified as
			source string // what the known-client row must name
			minLen int
		}{name: p.Name, source: p.Name}
		if p.Family == "chrome" {
			tt.family = "chrome" // Edge shares Chrome's hello, and its row
		}
		tt.dial = func(ctx context.Context, addr string) (*testclient.Recorder, error) {
			c, rec, err := testclient.Dial(ctx, addr, p.ID, "localhost")
			if c != nil {
				c.Close()
			}
			return rec, err
		}
		if p.Name == "HelloChrome_133" {
			tt.minLen = 1500 // X25519MLKEM768: more than one TCP segment
		}
		tests = append(tests, tt)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			addr, results := startServer(t, base)
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			rec, err := tt.dial(ctx, addr)
			if err != nil {
				t.Fatalf("client handshake: %v", err)
			}
			res := <-results
			if res.hsErr != nil || res.connErr != nil {
				t.Fatalf("server handshake: %v, listener: %v", res.hsErr, res.connErr)
			}
			h, err := ParseRecords(rec.Hello())
			if err != nil {
				t.Fatalf("client bytes: %v", err)
			}
			if h.Len < tt.minLen {
				t.Errorf("hello of %d bytes, want at least %d", h.Len, tt.minLen)
			}
			fromBytes := h.Fingerprint(false)
			sameJA4(t, "listener vs client bytes", res.conn, fromBytes)
			sameJA4(t, "ClientHelloInfo vs client bytes", res.chi, fromBytes)
			if c := res.conn.Client; c.Family != tt.family && tt.family != "" || !strings.Contains(c.Source, tt.source) {
				t.Errorf("client %+v, want family %q from %q", c, tt.family, tt.source)
			}
		})
	}
}

// TestRejectedHello checks that a hello crypto/tls refuses is fingerprinted
// all the same.
func TestRejectedHello(t *testing.T) {
	t.Parallel()
	addr, results := startServer(t, serverConfig(t))
	conn, err := tls.Dial("tcp", addr, &tls.Config{
		InsecureSkipVerify: true,
		MaxVersion:         tls.VersionTLS12,
		CipherSuites:       []uint16{tls.TLS_RSA_WITH_AES_128_CBC_SHA}, // the server's key is ECDSA
	})
	if err == nil {
		conn.Close()
		t.Fatal("handshake succeeded")
	}
	res := <-results
	if res.hsErr == nil || res.conn == nil || !strings.HasPrefix(res.conn.JA4, "t12i0") {
		t.Errorf("server error %v, fingerprint %+v", res.hsErr, res.conn)
	}
}

// TestPlainHTTP checks that a plain HTTP request passes through unchanged,
// so that crypto/tls reports a RecordHeaderError whose Conn can answer it.
func TestPlainHTTP(t *testing.T) {
	t.Parallel()
	addr, results := startServer(t, serverConfig(t))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"))
	status, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || status != "HTTP/1.0 400 Bad Request\r\n" {
		t.Errorf("answer %q, %v", status, err)
	}
	res := <-results
	var rhe tls.RecordHeaderError
	if !errors.As(res.hsErr, &rhe) || !errors.Is(res.connErr, ErrNotTLS) {
		t.Errorf("server error %v, listener %v", res.hsErr, res.connErr)
	}
}

// TestAcceptDoesNotRead checks that Accept returns a silent connection at
// once: a slow client cannot hold up the accept loop.
func TestAcceptDoesNotRead(t *testing.T) {
	t.Parallel()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := NewListener(tcp, Config{HelloTimeout: time.Hour})
	defer ln.Close()
	for range 2 {
		c, err := net.Dial("tcp", tcp.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		sc, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer sc.Close()
		if fc := ConnOf(sc); fc == nil || fc.Fingerprint() != nil || fc.Err() != nil {
			t.Fatalf("accepted %T", sc)
		}
	}
}

// TestQUIC runs a quic-go server whose ConnContext carries a Capture and
// whose tls.Config is wrapped with GetConfigForClient, and checks that the
// connection's context gives a QUIC fingerprint.
func TestQUIC(t *testing.T) {
	t.Parallel()
	tr := quicLoopback(t)
	conf := serverConfig(t)
	conf.NextProtos = []string{"h3"}
	var nextCalled bool
	conf.GetConfigForClient = GetConfigForClient(func(*tls.ClientHelloInfo) (*tls.Config, error) {
		nextCalled = true
		return nil, nil
	})
	ln, err := tr.Listen(conf, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	client, err := quic.DialAddr(ctx, tr.Conn.LocalAddr().String(), &tls.Config{
		ServerName: "localhost", InsecureSkipVerify: true, NextProtos: []string{"h3"},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.CloseWithError(0, "")
	sc, err := ln.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.CloseWithError(0, "")
	fp := FromContext(sc.Context())
	if fp == nil {
		t.Fatal("no fingerprint in the connection's context")
	}
	if !strings.HasPrefix(fp.JA4, "q13d") || fp.JA4[8:10] != "h3" || !fp.QUIC || fp.SNI != "localhost" || !nextCalled {
		t.Errorf("fingerprint %+v, next called %v", fp, nextCalled)
	}
}

// TestDifferentialQUIC runs crypto/tls's QUIC client and server in memory:
// the ClientHello bytes the client hands to QUIC (its Initial CRYPTO data)
// must give the same 'q' fingerprint as the server's Capture, filled by
// GetConfigForClient from the ClientHelloInfo.
func TestDifferentialQUIC(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		conf *tls.Config
	}{
		{"h3 with SNI", &tls.Config{ServerName: "localhost", NextProtos: []string{"h3"}, MinVersion: tls.VersionTLS13}},
		{"no SNI, two protocols", &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h3", "h3-29"}, MinVersion: tls.VersionTLS13}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			cli := tls.QUICClient(&tls.QUICConfig{TLSConfig: tt.conf})
			cli.SetTransportParameters([]byte{0x01, 0x02, 0x40, 0x64}) // max_idle_timeout 100
			if err := cli.Start(ctx); err != nil {
				t.Fatal(err)
			}
			defer cli.Close()
			var hello []byte
			for e := cli.NextEvent(); e.Kind != tls.QUICNoEvent; e = cli.NextEvent() {
				if e.Kind == tls.QUICWriteData && e.Level == tls.QUICEncryptionLevelInitial {
					hello = append(hello, e.Data...)
				}
			}
			h, err := ParseHandshake(hello)
			if err != nil {
				t.Fatalf("client hello: %v", err)
			}

			conf := serverConfig(t)
			conf.NextProtos = []string{"h3"}
			conf.MinVersion = tls.VersionTLS13
			conf.GetConfigForClient = GetConfigForClient(nil)
			srv := tls.QUICServer(&tls.QUICConfig{TLSConfig: conf})
			capture := NewCapture()
			if err := srv.Start(NewContext(ctx, capture)); err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			if err := srv.HandleData(tls.QUICEncryptionLevelInitial, hello); err != nil {
				t.Fatal(err)
			}
			for e := srv.NextEvent(); e.Kind != tls.QUICNoEvent; e = srv.NextEvent() {
				if e.Kind == tls.QUICTransportParametersRequired {
					srv.SetTransportParameters(nil)
				}
			}
			want := h.Fingerprint(true)
			sameJA4(t, "Capture vs client bytes", capture.Fingerprint(), want)
			if !strings.HasPrefix(want.JA4, "q13") || capture.Err() != nil {
				t.Errorf("JA4 %s, Err %v", want.JA4, capture.Err())
			}
		})
	}
}

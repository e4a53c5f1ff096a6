package tlsfp

import (
	"crypto/tls"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/maatproxy/maat/internal/testclient"
	utls "github.com/refraction-networking/utls"
)

// BenchmarkFingerprint measures parsing a Chrome ClientHello and computing
// all four JA4 variants. Budget: 2 µs and a handful of allocations.
func BenchmarkFingerprint(b *testing.B) {
	pq, err := testclient.HelloMessage(utls.HelloChrome_133, "www.example.org")
	if err != nil {
		b.Fatal(err)
	}
	for _, bm := range []struct {
		name string
		msg  []byte
	}{
		{"chrome-vector", loadVectors(b)[1].handshake}, // browsers-x509.pcapng, GREASE
		{"chrome133-pq", pq},                           // utls HelloChrome_133, X25519MLKEM768
	} {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bm.msg)))
			for b.Loop() {
				h, err := ParseHandshake(bm.msg)
				if err != nil {
					b.Fatal(err)
				}
				if fp := h.Fingerprint(false); fp.JA4 == "" {
					b.Fatal("no JA4")
				}
			}
		})
	}
}

// BenchmarkParseRecords adds the record layer to BenchmarkFingerprint.
func BenchmarkParseRecords(b *testing.B) {
	rec := loadVectors(b)[1].records
	b.ReportAllocs()
	for b.Loop() {
		h, err := ParseRecords(rec)
		if err != nil {
			b.Fatal(err)
		}
		h.Fingerprint(false)
	}
}

// BenchmarkHandshake measures a full TLS 1.3 handshake (Go client, ECDSA
// P-256 server, in memory) through a plain connection and through a
// capturing Conn, alternating the two in one loop so that load on the
// machine weighs on both alike. It reports each one's CPU time per
// handshake (client and server: the process's CPU time) and the overhead of
// the capture in percent; the budget is 3%.
func BenchmarkHandshake(b *testing.B) {
	conf, err := testclient.ServerConfig()
	if err != nil {
		b.Fatal(err)
	}
	conf.SessionTicketsDisabled = true
	clientConf := &tls.Config{ServerName: "localhost", InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}}
	cfg := &Config{}
	done := make(chan error)
	// cpu is the process's CPU time: under load from other processes it
	// grows only with this benchmark's work.
	cpu := func() time.Duration {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	handshake := func(capture bool) time.Duration {
		start := cpu()
		c1, c2 := net.Pipe()
		defer c1.Close()
		defer c2.Close()
		var sc net.Conn = c2
		if capture {
			sc = newConn(c2, cfg)
		}
		go func() { done <- tls.Client(c1, clientConf).Handshake() }()
		if err := tls.Server(sc, conf).Handshake(); err != nil {
			b.Fatal(err)
		}
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		if capture && ConnOf(sc).Fingerprint() == nil {
			b.Fatal("no fingerprint")
		}
		return cpu() - start
	}
	b.ReportAllocs()
	var plain, captured time.Duration
	i := 0
	for b.Loop() {
		if i%2 == 0 {
			plain += handshake(false)
			captured += handshake(true)
		} else {
			captured += handshake(true)
			plain += handshake(false)
		}
		i++
	}
	b.ReportMetric(float64(plain.Nanoseconds())/float64(i), "plain-cpu-ns/handshake")
	b.ReportMetric(float64(captured.Nanoseconds())/float64(i), "tlsfp-cpu-ns/handshake")
	b.ReportMetric(100*(float64(captured)/float64(plain)-1), "overhead-%")
}

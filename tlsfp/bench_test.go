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
// all four JA4 variants, the listener's path. Budget: 2 µs and a handful of
// allocations.
//
// Parts of the fingerprint are cached across connections (see cache). So that the
// cache does not flatter the figure, "chrome133-pq" cycles through 64
// distinct hellos of the utls Chrome parrot, each with its own extension
// order as Chrome sends them; "unseen" also rewrites a cipher suite and a
// signature algorithm of every hello, so that no hash part was seen before:
// the cost of a client new to the cache.
func BenchmarkFingerprint(b *testing.B) {
	var chrome [][]byte
	for range 64 {
		msg, err := testclient.HelloMessage(utls.HelloChrome_133, "www.example.org")
		if err != nil {
			b.Fatal(err)
		}
		chrome = append(chrome, msg)
	}
	vector := loadVectors(b)[1].handshake // browsers-x509.pcapng, GREASE
	for _, bm := range []struct {
		name   string
		msgs   [][]byte
		unseen bool
	}{
		{"chrome-vector", [][]byte{vector}, false},
		{"chrome133-pq", chrome, false}, // X25519MLKEM768
		{"chrome133-pq-unseen", chrome, true},
	} {
		b.Run(bm.name, func(b *testing.B) {
			var cipher, sigalg []int
			for _, msg := range bm.msgs {
				c, s := listOffsets(b, msg)
				cipher, sigalg = append(cipher, c), append(sigalg, s)
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(bm.msgs[0])))
			i := 0
			for b.Loop() {
				msg := bm.msgs[i%len(bm.msgs)]
				if bm.unseen {
					v := uint16(0x1000 + i%0xe000)
					msg[cipher[i%len(bm.msgs)]], msg[cipher[i%len(bm.msgs)]+1] = byte(v>>8), byte(v)
					msg[sigalg[i%len(bm.msgs)]], msg[sigalg[i%len(bm.msgs)]+1] = byte(v>>8), byte(v)
				}
				fp, err := FingerprintHandshake(msg, false)
				if err != nil {
					b.Fatal(err)
				}
				if fp.JA4 == "" {
					b.Fatal("no JA4")
				}
				i++
			}
		})
	}
}

// listOffsets returns where the last cipher suite and the first signature
// algorithm of a ClientHello message are.
func listOffsets(b *testing.B, msg []byte) (cipher, sigalg int) {
	p := 4 + 2 + 32
	p += 1 + int(msg[p])
	n := int(msg[p])<<8 | int(msg[p+1])
	cipher = p + 2 + n - 2
	p += 2 + n
	p += 1 + int(msg[p])
	for p += 2; p+4 <= len(msg); {
		typ, n := int(msg[p])<<8|int(msg[p+1]), int(msg[p+2])<<8|int(msg[p+3])
		if typ == int(extSignatureAlgorithms) {
			return cipher, p + 4 + 2
		}
		p += 4 + n
	}
	b.Fatal("no signature_algorithms")
	return 0, 0
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

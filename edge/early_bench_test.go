package edge

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/maatproxy/maat/tlsfp"
)

// The benchmarks of early refusal (limits.refuse_early) measure the CPU
// time the server's process spends per connection, its clients running in
// another process (this test binary, run as TestEarlyBenchClient), so that
// the client's own handshake work (its key shares, the signature check) is
// not counted: a refusal spares the server, not the client. Each reports
// server-cpu-ns/conn (user and system time of this process, the kernel's
// TCP accept and close included) beside ns/op, which is wall time and
// includes starting the client process.
//
//	go test ./edge -run '^$' -bench 'EarlyRefusal' -benchtime 3000x
//
// - full: the edge with refuse_early: false: a full TLS 1.3 handshake
//   (X25519MLKEM768 key share, ECDSA P-256 signature), then HTTP/1.1 reads
//   the client's EOF.
// - refuse: the edge with refuse_early: true: the hello read and
//   fingerprinted, the policy asked (DenyConn), the fingerprint log line
//   written, the access_denied alert sent.
// - floor: no edge: accept, read and fingerprint the hello (tlsfp), close.
//   What any refusal at the ClientHello costs at least.
//
// policy's BenchmarkDenyConn is the decision alone.

// earlyBenchEnv names the environment variables that turn
// TestEarlyBenchClient into the benchmark's client.
const (
	earlyBenchAddr = "MAAT_EARLY_BENCH_ADDR"
	earlyBenchN    = "MAAT_EARLY_BENCH_N"
)

// TestEarlyBenchClient is the client process of BenchmarkEarlyRefusal: it
// opens N connections to the address, four at a time, each from its own
// loopback address (no port runs out), tries a TLS handshake on each and
// closes it. Without the environment it does nothing.
func TestEarlyBenchClient(t *testing.T) {
	addr := os.Getenv(earlyBenchAddr)
	if addr == "" {
		t.Skip("the client process of BenchmarkEarlyRefusal")
	}
	n, err := strconv.Atoi(os.Getenv(earlyBenchN))
	if err != nil {
		t.Fatal(err)
	}
	conf := &tls.Config{InsecureSkipVerify: true, ServerName: "localhost", NextProtos: []string{"http/1.1"}}
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range 4 {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				local := &net.TCPAddr{IP: net.IPv4(127, 1, byte(i/250%250), byte(i%250+1))}
				d := net.Dialer{LocalAddr: local, Timeout: 10 * time.Second}
				c, err := d.Dial("tcp", addr)
				if err != nil {
					failed.Add(1)
					continue
				}
				tc := tls.Client(c, conf)
				_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
				_ = tc.Handshake() // refused, cut or done: the server's side is measured
				_ = tc.Close()
			}
		})
	}
	wg.Wait()
	if f := failed.Load(); f > 0 {
		t.Fatalf("%d of %d connections failed to open", f, n)
	}
}

// serverCPU is this process's CPU time, user and system.
func serverCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runEarlyClients runs b.N client connections to addr from a client
// process and reports the server's CPU time per connection.
func runEarlyClients(b *testing.B, addr string) {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestEarlyBenchClient$", "-test.count=1")
	cmd.Env = append(os.Environ(), earlyBenchAddr+"="+addr, earlyBenchN+"="+strconv.Itoa(b.N))
	b.ResetTimer()
	before := serverCPU()
	out, err := cmd.CombinedOutput()
	used := serverCPU() - before
	b.StopTimer()
	if err != nil {
		b.Fatalf("client: %v\n%s", err, out)
	}
	b.ReportMetric(float64(used.Nanoseconds())/float64(b.N), "server-cpu-ns/conn")
}

func BenchmarkEarlyRefusal(b *testing.B) {
	// The policy denies every TLS 1.3 client over TCP by its JA4 alone.
	dir := b.TempDir()
	pol := dir + "/policy.yaml"
	if err := os.WriteFile(pol, []byte(`bots: [{name: no-tcp13, ja4: ["t13*"], action: DENY}]`), 0o600); err != nil {
		b.Fatal(err)
	}
	edge := func(b *testing.B, refuse bool) string {
		s, _ := startBenchEdge(b, fmt.Sprintf("log: {fingerprints: %s/fp.jsonl}\npolicy: %s\nlimits: {refuse_early: %v, conns_per_client: 4096}\nsites: [{hosts: [localhost], upstream: 'http://127.0.0.1:1'}]\n",
			dir, pol, refuse))
		return s.Addrs().HTTPS
	}
	b.Run("full", func(b *testing.B) { runEarlyClients(b, edge(b, false)) })
	b.Run("refuse", func(b *testing.B) { runEarlyClients(b, edge(b, true)) })
	b.Run("floor", func(b *testing.B) { runEarlyClients(b, floorServer(b)) })
}

// floorServer accepts connections, reads and fingerprints each one's
// ClientHello and closes it: the least a refusal at the hello costs.
func floorServer(b *testing.B) string {
	b.Helper()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ln := tlsfp.NewListener(tcp, tlsfp.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				if !errors.Is(err, net.ErrClosed) && ctx.Err() == nil {
					b.Error(err)
				}
				return
			}
			wg.Go(func() {
				_, _ = c.(*tlsfp.Conn).ReadHello()
				_ = c.Close()
			})
		}
	})
	b.Cleanup(func() {
		cancel()
		_ = ln.Close()
		wg.Wait()
	})
	return tcp.Addr().String()
}

// BenchmarkEarlyRefusalInMemory is BenchmarkEarlyRefusal without the
// kernel: one recorded ClientHello (Go's crypto/tls client: X25519MLKEM768
// and X25519 key shares) replayed into the edge's own pieces over an
// in-memory connection, one goroutine, so that ns/op is the server's CPU
// time for that work alone. full: crypto/tls's server handshake with the
// edge's TLS configuration up to its flight (ServerHello to Finished; the
// client's Finished, an HMAC, is not checked); refuse: the hello read and
// fingerprinted (tlsfp), the policy asked (DenyConn), the fingerprint log
// line written, the alert written;
// hello: the hello read and fingerprinted only.
func BenchmarkEarlyRefusalInMemory(b *testing.B) {
	dir := b.TempDir()
	pol := dir + "/policy.yaml"
	if err := os.WriteFile(pol, []byte(`bots: [{name: no-tcp13, ja4: ["t13*"], action: DENY}]`), 0o600); err != nil {
		b.Fatal(err)
	}
	s, _ := startBenchEdge(b, "log: {fingerprints: "+dir+"/fp.jsonl}\npolicy: "+pol+"\nsites: [{hosts: [localhost], upstream: 'http://127.0.0.1:1'}]\n")
	h := s.handler.Load()
	hello := recordHello(b)
	peer := netip.MustParseAddr("127.0.0.1")
	accept := func() *tlsfp.Conn {
		c, err := tlsfp.NewListener(&oneConnListener{c: &replayConn{in: hello}}, tlsfp.Config{}).Accept()
		if err != nil {
			b.Fatal(err)
		}
		return c.(*tlsfp.Conn)
	}
	cpu := func(b *testing.B, f func()) {
		b.ReportAllocs()
		before := serverCPU()
		for b.Loop() {
			f()
		}
		b.ReportMetric(float64((serverCPU()-before).Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
	b.Run("full", func(b *testing.B) {
		cpu(b, func() {
			tc := tls.Server(accept(), s.tlsConf)
			if err := tc.Handshake(); !errors.Is(err, io.EOF) {
				b.Fatalf("handshake: %v; want EOF where the client's Finished would be", err)
			}
		})
	})
	b.Run("refuse", func(b *testing.B) {
		cpu(b, func() {
			fc := accept()
			fp, err := fc.ReadHello()
			if err != nil {
				b.Fatal(err)
			}
			gi, deny := h.denyConn(fp, peer)
			if !deny {
				b.Fatal("not denied")
			}
			h.logRefusal(fp, peer, gi)
			_ = fc.Refuse(tlsfp.AlertAccessDenied)
		})
	})
	b.Run("hello", func(b *testing.B) {
		cpu(b, func() {
			if _, err := accept().ReadHello(); err != nil {
				b.Fatal(err)
			}
		})
	})
}

// recordHello returns the records of a ClientHello of Go's crypto/tls
// client, as it sends them.
func recordHello(b *testing.B) []byte {
	b.Helper()
	client, server := net.Pipe()
	go func() {
		tc := tls.Client(client, &tls.Config{InsecureSkipVerify: true, ServerName: "localhost", NextProtos: []string{"http/1.1"}})
		_ = tc.Handshake()
	}()
	fc, err := tlsfp.NewListener(&oneConnListener{c: server}, tlsfp.Config{}).Accept()
	if err != nil {
		b.Fatal(err)
	}
	if _, err := fc.(*tlsfp.Conn).ReadHello(); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	n, err := fc.Read(buf) // the records, replayed
	if err != nil {
		b.Fatal(err)
	}
	_ = client.Close()
	_ = server.Close()
	return buf[:n]
}

// oneConnListener accepts its one connection.
type oneConnListener struct{ c net.Conn }

func (l *oneConnListener) Accept() (net.Conn, error) { return l.c, nil }
func (l *oneConnListener) Close() error              { return nil }
func (l *oneConnListener) Addr() net.Addr            { return l.c.LocalAddr() }

// replayConn reads in, then io.EOF; writes go nowhere.
type replayConn struct {
	in  []byte
	off int
}

func (c *replayConn) Read(p []byte) (int, error) {
	if c.off == len(c.in) {
		return 0, io.EOF
	}
	n := copy(p, c.in[c.off:])
	c.off += n
	return n, nil
}
func (c *replayConn) Write(p []byte) (int, error) { return len(p), nil }
func (c *replayConn) Close() error                { return nil }
func (c *replayConn) LocalAddr() net.Addr         { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 443} }
func (c *replayConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
}
func (c *replayConn) SetDeadline(time.Time) error      { return nil }
func (c *replayConn) SetReadDeadline(time.Time) error  { return nil }
func (c *replayConn) SetWriteDeadline(time.Time) error { return nil }

package proxyproto

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"math/big"
	"net"
	"net/netip"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/crypto/cryptobyte"
)

// oneListener hands out one connection, then reports itself closed.
type oneListener struct {
	mu sync.Mutex
	c  net.Conn
}

func (l *oneListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.c == nil {
		return nil, net.ErrClosed
	}
	c := l.c
	l.c = nil
	return c, nil
}

func (l *oneListener) Close() error   { return nil }
func (l *oneListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// pipeConn returns the proxyproto side of an in-memory connection and the
// peer's side.
func pipeConn(t *testing.T, cfg Config) (*Conn, net.Conn) {
	t.Helper()
	peer, server := net.Pipe()
	ln, err := NewListener(&oneListener{c: server}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); peer.Close() })
	return c.(*Conn), peer
}

// rest stands for what follows the header: the start of a TLS record.
var rest = append([]byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01}, bytes.Repeat([]byte("hello "), 100)...)

// TestConnPassesRestThrough: the Conn reads each header exactly, whole or
// one byte at a time, and every byte after it reaches the reader unchanged.
func TestConnPassesRestThrough(t *testing.T) {
	t.Parallel()
	for _, tt := range good {
		for _, chunk := range []int{0, 1, 7} {
			t.Run(tt.name+"/chunk"+string(rune('0'+chunk)), func(t *testing.T) {
				t.Parallel()
				c, peer := pipeConn(t, Config{})
				msg := append(append([]byte{}, tt.in...), rest...)
				go writeChunks(peer, msg, chunk)
				h, err := c.Header()
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(*h, tt.want) {
					t.Errorf("header %+v, want %+v", *h, tt.want)
				}
				got := make([]byte, len(rest))
				if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, rest) {
					t.Fatalf("after the header read %q, %v", got, err)
				}
			})
		}
	}
}

// goodIn returns the bytes of the good header of that name.
func goodIn(name string) []byte {
	for _, g := range good {
		if g.name == name {
			return g.in
		}
	}
	panic("no good header " + name)
}

// writeChunks writes b in pieces of n bytes (all at once if n is 0).
func writeChunks(w io.Writer, b []byte, n int) {
	if n == 0 {
		n = len(b)
	}
	for len(b) > 0 {
		k := min(n, len(b))
		if _, err := w.Write(b[:k]); err != nil {
			return
		}
		b = b[k:]
	}
}

func TestConnAddrs(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name         string
		in           []byte
		remote, loc  string
		tcp, fromHdr bool
	}{
		{"v1 tcp4", []byte("PROXY TCP4 192.0.2.1 198.51.100.2 12345 443\r\n"), "192.0.2.1:12345", "198.51.100.2:443", true, true},
		{"v2 tcp6", v2Header(0x21, 0x21, addAddrs("[2001:db8::1]:1", "[2001:db8::2]:443")), "[2001:db8::1]:1", "[2001:db8::2]:443", true, true},
		{"v2 udp4", v2Header(0x21, 0x12, addAddrs("192.0.2.1:53", "198.51.100.2:53")), "192.0.2.1:53", "198.51.100.2:53", false, true},
		{"v2 local", v2Header(0x20, 0x11, addAddrs("10.0.0.1:1", "10.0.0.2:2")), "pipe", "pipe", false, false},
		{"v1 unknown", []byte("PROXY UNKNOWN\r\n"), "pipe", "pipe", false, false},
		{"v2 unix", goodIn("v2 unix stream"), "pipe", "pipe", false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, peer := pipeConn(t, Config{})
			go peer.Write(tt.in)
			r, l := c.RemoteAddr(), c.LocalAddr()
			if r.String() != tt.remote || l.String() != tt.loc {
				t.Errorf("RemoteAddr %v, LocalAddr %v; want %s, %s", r, l, tt.remote, tt.loc)
			}
			if _, ok := r.(*net.TCPAddr); ok != tt.tcp {
				t.Errorf("RemoteAddr is a %T", r)
			}
			if _, ok := r.(*net.UDPAddr); ok != (tt.fromHdr && !tt.tcp) {
				t.Errorf("RemoteAddr is a %T", r)
			}
			if h, err := c.Header(); err != nil || h == nil {
				t.Errorf("Header %v, %v", h, err)
			}
		})
	}
}

func TestConnRefuses(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		in       []byte
		maxV2    int
		err      error
		consumed int // bytes the Conn read before refusing, at most
	}{
		{"tls hello", rest, 0, ErrNotProxy, v1MinLen},
		{"http", []byte("GET / HTTP/1.1\r\nHost: example.org\r\n\r\n"), 0, ErrNotProxy, v1MinLen},
		{"v2 over the bound", v2Header(0x21, 0x11, func(b *cryptobyte.Builder) {
			addAddrs("192.0.2.1:1", "192.0.2.2:2")(b)
			addTLV(b, 0xE0, strings.Repeat("x", 100))
		}), 64, ErrTooLarge, v2FixedLen},
		{"v2 over the default bound", v2Header(0x20, 0x00, func(b *cryptobyte.Builder) {
			addTLV(b, TypeNoop, strings.Repeat("x", DefaultMaxV2Bytes))
		}), 0, ErrTooLarge, v2FixedLen},
		{"v1 over 107 bytes", []byte("PROXY UNKNOWN " + strings.Repeat("x", 300) + "\r\n"), 0, ErrTooLarge, v1MaxLen},
		{"v2 crc mismatch", v2Header(0x21, 0x11, func(b *cryptobyte.Builder) {
			addAddrs("192.0.2.1:1", "192.0.2.2:2")(b)
			addTLV(b, TypeCRC32C, "\x00\x00\x00\x00")
		}), 0, ErrMalformed, 35},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var calls []error
			var remotes []net.Addr
			c, peer := pipeConn(t, Config{MaxV2Bytes: tt.maxV2, OnError: func(remote net.Addr, err error) {
				calls = append(calls, err)
				remotes = append(remotes, remote)
			}})
			wrote := make(chan int)
			go func() {
				n, _ := peer.Write(tt.in)
				wrote <- n
			}()
			_, err := c.Header()
			if !errors.Is(err, tt.err) {
				t.Fatalf("Header: %v, want %v", err, tt.err)
			}
			if _, rerr := c.Read(make([]byte, 10)); rerr != err {
				t.Errorf("Read after a failed header: %v, want %v", rerr, err)
			}
			if c.RemoteAddr().String() != "pipe" {
				t.Errorf("RemoteAddr %v, want the socket's", c.RemoteAddr())
			}
			if len(calls) != 1 || calls[0] != err || remotes[0].String() != "pipe" {
				t.Errorf("OnError called with %v, %v", remotes, calls)
			}
			c.Close()
			if n := <-wrote; n > tt.consumed {
				t.Errorf("the Conn read %d bytes before refusing, want at most %d", n, tt.consumed)
			}
		})
	}
}

func TestConnClosedEarly(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		in   string
		eof  bool
	}{
		{"before any byte", "", true},
		{"inside a v1 line", "PROXY TCP4 192.0.2.1 ", false},
		{"inside a v2 header", sigV2 + "\x21\x11\x00\x0c\xc0\x00", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, peer := pipeConn(t, Config{})
			go func() {
				peer.Write([]byte(tt.in))
				peer.Close()
			}()
			_, err := c.Header()
			if !errors.Is(err, ErrTruncated) || !errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) != tt.eof {
				t.Fatalf("Header: %v; want ErrTruncated, io.EOF %v", err, tt.eof)
			}
		})
	}
}

// TestConnSlowLoris: a header sent one byte a second, then stalled, is
// refused when Config.Timeout has passed since the read began, exactly.
func TestConnSlowLoris(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c, peer := pipeConn(t, Config{Timeout: 5 * time.Second})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for _, b := range []byte("PROXY TCP4 192.0.2.1") {
				if _, err := peer.Write([]byte{b}); err != nil {
					return
				}
				time.Sleep(time.Second)
			}
		}()
		start := time.Now()
		_, err := c.Header()
		if !errors.Is(err, ErrTimeout) || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("Header: %v, want ErrTimeout", err)
		}
		if d := time.Since(start); d != 5*time.Second {
			t.Errorf("refused after %v, want 5s", d)
		}
		c.Close()
		peer.Close() // the writer's next byte fails: it returns
		<-done
	})
}

// TestConnDeadlines: the caller's earlier read deadline bounds the header
// too, and after the header the caller's deadline (or none) is back.
func TestConnDeadlines(t *testing.T) {
	t.Parallel()
	hdr := []byte("PROXY TCP4 192.0.2.1 198.51.100.2 12345 443\r\n")
	t.Run("earlier caller deadline", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			c, _ := pipeConn(t, Config{Timeout: time.Hour})
			start := time.Now()
			c.SetDeadline(start.Add(2 * time.Second))
			if _, err := c.Header(); !errors.Is(err, ErrTimeout) || time.Since(start) != 2*time.Second {
				t.Fatalf("Header: %v after %v; want ErrTimeout after 2s", err, time.Since(start))
			}
		})
	})
	t.Run("caller deadline restored", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			c, peer := pipeConn(t, Config{Timeout: time.Second})
			start := time.Now()
			c.SetReadDeadline(start.Add(30 * time.Second))
			go peer.Write(hdr)
			if _, err := c.Header(); err != nil {
				t.Fatal(err)
			}
			_, err := c.Read(make([]byte, 1))
			if !errors.Is(err, os.ErrDeadlineExceeded) || time.Since(start) != 30*time.Second {
				t.Fatalf("Read: %v after %v; want the caller's deadline at 30s", err, time.Since(start))
			}
		})
	})
	t.Run("no deadline after the header", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			c, peer := pipeConn(t, Config{Timeout: time.Second})
			go func() {
				peer.Write(hdr)
				time.Sleep(time.Minute) // long after the header timeout
				peer.Write([]byte("late"))
			}()
			b := make([]byte, 4)
			if _, err := io.ReadFull(c, b); err != nil || string(b) != "late" {
				t.Fatalf("Read %q, %v", b, err)
			}
		})
	})
}

// TestConnConcurrentCalls: RemoteAddr, Header and Read from several
// goroutines at once read the header once and agree on it.
func TestConnConcurrentCalls(t *testing.T) {
	t.Parallel()
	c, peer := pipeConn(t, Config{})
	go peer.Write(append([]byte("PROXY TCP4 192.0.2.1 198.51.100.2 12345 443\r\n"), "x"...))
	var wg sync.WaitGroup
	got := make([]string, 4)
	for i := range got {
		wg.Go(func() {
			switch i {
			case 0:
				b := make([]byte, 1)
				n, err := c.Read(b)
				got[i] = string(b[:n]) + errString(err)
			case 1:
				h, err := c.Header()
				if err == nil {
					got[i] = h.Source.String()
				}
			default:
				got[i] = c.RemoteAddr().String()
			}
		})
	}
	wg.Wait()
	want := []string{"x", "192.0.2.1:12345", "192.0.2.1:12345", "192.0.2.1:12345"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func errString(err error) string {
	if err != nil {
		return err.Error()
	}
	return ""
}

// TestListenerTLS: over loopback TCP, a v2 header with TLVs, then a real
// TLS handshake: the ClientHello arrives intact behind the header, and the
// TLS connection reports the header's client.
func TestListenerTLS(t *testing.T) {
	t.Parallel()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	ln, err := NewListener(tcp, Config{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cert, pool := selfSigned(t)
	tln := tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}})

	type result struct {
		remote string
		unique string
		msg    string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		c, err := tln.Accept()
		if err != nil {
			done <- result{err: err}
			return
		}
		defer c.Close()
		b := make([]byte, 4)
		_, err = io.ReadFull(c, b)
		var r result
		r.remote, r.msg, r.err = c.RemoteAddr().String(), string(b), err
		if pc := ConnOf(c); pc != nil {
			if h, _ := pc.Header(); h != nil {
				v, _ := h.Lookup(TypeUniqueID)
				r.unique = string(v)
			}
		}
		c.Write([]byte("pong"))
		done <- r
	}()

	raw, err := net.Dial("tcp", tcp.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := raw.Write(haproxyTLVs()); err != nil {
		t.Fatal(err)
	}
	tc := tls.Client(raw, &tls.Config{ServerName: "example.org", RootCAs: pool})
	if _, err := tc.Write([]byte("ping")); err != nil {
		t.Fatalf("TLS behind the header: %v", err)
	}
	b := make([]byte, 4)
	if _, err := io.ReadFull(tc, b); err != nil || string(b) != "pong" {
		t.Fatalf("read %q, %v", b, err)
	}
	r := <-done
	if r.err != nil || r.remote != "203.0.113.7:51234" || r.msg != "ping" || r.unique != uniqueID {
		t.Errorf("server saw %+v", r)
	}
}

// selfSigned returns a certificate for example.org and a pool that trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		DNSNames:     []string{"example.org"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// TestAcceptDoesNotRead: Accept returns a connection whose peer has sent
// nothing; the header is read later, by the connection's goroutine.
func TestAcceptDoesNotRead(t *testing.T) {
	t.Parallel()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	ln, err := NewListener(tcp, Config{Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	silent, err := net.Dial("tcp", tcp.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	select {
	case c := <-accepted:
		defer c.Close()
		if ConnOf(c) == nil {
			t.Errorf("Accept returned a %T", c)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Accept did not return while the peer was silent")
	}
}

// TestListenerTrusted: a header is read only from Config.Trusted; other
// peers pass through unread with their own address.
func TestListenerTrusted(t *testing.T) {
	t.Parallel()
	hdr := "PROXY TCP4 192.0.2.1 198.51.100.2 12345 443\r\n"
	for _, tt := range []struct {
		name    string
		trusted []netip.Prefix
		header  bool
	}{
		{"everyone", nil, true},
		{"loopback trusted", []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("127.0.0.0/8")}, true},
		{"loopback not trusted", []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tcp, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer tcp.Close()
			ln, err := NewListener(tcp, Config{Trusted: tt.trusted})
			if err != nil {
				t.Fatal(err)
			}
			client, err := net.Dial("tcp", tcp.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			if _, err := client.Write([]byte(hdr + "data")); err != nil {
				t.Fatal(err)
			}
			client.(*net.TCPConn).CloseWrite()
			c, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			h, err := ConnOf(c).Header()
			if err != nil || (h != nil) != tt.header {
				t.Fatalf("Header %v, %v; want a header: %v", h, err, tt.header)
			}
			data, err := io.ReadAll(c)
			wantData, wantRemote := "data", "192.0.2.1:12345"
			if !tt.header {
				wantData, wantRemote = hdr+"data", client.LocalAddr().String()
			}
			if err != nil || string(data) != wantData {
				t.Errorf("read %q, %v; want %q", data, err, wantData)
			}
			if got := c.RemoteAddr().String(); got != wantRemote {
				t.Errorf("RemoteAddr %s, want %s", got, wantRemote)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		cfg  Config
		errs int
	}{
		{"zero", Config{}, 0},
		{"bounds", Config{Timeout: time.Second, MaxV2Bytes: 52, Trusted: []netip.Prefix{netip.MustParsePrefix("::1/128")}}, 0},
		{"largest", Config{MaxV2Bytes: 65551}, 0},
		{"negative timeout", Config{Timeout: -1}, 1},
		{"max too small", Config{MaxV2Bytes: 51}, 1},
		{"max too large", Config{MaxV2Bytes: 65552}, 1},
		{"zero prefix", Config{Trusted: []netip.Prefix{{}}}, 1},
		{"mapped prefix", Config{Trusted: []netip.Prefix{netip.MustParsePrefix("::ffff:10.0.0.0/104")}}, 1},
		{"all at once", Config{Timeout: -1, MaxV2Bytes: -1, Trusted: []netip.Prefix{{}, {}}}, 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.cfg.Validate()
			n := 0
			if err != nil {
				n = len(err.(interface{ Unwrap() []error }).Unwrap())
			}
			if n != tt.errs {
				t.Fatalf("Validate: %v; want %d problems", err, tt.errs)
			}
			if _, lerr := NewListener(&oneListener{}, tt.cfg); (lerr != nil) != (n > 0) {
				t.Errorf("NewListener: %v", lerr)
			}
		})
	}
}

func TestConnOf(t *testing.T) {
	t.Parallel()
	c, _ := pipeConn(t, Config{})
	if ConnOf(tls.Server(c, &tls.Config{})) != c {
		t.Error("ConnOf did not find the Conn under a *tls.Conn")
	}
	plain, peer := net.Pipe()
	defer plain.Close()
	defer peer.Close()
	if ConnOf(plain) != nil {
		t.Error("ConnOf found a Conn in a plain pipe")
	}
}

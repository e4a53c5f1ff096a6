package tlsfp

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/maatproxy/maat/internal/testclient"
	utls "github.com/refraction-networking/utls"
)

// errorLog collects the OnError calls of a Config.
type errorLog struct {
	mu   sync.Mutex
	errs []error
}

func (l *errorLog) onError(_ net.Addr, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, err)
}

func (l *errorLog) get() []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]error(nil), l.errs...)
}

// writeBytes writes b to c one byte at a time, then closes c if close is set.
func writeBytes(c net.Conn, b []byte, close bool) {
	for i := range b {
		if _, err := c.Write(b[i : i+1]); err != nil {
			return
		}
	}
	if close {
		c.Close()
	}
}

// TestListenerVectors feeds the records of every TCP vector through a Conn
// one byte per write and checks the fingerprint and that the bytes reach the
// reader unchanged.
func TestListenerVectors(t *testing.T) {
	t.Parallel()
	for _, v := range loadVectors(t) {
		if v.Transport != "tcp" {
			continue
		}
		t.Run(v.name(), func(t *testing.T) {
			t.Parallel()
			client, server := net.Pipe()
			defer client.Close()
			var log errorLog
			c := newConn(server, &Config{OnError: log.onError})
			defer c.Close()
			go writeBytes(client, v.records, false)
			got := make([]byte, len(v.records))
			if _, err := io.ReadFull(c, got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, v.records) {
				t.Error("replayed bytes differ from the bytes sent")
			}
			if c.Err() != nil || log.get() != nil {
				t.Fatalf("Err = %v, OnError %v", c.Err(), log.get())
			}
			checkVector(t, v, c.Fingerprint())
		})
	}
}

// TestListenerFailures checks that hellos which cannot be fingerprinted are
// reported once with a reason, and that their bytes still reach the reader
// (so that crypto/tls answers them) unless the bound was passed.
func TestListenerFailures(t *testing.T) {
	t.Parallel()
	hello := loadVectors(t)[0].records
	huge := []byte{0x16, 3, 1, 0, 4, 1, 0x01, 0x00, 0x00} // announces a 64 KiB + 4 byte hello
	serverHello := records(append([]byte{2}, hello[6:]...), 1<<14)
	badCipherLength := spec{version: 0x0303, ciphers: []uint16{0x1301}}.build()
	badCipherLength[handshakeHeaderLen+2+32+1+1] = 0xff // cipher_suites length beyond the body
	tests := []struct {
		name   string
		send   []byte
		close  bool
		cfg    Config
		want   error
		replay []byte // bytes the reader gets before the error or EOF
		rerr   error  // error after the replayed bytes; nil: the reader sees EOF from the peer
	}{
		{name: "plain HTTP", send: []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), close: true, want: ErrNotTLS, replay: []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")},
		{name: "closed before any byte", close: true, want: ErrTruncated, rerr: io.EOF},
		{name: "truncated", send: hello[:100], close: true, want: ErrTruncated, replay: hello[:100], rerr: io.EOF},
		{name: "huge length", send: huge, want: ErrTooLarge, replay: huge, rerr: ErrTooLarge},
		{name: "over MaxHelloBytes", send: hello, cfg: Config{MaxHelloBytes: 100}, want: ErrTooLarge, replay: hello[:9], rerr: ErrTooLarge},
		{name: "garbage record length", send: []byte{0x16, 3, 1, 0xff, 0xff, 1, 2, 3}, close: true, want: ErrMalformed, replay: []byte{0x16, 3, 1, 0xff, 0xff}},
		{name: "server hello", send: serverHello, close: true, want: ErrMalformed, replay: serverHello},
		{name: "wrong inner lengths", send: records(badCipherLength, 1<<14), close: true, want: ErrMalformed, replay: records(badCipherLength, 1<<14)},
		{name: "alert record", send: []byte{0x15, 3, 1, 0, 2, 2, 40}, close: true, want: ErrNotTLS, replay: []byte{0x15, 3, 1, 0, 2, 2, 40}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			client, server := net.Pipe()
			defer client.Close()
			var log errorLog
			cfg := tt.cfg
			cfg.OnError = log.onError
			c := newConn(server, &cfg)
			defer c.Close()
			go writeBytes(client, tt.send, tt.close)
			var got []byte
			buf := make([]byte, 7)
			var err error
			for err == nil && (got == nil || len(got) < len(tt.replay)) {
				var n int
				n, err = c.Read(buf)
				got = append(got[:len(got):len(got)], buf[:n]...)
			}
			if !bytes.Equal(got, tt.replay) {
				t.Errorf("reader got %q, want %q", got, tt.replay)
			}
			if tt.rerr != nil {
				if err == nil {
					_, err = c.Read(buf)
				}
				if !errors.Is(err, tt.rerr) {
					t.Errorf("Read error %v, want %v", err, tt.rerr)
				}
			}
			if !errors.Is(c.Err(), tt.want) {
				t.Errorf("Err = %v, want %v", c.Err(), tt.want)
			}
			if c.Fingerprint() != nil {
				t.Errorf("Fingerprint = %+v, want nil", c.Fingerprint())
			}
			if errs := log.get(); len(errs) != 1 || !errors.Is(errs[0], tt.want) {
				t.Errorf("OnError calls %v, want one %v", errs, tt.want)
			}
		})
	}
}

// TestHelloDeadline checks the hello deadline and its interplay with the
// caller's deadlines, in a synctest bubble with exact durations.
func TestHelloDeadline(t *testing.T) {
	t.Parallel()
	hello := loadVectors(t)[0].records
	tests := []struct {
		name       string
		timeout    time.Duration
		userDDL    time.Duration // caller's read deadline before the first Read; 0: none
		sendAfter  time.Duration // when the client sends the whole hello; 0: half, then nothing
		wantErr    error
		wantFailAt time.Duration // when the first failing Read returns
	}{
		{name: "slowloris", timeout: 5 * time.Second, wantErr: ErrTimeout, wantFailAt: 5 * time.Second},
		{name: "default timeout", wantErr: ErrTimeout, wantFailAt: DefaultHelloTimeout},
		{name: "earlier caller deadline", timeout: 5 * time.Second, userDDL: 2 * time.Second, wantErr: ErrTimeout, wantFailAt: 2 * time.Second},
		{name: "caller deadline restored", timeout: 5 * time.Second, userDDL: 30 * time.Second, sendAfter: time.Second, wantFailAt: 30 * time.Second},
		{name: "no deadline after hello", timeout: 5 * time.Second, sendAfter: 4 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				client, server := net.Pipe()
				defer client.Close()
				var log errorLog
				c := newConn(server, &Config{HelloTimeout: tt.timeout, OnError: log.onError})
				defer c.Close()
				start := time.Now()
				if tt.userDDL > 0 {
					c.SetReadDeadline(start.Add(tt.userDDL))
				}
				go func() {
					if tt.sendAfter == 0 {
						client.Write(hello[:len(hello)/2])
						return
					}
					time.Sleep(tt.sendAfter)
					client.Write(hello)
				}()
				buf := make([]byte, len(hello))
				var err error
				if tt.sendAfter > 0 {
					if _, err = io.ReadFull(c, buf); err != nil {
						t.Fatal(err)
					}
					if c.Fingerprint() == nil {
						t.Fatalf("no fingerprint: %v", c.Err())
					}
					if tt.wantFailAt == 0 {
						// The hello deadline is gone: the next Read blocks
						// until the peer closes.
						go func() {
							time.Sleep(time.Hour)
							client.Close()
						}()
						_, err = c.Read(buf)
						if !errors.Is(err, io.EOF) || time.Since(start) != time.Hour+tt.sendAfter {
							t.Errorf("Read = %v after %v, want EOF after %v", err, time.Since(start), time.Hour+tt.sendAfter)
						}
						return
					}
				}
				for err == nil {
					_, err = c.Read(buf)
				}
				if !errors.Is(err, os.ErrDeadlineExceeded) {
					t.Errorf("Read error %v, want a deadline error", err)
				}
				if d := time.Since(start); d != tt.wantFailAt {
					t.Errorf("Read failed after %v, want %v", d, tt.wantFailAt)
				}
				if tt.wantErr != nil && !errors.Is(c.Err(), tt.wantErr) {
					t.Errorf("Err = %v, want %v", c.Err(), tt.wantErr)
				}
				if n := len(log.get()); tt.wantErr != nil && n != 1 {
					t.Errorf("%d OnError calls, want 1", n)
				}
			})
		})
	}
}

// TestListenerSegments feeds Chrome's post-quantum hello (utls
// HelloChrome_133, larger than one TCP segment) through a Conn in segments
// of a typical MSS, and split across records, and checks that the
// fingerprint equals that of the handshake message and that the bytes
// reach the reader unchanged.
func TestListenerSegments(t *testing.T) {
	t.Parallel()
	msg, err := testclient.HelloMessage(utls.HelloChrome_133, "www.example.org")
	if err != nil {
		t.Fatal(err)
	}
	if len(msg) <= 1460 {
		t.Fatalf("Chrome's hello has %d bytes, want more than one segment", len(msg))
	}
	h, err := ParseHandshake(msg)
	if err != nil {
		t.Fatal(err)
	}
	want := h.Fingerprint(false)
	tests := []struct {
		name    string
		records []byte
		segment int
	}{
		{"one record, 1460-byte segments", records(msg, 1<<14), 1460},
		{"one record, 1-byte segments", records(msg, 1<<14), 1},
		{"two records", records(msg, 1000, 1<<14), 1460},
		{"two records, split header", records(msg, 3, 1<<14), 536},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			client, server := net.Pipe()
			defer client.Close()
			c := newConn(server, &Config{})
			defer c.Close()
			go func() {
				for b := tt.records; len(b) > 0; {
					n := min(tt.segment, len(b))
					if _, err := client.Write(b[:n]); err != nil {
						return
					}
					b = b[n:]
				}
			}()
			got := make([]byte, len(tt.records))
			if _, err := io.ReadFull(c, got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tt.records) {
				t.Error("replayed bytes differ")
			}
			if fp := c.Fingerprint(); fp == nil || *fp != *want {
				t.Errorf("fingerprint %+v (%v), want %+v", fp, c.Err(), want)
			}
			if want.Client.Family != "chrome" {
				t.Errorf("client %+v, want chrome", want.Client)
			}
		})
	}
}

// eofConn returns all its bytes with io.EOF in the same Read, as some
// connections do.
type eofConn struct {
	net.Conn // nil: only the methods below are used
	data     []byte
}

func (c *eofConn) Read(p []byte) (int, error) {
	n := copy(p, c.data)
	c.data = c.data[n:]
	if len(c.data) == 0 {
		return n, io.EOF
	}
	return n, nil
}
func (c *eofConn) SetReadDeadline(time.Time) error { return nil }
func (c *eofConn) RemoteAddr() net.Addr            { return &net.TCPAddr{IP: net.IPv6loopback} }
func (c *eofConn) Close() error                    { return nil }

// TestHelloWithEOF checks that bytes arriving with io.EOF are used: a whole
// hello is fingerprinted, and an empty connection is ErrTruncated wrapping
// io.EOF (so the edge can keep port probes out of its log).
func TestHelloWithEOF(t *testing.T) {
	t.Parallel()
	hello := loadVectors(t)[0].records
	tests := []struct {
		name    string
		data    []byte
		wantFP  bool
		wantErr []error
	}{
		{"whole hello", hello, true, nil},
		{"empty", nil, false, []error{ErrTruncated, io.EOF}},
		{"half a hello", hello[:50], false, []error{ErrTruncated}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newConn(&eofConn{data: tt.data}, &Config{})
			got, err := io.ReadAll(c)
			if err != nil || !bytes.Equal(got, tt.data) {
				t.Errorf("read %d bytes, %v; want %d", len(got), err, len(tt.data))
			}
			if (c.Fingerprint() != nil) != tt.wantFP {
				t.Errorf("fingerprint %+v, Err %v", c.Fingerprint(), c.Err())
			}
			for _, want := range tt.wantErr {
				if !errors.Is(c.Err(), want) {
					t.Errorf("Err = %v, want %v", c.Err(), want)
				}
			}
			if tt.name == "half a hello" && errors.Is(c.Err(), io.EOF) {
				t.Errorf("Err = %v wraps io.EOF after some bytes", c.Err())
			}
		})
	}
}

// TestReadHello: ReadHello fingerprints the hello before crypto/tls reads
// a byte, and the handshake that follows gets the same bytes and succeeds;
// Refuse instead answers with the alert the client reports.
func TestReadHello(t *testing.T) {
	t.Parallel()
	conf := serverConfig(t)
	for _, refuse := range []bool{false, true} {
		t.Run(map[bool]string{false: "handshake", true: "refuse"}[refuse], func(t *testing.T) {
			t.Parallel()
			tcp, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ln := NewListener(tcp, Config{})
			defer ln.Close()
			type outcome struct {
				fp    *Fingerprint
				err   error
				hsErr error
			}
			done := make(chan outcome, 1)
			go func() {
				raw, err := ln.Accept()
				if err != nil {
					done <- outcome{err: err}
					return
				}
				c := raw.(*Conn)
				var o outcome
				o.fp, o.err = c.ReadHello()
				if fp, err := c.ReadHello(); fp != o.fp || err != o.err {
					o.err = errors.New("a second ReadHello answered otherwise")
				}
				if refuse {
					o.hsErr = c.Refuse(AlertAccessDenied)
				} else {
					tc := tls.Server(c, conf)
					o.hsErr = tc.Handshake()
					tc.Close()
				}
				done <- o
			}()
			conn, err := tls.Dial("tcp", tcp.Addr().String(), &tls.Config{InsecureSkipVerify: true, ServerName: "example.org"})
			if err == nil {
				conn.Close()
			}
			o := <-done
			if o.err != nil || o.fp == nil || o.fp.SNI != "example.org" || !strings.HasPrefix(o.fp.JA4, "t13d") {
				t.Fatalf("ReadHello = %+v, %v", o.fp, o.err)
			}
			if o.hsErr != nil {
				t.Fatalf("server: %v", o.hsErr)
			}
			if !refuse {
				if err != nil {
					t.Fatalf("handshake after ReadHello: %v", err)
				}
				return
			}
			// crypto/tls keeps its alert type unexported: the client's
			// error is a "remote error" whose text names the alert.
			var oe *net.OpError
			if !errors.As(err, &oe) || oe.Op != "remote error" || oe.Err.Error() != "tls: access denied" {
				t.Fatalf("client: %v; want remote error: tls: access denied", err)
			}
		})
	}
}

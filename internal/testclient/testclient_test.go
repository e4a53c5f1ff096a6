package testclient_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/maatproxy/maat/internal/testclient"
	utls "github.com/refraction-networking/utls"
)

func ExampleHelloMessage() {
	msg, err := testclient.HelloMessage(utls.HelloChrome_133, "www.example.org")
	if err != nil {
		fmt.Println(err)
		return
	}
	// Chrome's X25519MLKEM768 key share makes the hello larger than one
	// TCP segment.
	fmt.Println(msg[0], len(msg) > 1500)
	// Output: 1 true
}

// TestParrotsHandshake checks that every parrot completes a handshake with
// crypto/tls on loopback and that the recorder kept the hello records.
func TestParrotsHandshake(t *testing.T) {
	t.Parallel()
	conf, err := testclient.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", conf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				c.(*tls.Conn).Handshake()
				c.Read(make([]byte, 1))
			}()
		}
	}()
	for _, p := range testclient.Parrots() {
		t.Run(p.Name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			c, rec, err := testclient.Dial(ctx, ln.Addr().String(), p.ID, "localhost")
			if err != nil {
				t.Fatal(err)
			}
			c.Close()
			if h := rec.Hello(); len(h) < 100 || h[0] != 0x16 || h[5] != 1 {
				t.Errorf("recorded % x…", h[:min(len(h), 8)])
			}
		})
	}
}

func TestRecorderLimit(t *testing.T) {
	t.Parallel()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go func() {
		buf := make([]byte, 10)
		for {
			if _, err := b.Read(buf); err != nil {
				return
			}
		}
	}()
	r := testclient.NewRecorder(a, 4)
	r.Write([]byte("abc"))
	r.Write([]byte("def"))
	if got := r.Written(); !bytes.Equal(got, []byte("abcd")) {
		t.Errorf("recorded %q, want %q", got, "abcd")
	}
}

package proxyproto

import (
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/maatproxy/maat/internal/testenv"
	"github.com/maatproxy/maat/internal/testhaproxy"
)

// TestHAProxy runs real HAProxy in TCP mode on loopback in front of a
// listener: a client's connection arrives with the client's address, and
// HAProxy's own health checks (check-send-proxy) arrive as what they are.
func TestHAProxy(t *testing.T) {
	t.Parallel()
	testenv.NeedCommand(t, "haproxy")
	for _, tt := range []struct {
		name    string
		server  string // options of HAProxy's server line
		version int
		tlvs    []Type
	}{
		{"send-proxy", "send-proxy", 1, nil},
		{"send-proxy-v2", "send-proxy-v2 proxy-v2-options crc32c,unique-id", 2, []Type{TypeUniqueID, TypeCRC32C}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			testHAProxy(t, tt.server, tt.version, tt.tlvs)
		})
	}
}

// seen is what the listener saw of one connection.
type seen struct {
	hdr           *Header
	err           error
	remote, local string
	relayed       bool // it carried the client's "hello"
}

func testHAProxy(t *testing.T, server string, version int, tlvs []Type) {
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	ln, err := NewListener(tcp, Config{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	conns := make(chan seen, 64)
	go serveHAProxy(ln, conns)

	front := testhaproxy.Start(t, testhaproxy.Config{
		Frontend: []string{`unique-id-format %{+X}o\ %ci:%cp_%fi:%fp_%Ts_%rt:%pid`},
		Backend:  []string{fmt.Sprintf("server s1 %s %s check inter 100ms check-send-proxy", tcp.Addr(), server)},
	})

	client, err := net.Dial("tcp", front.String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	client.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := client.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 5)
	if _, err := io.ReadFull(client, b); err != nil || string(b) != "world" {
		t.Fatalf("client read %q, %v", b, err)
	}

	// The relayed connection, and at least one health check.
	var relayed, check *seen
	deadline := time.After(20 * time.Second)
	for relayed == nil || check == nil {
		select {
		case s := <-conns:
			if s.err != nil {
				t.Fatalf("listener: %v", s.err)
			}
			switch {
			case s.relayed:
				relayed = &s
			case check == nil:
				check = &s
			}
		case <-deadline:
			t.Fatalf("after 20s: relayed %+v, health check %+v", relayed, check)
		}
	}
	if relayed.remote != client.LocalAddr().String() || relayed.local != front.String() {
		t.Errorf("relayed connection from %s to %s; the client is %s, HAProxy's frontend %s",
			relayed.remote, relayed.local, client.LocalAddr(), front)
	}
	h := relayed.hdr
	if h.Version != version || h.Command != Proxy || h.Family != AFInet || h.Transport != Stream {
		t.Errorf("relayed header %+v", h)
	}
	for _, typ := range tlvs {
		if v, ok := h.Lookup(typ); !ok || len(v) == 0 {
			t.Errorf("no TLV 0x%02x in %+v", typ, h.TLVs)
		}
	}
	// A check is LOCAL in version 2; in version 1 it has no command, and
	// HAProxy names its own addresses or UNKNOWN.
	if c := check.hdr; c.Version != version || (version == 2 && c.Command != Local) {
		t.Errorf("health check header %+v", c)
	}
	// A LOCAL connection keeps the socket's address: HAProxy's own.
	if version == 2 && !strings.HasPrefix(check.remote, "127.") {
		t.Errorf("a LOCAL connection reports %s, not the socket's address", check.remote)
	}
	t.Logf("relayed: %+v; health check: %+v", *relayed.hdr, *check.hdr)
}

// serveHAProxy records what arrives on ln: the relayed connection (which
// sends "hello" and gets "world"), and the health checks, which close.
func serveHAProxy(ln net.Listener, conns chan<- seen) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			c.SetDeadline(time.Now().Add(20 * time.Second))
			pc := ConnOf(c)
			h, err := pc.Header()
			s := seen{hdr: h, err: err, remote: c.RemoteAddr().String(), local: c.LocalAddr().String()}
			if err == nil {
				b := make([]byte, 5)
				_, rerr := io.ReadFull(c, b)
				s.relayed = rerr == nil && string(b) == "hello"
				if s.relayed {
					c.Write([]byte("world"))
				}
			}
			select {
			case conns <- s:
			default: // enough checks recorded
			}
		}()
	}
}

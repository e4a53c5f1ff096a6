package edge

import (
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
)

// TestBindPair: for a port the system chose, a UDP twin in use (another
// program's) makes bindPair try another TCP port, closing the one it let
// go; for a configured port it fails at once, saying which; any other
// error is no reason to try again.
func TestBindPair(t *testing.T) {
	t.Parallel()
	var opened []net.Listener
	listenTCP := func() (net.Listener, error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err == nil {
			opened = append(opened, ln)
		}
		return ln, err
	}
	// A real UDP socket holds the first port tried: the twin in use.
	held := map[int]bool{}
	failFirst := func(n int, with error) func(*net.UDPAddr) (net.PacketConn, error) {
		calls := 0
		return func(a *net.UDPAddr) (net.PacketConn, error) {
			calls++
			if calls <= n {
				held[a.Port] = true
				return nil, with
			}
			return net.ListenUDP("udp", a)
		}
	}
	eaddrinuse := &net.OpError{Op: "listen", Net: "udp", Err: syscall.EADDRINUSE}

	ln, udp, err := bindPair(listenTCP, failFirst(2, eaddrinuse), true)
	if err != nil {
		t.Fatalf("with two ports' twins in use: %v", err)
	}
	defer ln.Close()
	defer udp.Close()
	if p := ln.Addr().(*net.TCPAddr).Port; p != udp.LocalAddr().(*net.UDPAddr).Port || held[p] {
		t.Errorf("TCP port %d, UDP %v; held %v", p, udp.LocalAddr(), held)
	}
	if len(opened) != 3 {
		t.Fatalf("%d TCP listeners opened, want 3", len(opened))
	}
	for _, l := range opened[:2] {
		if c, err := net.Dial("tcp", l.Addr().String()); err == nil {
			c.Close()
			// The port may have been taken by someone else since; what
			// matters is that our listener let it go.
			if _, err := l.Accept(); err == nil {
				t.Errorf("the listener of a failed attempt (%v) still accepts", l.Addr())
			}
		}
	}

	opened = nil
	if _, _, err := bindPair(listenTCP, failFirst(1, eaddrinuse), false); err == nil || !strings.Contains(err.Error(), "listen http3 (udp)") {
		t.Errorf("a configured port whose twin is in use: %v, want the http3 listen error", err)
	}
	if len(opened) != 1 {
		t.Errorf("a configured port: %d attempts, want 1", len(opened))
	}
	opened = nil
	other := errors.New("permission denied")
	if _, _, err := bindPair(listenTCP, failFirst(1, other), true); !errors.Is(err, other) || len(opened) != 1 {
		t.Errorf("another error: %v after %d attempts, want it after 1", err, len(opened))
	}
	opened = nil
	if _, _, err := bindPair(listenTCP, failFirst(100, eaddrinuse), true); !errors.Is(err, syscall.EADDRINUSE) || len(opened) != 8 {
		t.Errorf("twins always in use: %v after %d attempts, want EADDRINUSE after 8", err, len(opened))
	}
}

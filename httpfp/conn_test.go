package httpfp

import (
	"crypto/tls"
	"errors"
	"net"
	"testing"
)

// stateConn is a net.Conn with a TLS state and the methods *tls.Conn has.
type stateConn struct {
	net.Conn
	closedWrite bool
}

func (c *stateConn) ConnectionState() tls.ConnectionState {
	return tls.ConnectionState{Version: tls.VersionTLS13, HandshakeComplete: true, NegotiatedProtocol: "h2"}
}
func (c *stateConn) NetConn() net.Conn { return c.Conn }
func (c *stateConn) CloseWrite() error { c.closedWrite = true; return nil }

func TestConnDelegates(t *testing.T) {
	t.Parallel()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	tests := []struct {
		name    string
		inner   net.Conn
		version uint16
		netConn net.Conn
		closeW  error
	}{
		{"tls-like", &stateConn{Conn: a}, tls.VersionTLS13, a, nil},
		{"plain", b, 0, b, errors.ErrUnsupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := NewConn(tt.inner, H2, Config{})
			if v := c.ConnectionState().Version; v != tt.version {
				t.Errorf("ConnectionState().Version = %x, want %x", v, tt.version)
			}
			if c.NetConn() != tt.netConn {
				t.Errorf("NetConn() = %v, want %v", c.NetConn(), tt.netConn)
			}
			if err := c.CloseWrite(); !errors.Is(err, tt.closeW) {
				t.Errorf("CloseWrite() = %v, want %v", err, tt.closeW)
			}
			if (c.tlsState() != nil) != (tt.version != 0) || c.Proto() != H2 {
				t.Errorf("tlsState() = %v, Proto() = %v", c.tlsState(), c.Proto())
			}
		})
	}
}

// TestAtRest feeds an HTTP/1 connection's bytes a piece at a time and
// checks that it stands at rest exactly between whole requests: never in a
// request line, in a header section, in a body or in a chunked body's
// trailer, and never again after an Upgrade or once the tap stopped.
func TestAtRest(t *testing.T) {
	t.Parallel()
	type step struct {
		in   string
		rest bool
	}
	tests := []struct {
		name  string
		proto Proto
		steps []step
	}{
		{"get", H1, []step{{"", true}, {"GE", false}, {"T / HTTP/1.1\r\nHost: a\r\n", false}, {"\r\n", true}}},
		{"blank lines between", H1, []step{{"GET / HTTP/1.1\r\nHost: a\r\n\r\n\r\n", true}, {"\r\n", true}}},
		{"content-length body", H1, []step{
			{"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n", false}, {"abcd", false}, {"e", true}}},
		{"chunked body and trailer", H1, []step{
			{"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", false},
			{"3\r\nabc\r\n0\r\n", false}, {"X-T: 1\r\n", false}, {"\r\n", true}}},
		{"pipelined, second cut", H1, []step{{"GET / HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HT", false}, {"TP/1.1\r\nHost: a\r\n\r\n", true}}},
		{"upgrade", H1, []step{{"GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", false}, {"\x81\x00", false}}},
		{"malformed", H1, []step{{"GET / HTTP/1.1\r\nHost a\r\n\r\n", false}, {"GET / HTTP/1.1\r\n\r\n", false}}},
		{"http/2", H2, []step{{"", false}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := NewConn(nil, tt.proto, Config{})
			for i, s := range tt.steps {
				c.feed([]byte(s.in))
				if got := c.AtRest(); got != s.rest {
					t.Fatalf("after step %d (%q): AtRest() = %v, want %v", i, s.in, got, s.rest)
				}
			}
		})
	}
}

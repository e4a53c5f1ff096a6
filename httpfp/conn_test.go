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

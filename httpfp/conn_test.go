package httpfp

import (
	"crypto/tls"
	"errors"
	"net"
	"reflect"
	"testing"

	"golang.org/x/net/http2/hpack"
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
// trailer, not with empty lines read after a request, and never again
// after an Upgrade or once the tap stopped.
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
		{"empty lines after", H1, []step{{"GET / HTTP/1.1\r\nHost: a\r\n\r\n\r\n", false}, {"\n", false},
			{"GET / HTTP/1.1\r\nHost: a\r\n\r\n", true}}},
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

// TestRest: Rest between requests changes no fingerprint (the next
// request's is made afresh, equal to what it would have been), in the
// middle of a header block it does nothing, and the field hook sees every
// field of requests and trailers alike, in order.
func TestRest(t *testing.T) {
	t.Parallel()
	h1 := "GET / HTTP/1.1\r\nHost: a\r\nUser-Agent: x\r\nAccept-Language: de\r\nCookie: a=1\r\n\r\n"
	fps := func(proto Proto, rest bool, feeds ...string) []Fingerprint {
		c := NewConn(nil, proto, Config{JA4H: true})
		var hooked []string
		c.SetFieldHook(func(f hpack.HeaderField) { hooked = append(hooked, f.Name) })
		for _, f := range feeds {
			c.feed([]byte(f))
			if rest {
				c.Rest()
			}
		}
		if c.Err() != nil {
			t.Fatal(c.Err())
		}
		var out []Fingerprint
		for _, p := range drain(c) {
			out = append(out, p.fp)
		}
		if proto == H2 && len(hooked) != 2*5+1 {
			t.Fatalf("the field hook saw %q, want both requests' fields and the trailer", hooked)
		}
		return out
	}
	for _, proto := range []Proto{H1, H2} {
		feeds := []string{h1, h1[:20], h1[20:]}
		if proto == H2 {
			c := newH2Client()
			_ = c.fr.WriteSettings()
			fields := []string{":method: GET", ":scheme: https", ":authority: a", ":path: /", "user-agent: x"}
			c.headers(t, 1, fields, 1000, 0)
			c.headers(t, 1, []string{"x-trailer: t"}, 1000, 0)
			fields[3] = ":path: /a/path/the/table/does/not/have"
			c.headers(t, 3, fields, 7, 0) // split: Rest between its frames
			b := c.buf.Bytes()
			feeds = []string{string(b[:len(b)-30]), string(b[len(b)-30 : len(b)-10]), string(b[len(b)-10:])}
		}
		want, got := fps(proto, false, feeds...), fps(proto, true, feeds...)
		if len(want) != 2 || !reflect.DeepEqual(want, got) {
			t.Fatalf("%v: with Rest %+v, without %+v", proto, got, want)
		}
	}
}

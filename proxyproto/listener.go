package proxyproto

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/maatproxy/maat/firstbytes"
)

// Defaults for a zero [Config].
const (
	// DefaultTimeout bounds the time to read the whole header.
	DefaultTimeout = 10 * time.Second
	// DefaultMaxV2Bytes bounds a version 2 header: room for the addresses
	// and the TLVs real balancers send (HAProxy's SSL and UNIQUE_ID, AWS's
	// VPC endpoint ID) many times over.
	DefaultMaxV2Bytes = 4096
	// minMaxV2Bytes is the smallest bound that admits an IPv6 header.
	minMaxV2Bytes = v2FixedLen + inet6AddrLen
)

// Config configures [NewListener]. The zero value is ready to use: every
// connection must begin with a header, read within DefaultTimeout.
type Config struct {
	// Timeout bounds the time from the start of the header's read (the
	// connection's first Read, RemoteAddr, LocalAddr or Header call) until
	// the whole header has arrived. If zero, DefaultTimeout is used. An
	// earlier read deadline set on the Conn is kept.
	Timeout time.Duration
	// MaxV2Bytes bounds a version 2 header, its 16-byte fixed part
	// included. If zero, DefaultMaxV2Bytes is used; otherwise it must lie
	// between 52 (an IPv6 header without TLVs) and 65551 (the protocol's
	// bound, 16+65535). A version 1 header is bounded by the protocol at 107
	// bytes.
	MaxV2Bytes int
	// Trusted lists the networks of the balancers a header is accepted
	// from. If empty, every connection must begin with a header. Otherwise
	// a connection from any other address is passed through unread and
	// keeps the socket's addresses: a header it sends is not believed, and
	// reaches the next reader as data. IPv4 networks are written as IPv4.
	Trusted []netip.Prefix
	// OnError, if not nil, is called once for each connection whose header
	// could not be read, from the goroutine that reads it, with the
	// socket's remote address and the reason (see [Conn.Header]).
	OnError func(remote net.Addr, err error)
}

// Validate reports every problem of c at once.
func (c *Config) Validate() error {
	var errs []error
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("proxyproto: Timeout %v is negative", c.Timeout))
	}
	if c.MaxV2Bytes != 0 && (c.MaxV2Bytes < minMaxV2Bytes || c.MaxV2Bytes > maxV2Bytes) {
		errs = append(errs, fmt.Errorf("proxyproto: MaxV2Bytes %d outside [%d, %d]", c.MaxV2Bytes, minMaxV2Bytes, maxV2Bytes))
	}
	for i, p := range c.Trusted {
		switch {
		case !p.IsValid():
			errs = append(errs, fmt.Errorf("proxyproto: Trusted[%d] is not a valid network", i))
		case p.Addr().Is4In6():
			errs = append(errs, fmt.Errorf("proxyproto: Trusted[%d] %v: write IPv4 networks as IPv4", i, p))
		}
	}
	return errors.Join(errs...)
}

func (c *Config) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return DefaultTimeout
}

func (c *Config) maxV2Bytes() int {
	if c.MaxV2Bytes > 0 {
		return c.MaxV2Bytes
	}
	return DefaultMaxV2Bytes
}

// trusted reports whether a header is expected from remote.
func (c *Config) trusted(remote net.Addr) bool {
	if len(c.Trusted) == 0 {
		return true
	}
	var a netip.Addr
	switch x := remote.(type) {
	case *net.TCPAddr:
		a = x.AddrPort().Addr()
	default:
		ap, err := netip.ParseAddrPort(remote.String())
		if err != nil {
			return false
		}
		a = ap.Addr()
	}
	a = a.Unmap().WithZone("")
	for _, p := range c.Trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// NewListener returns a listener whose Accept returns each connection of ln
// as a [*Conn] at once, without reading from it: a slow or silent peer never
// holds up the accept loop. The header is read by the connection's own
// goroutine, on its first Read, RemoteAddr, LocalAddr or Header call.
// NewListener fails only if cfg does not validate.
func NewListener(ln net.Listener, cfg Config) (net.Listener, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Trusted = slices.Clone(cfg.Trusted)
	return &listener{Listener: ln, cfg: cfg}, nil
}

type listener struct {
	net.Listener
	cfg Config
}

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &Conn{Conn: c, cfg: &l.cfg}, nil
}

// Conn is a connection that begins with a PROXY header. The header is read
// once, bounded in size and time, on the first call of Read, RemoteAddr,
// LocalAddr or Header; it reads the header's bytes and not one more, so the
// next reader (a ClientHello fingerprinter, crypto/tls) gets every byte
// after it unchanged. Those calls block until the header is read: make them
// from the connection's goroutine, not from an accept loop.
type Conn struct {
	net.Conn
	cfg *Config

	once sync.Once
	// Set once by readHeader, read after once.Do.
	hdr           *Header
	err           error
	remote, local net.Addr

	// ddl is the read deadline: the caller's, or the header's while the
	// header is read and it is the earlier.
	ddl firstbytes.Deadline
}

// NetConn returns the connection c wraps.
func (c *Conn) NetConn() net.Conn { return c.Conn }

// Header reads the header if it has not been read, and returns it. It
// returns nil and no error for a connection from outside Config.Trusted (no
// header is read from it). The error, also returned by every Read, wraps
// ErrNotProxy, ErrMalformed, ErrTooLarge, ErrTruncated (the peer closed
// early; io.EOF too if it closed before its first byte) or ErrTimeout (also
// os.ErrDeadlineExceeded). The header must not be modified.
func (c *Conn) Header() (*Header, error) {
	c.once.Do(c.readHeader)
	return c.hdr, c.err
}

// Read reads the header on its first call, then reads from the connection.
// If the header could not be read, every call returns why.
func (c *Conn) Read(p []byte) (int, error) {
	c.once.Do(c.readHeader)
	if c.err != nil {
		return 0, c.err
	}
	return c.Conn.Read(p)
}

// RemoteAddr returns the client's address the header carries: a
// *net.TCPAddr for a stream, a *net.UDPAddr for a datagram. For a LOCAL
// header, a header without addresses (see [Header.Addrs]), a connection from
// outside Config.Trusted or a header that could not be read, it returns the
// socket's remote address.
func (c *Conn) RemoteAddr() net.Addr {
	c.once.Do(c.readHeader)
	return c.remote
}

// LocalAddr returns the server's address the header carries, or the
// socket's local address, as RemoteAddr does.
func (c *Conn) LocalAddr() net.Addr {
	c.once.Do(c.readHeader)
	return c.local
}

// readHeader reads and parses the header, once.
func (c *Conn) readHeader() {
	c.remote, c.local = c.Conn.RemoteAddr(), c.Conn.LocalAddr()
	if !c.cfg.trusted(c.remote) {
		return
	}
	c.ddl.Begin(c.Conn, time.Now().Add(c.cfg.timeout()))
	h, err := c.read()
	c.ddl.End(c.Conn)
	if err != nil {
		c.err = err
		if c.cfg.OnError != nil {
			c.cfg.OnError(c.remote, err)
		}
		return
	}
	c.hdr = &h
	if src, dst, ok := h.Addrs(); ok {
		c.remote, c.local = netAddr(src, h.Transport), netAddr(dst, h.Transport)
	}
}

// read reads exactly one header. It asks parse how long the header is at
// least, reads up to that length and no further, and repeats until parse
// has the whole header or rejects it.
func (c *Conn) read() (Header, error) {
	maxV2 := c.cfg.maxV2Bytes()
	buf := make([]byte, 0, v1MaxLen+1)
	var rerr error
	for {
		h, n, err := parse(buf, maxV2)
		if !errors.Is(err, ErrTruncated) {
			return h, err
		}
		if rerr != nil {
			return Header{}, readError(rerr, len(buf))
		}
		want := n - len(buf)
		buf = slices.Grow(buf, want)
		var k int
		k, rerr = c.Conn.Read(buf[len(buf) : len(buf)+want])
		buf = buf[:len(buf)+k]
	}
}

// readError explains a read error that ended the header after n bytes.
func readError(err error, n int) error {
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("%w after %d bytes: %w", ErrTimeout, n, err)
	case errors.Is(err, io.EOF) && n == 0:
		return fmt.Errorf("%w: connection closed before any byte: %w", ErrTruncated, err)
	case errors.Is(err, io.EOF):
		return fmt.Errorf("%w: connection closed after %d bytes", ErrTruncated, n)
	}
	return fmt.Errorf("proxyproto: reading the header after %d bytes: %w", n, err)
}

// netAddr returns a as the net.Addr of its transport.
func netAddr(a netip.AddrPort, t Transport) net.Addr {
	if t == Datagram {
		return net.UDPAddrFromAddrPort(a)
	}
	return net.TCPAddrFromAddrPort(a)
}

// SetDeadline sets the read and write deadlines. While the header is read,
// the read deadline is the earlier of t and the header deadline.
func (c *Conn) SetDeadline(t time.Time) error { return c.ddl.SetDeadline(c.Conn, t) }

// SetReadDeadline sets the read deadline. While the header is read, the
// read deadline is the earlier of t and the header deadline.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.ddl.SetReadDeadline(c.Conn, t) }

// ConnOf returns the *Conn under c, looking through connections that wrap
// another and say so with a NetConn method (*tls.Conn, tlsfp's *Conn), or
// nil if there is none.
func ConnOf(c net.Conn) *Conn {
	for range 8 { // a few layers at most; never loop on a cycle
		switch x := c.(type) {
		case *Conn:
			return x
		case interface{ NetConn() net.Conn }:
			c = x.NetConn()
		default:
			return nil
		}
	}
	return nil
}

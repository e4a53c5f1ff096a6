package tlsfp

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/maatproxy/maat/firstbytes"
)

// Defaults for a zero [Config].
const (
	// DefaultMaxHelloBytes bounds the ClientHello handshake message, like
	// crypto/tls's own limit on handshake messages.
	DefaultMaxHelloBytes = 64 << 10
	// DefaultHelloTimeout bounds the time to read the whole ClientHello.
	DefaultHelloTimeout = 10 * time.Second
)

// Config configures [NewListener]. The zero value is ready to use.
type Config struct {
	// MaxHelloBytes bounds the ClientHello handshake message, header
	// included. If zero, DefaultMaxHelloBytes is used.
	MaxHelloBytes int
	// HelloTimeout bounds the time from the first Read of a connection
	// until its whole ClientHello has arrived. If zero, DefaultHelloTimeout
	// is used. An earlier read deadline set on the Conn is kept.
	HelloTimeout time.Duration
	// OnError, if not nil, is called once for each connection whose hello
	// could not be fingerprinted, from the goroutine that reads the
	// connection, with the remote address and the reason (see [Conn.Err]).
	OnError func(remote net.Addr, err error)
}

func (c *Config) maxHelloBytes() int {
	if c.MaxHelloBytes > 0 {
		return c.MaxHelloBytes
	}
	return DefaultMaxHelloBytes
}

func (c *Config) helloTimeout() time.Duration {
	if c.HelloTimeout > 0 {
		return c.HelloTimeout
	}
	return DefaultHelloTimeout
}

// NewListener returns a listener whose Accept returns each connection of ln
// as a [*Conn] at once, without reading from it: a slow client never holds
// up the accept loop. Wrap the result with tls.NewListener (or pass it to
// http.Server.ServeTLS).
func NewListener(ln net.Listener, cfg Config) net.Listener {
	return &listener{Listener: ln, cfg: cfg}
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
	return newConn(c, &l.cfg), nil
}

// Conn is a connection whose first Read reads the whole ClientHello, bounded
// in size and time, fingerprints it and then returns the same bytes,
// unchanged, to its reader (crypto/tls). Bytes that are not a TLS handshake
// pass through unchanged too, so that crypto/tls reports a
// tls.RecordHeaderError for them.
type Conn struct {
	net.Conn
	cfg *Config

	result atomic.Pointer[result] // set once, when the hello has been read

	// Read state; Reads are serialized by readMu.
	readMu sync.Mutex
	buf    []byte // bytes read while looking for the hello, then replayed
	off    int    // replay position in buf
	rerr   error  // error to return once buf is replayed

	// ddl is the read deadline: the caller's, or the hello's while the
	// hello is read and it is the earlier.
	ddl firstbytes.Deadline
}

type result struct {
	fp  *Fingerprint
	err error
}

func newConn(c net.Conn, cfg *Config) *Conn {
	return &Conn{Conn: c, cfg: cfg}
}

// NetConn returns the connection c wraps.
func (c *Conn) NetConn() net.Conn { return c.Conn }

// Fingerprint returns the fingerprint of the connection's ClientHello; nil
// until the hello has been read, or if it could not be parsed (see Err).
func (c *Conn) Fingerprint() *Fingerprint {
	if c == nil {
		return nil
	}
	if r := c.result.Load(); r != nil {
		return r.fp
	}
	return nil
}

// Err returns why the connection has no fingerprint: nil while the hello is
// being read or once it was fingerprinted. Test it with errors.Is against
// ErrNotTLS (e.g. plain HTTP), ErrTruncated (the client closed early; also
// io.EOF if it closed before sending any byte), ErrMalformed, ErrTooLarge
// and ErrTimeout (also os.ErrDeadlineExceeded).
func (c *Conn) Err() error {
	if r := c.result.Load(); r != nil {
		return r.err
	}
	return nil
}

// Read reads the ClientHello on its first call, then returns the bytes read
// so far, then reads from the underlying connection.
func (c *Conn) Read(p []byte) (int, error) {
	c.readMu.Lock()
	defer c.readMu.Unlock()
	if c.result.Load() == nil {
		c.readHello()
	}
	if c.off < len(c.buf) {
		n := copy(p, c.buf[c.off:])
		c.off += n
		if c.off == len(c.buf) {
			c.buf, c.off = nil, 0
		}
		return n, nil
	}
	if c.rerr != nil {
		return 0, c.rerr
	}
	return c.Conn.Read(p)
}

// ReadHello reads the ClientHello now, as the first Read would, and
// returns its fingerprint or why there is none (see Err): a server can
// decide about the client before crypto/tls spends anything on it. The
// bytes read are still returned by the following Reads. Later calls
// return the same answer.
func (c *Conn) ReadHello() (*Fingerprint, error) {
	c.readMu.Lock()
	if c.result.Load() == nil {
		c.readHello()
	}
	c.readMu.Unlock()
	r := c.result.Load()
	return r.fp, r.err
}

// AlertAccessDenied is the TLS alert access_denied (RFC 8446, section
// 6.2): "a valid certificate or PSK was received, but when access control
// was applied, the sender decided not to proceed with negotiation".
const AlertAccessDenied = 49

// Refuse ends the connection in place of a handshake: it sends the fatal
// alert (RFC 8446, section 6) in a plaintext record, as a server does
// before its ServerHello, and closes the connection. A client reports it
// as crypto/tls's "remote error: tls: access denied" or OpenSSL's "tlsv1
// alert access denied".
func (c *Conn) Refuse(alert uint8) error {
	// legacy_record_version 0x0303 (RFC 8446, section 5.1); level 2: fatal.
	_, err := c.Conn.Write([]byte{recordTypeAlert, 3, 3, 0, 2, 2, alert})
	return errors.Join(err, c.Conn.Close())
}

// readHello reads until the records holding the ClientHello are complete,
// or until the bytes cannot be a hello, the bound is passed, the deadline
// expires or the connection ends; then it records the outcome.
func (c *Conn) readHello() {
	maxHello := c.cfg.maxHelloBytes()
	maxRaw := 2*maxHello + recordHeaderLen // record headers of tiny records
	c.ddl.Begin(c.Conn, time.Now().Add(c.cfg.helloTimeout()))
	defer c.ddl.End(c.Conn)

	var a assembler
	var readErr error
	c.buf = make([]byte, 0, 4096)
	for {
		end, err := a.scan(c.buf, maxHello)
		switch {
		case err != nil:
			if errors.Is(err, ErrTooLarge) {
				c.rerr = err // stop here: crypto/tls must not read on
			}
			c.finish(nil, err)
			return
		case end > 0:
			fp, err := FingerprintHandshake(a.message(c.buf[:end]), false)
			if err != nil {
				c.finish(nil, err) // crypto/tls rejects it with an alert
				return
			}
			c.rerr = readErr // after the bytes already read, if any
			c.finish(fp, nil)
			return
		case readErr != nil:
			c.rerr = readErr // after the bytes already read
			c.finish(nil, helloReadError(readErr, len(c.buf)))
			return
		case len(c.buf) >= maxRaw:
			c.rerr = fmt.Errorf("%w: more than %d bytes of records", ErrTooLarge, maxRaw)
			c.finish(nil, c.rerr)
			return
		}
		if len(c.buf) == cap(c.buf) {
			c.buf = append(c.buf, 0)[:len(c.buf)]
		}
		var n int
		n, readErr = c.Conn.Read(c.buf[len(c.buf):min(cap(c.buf), maxRaw)])
		c.buf = c.buf[:len(c.buf)+n]
	}
}

// helloReadError explains a read error that ended the hello after n bytes.
// A connection closed before its first byte (a port probe, a health check)
// gives ErrTruncated wrapping io.EOF, so that the caller can tell it apart.
func helloReadError(err error, n int) error {
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("%w after %d bytes: %w", ErrTimeout, n, err)
	case errors.Is(err, io.EOF) && n == 0:
		return fmt.Errorf("%w: connection closed before any byte: %w", ErrTruncated, err)
	case errors.Is(err, io.EOF):
		return fmt.Errorf("%w: connection closed after %d bytes", ErrTruncated, n)
	}
	return fmt.Errorf("tlsfp: reading ClientHello after %d bytes: %w", n, err)
}

func (c *Conn) finish(fp *Fingerprint, err error) {
	c.result.Store(&result{fp: fp, err: err})
	if err != nil && c.cfg.OnError != nil {
		c.cfg.OnError(c.Conn.RemoteAddr(), err)
	}
}

// SetDeadline sets the read and write deadlines. While the hello is read,
// the read deadline is the earlier of t and the hello deadline.
func (c *Conn) SetDeadline(t time.Time) error { return c.ddl.SetDeadline(c.Conn, t) }

// SetReadDeadline sets the read deadline. While the hello is read, the
// read deadline is the earlier of t and the hello deadline.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.ddl.SetReadDeadline(c.Conn, t) }

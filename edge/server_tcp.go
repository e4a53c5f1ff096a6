package edge

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/net/http2"

	"github.com/maatproxy/maat/certs"
	"github.com/maatproxy/maat/edge/config"
	"github.com/maatproxy/maat/edge/internal/park"
	"github.com/maatproxy/maat/httpfp"
	"github.com/maatproxy/maat/proxyproto"
	"github.com/maatproxy/maat/tlsfp"
)

// wrapTCP stacks the readers of a TCP connection's first bytes: the PROXY
// protocol header (when an L4 balancer sends one), then the ClientHello
// (tlsfp, for JA4).
func (s *Server) wrapTCP(ln net.Listener) (net.Listener, error) {
	cfg := s.base
	if cfg.Listen.ProxyProtocol {
		// With trusted_proxies set, only those addresses may send a header
		// (a client cannot forge its address); others are read as they are.
		pc := proxyproto.Config{Timeout: cfg.Timeouts.Handshake.D(), OnError: s.proxyError}
		for _, p := range cfg.TrustedProxies {
			pc.Trusted = append(pc.Trusted, netipPrefix(p))
		}
		var err error
		if ln, err = proxyproto.NewListener(ln, pc); err != nil {
			return nil, fmt.Errorf("edge: PROXY protocol: %w", err)
		}
	}
	return tlsfp.NewListener(ln, tlsfp.Config{HelloTimeout: cfg.Timeouts.Handshake.D(), OnError: s.helloError}), nil
}

// acceptTLS is the TCP accept loop. It never reads from a connection: the
// PROXY header, the ClientHello and the handshake are read in the
// connection's own goroutine, bounded by the handshake timeout, so a slow
// client cannot stall the loop. Each connection's goroutine is tracked
// (trackConn) until the handshake hands it to HTTP/1 or HTTP/2 is done.
func (s *Server) acceptTLS(ln net.Listener) {
	var delay time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if s.stopping.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: back off as net/http does.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			s.log.LogAttrs(context.Background(), slog.LevelError, "accept_failed", slog.String("error", err.Error()))
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-s.hsCtx.Done():
				t.Stop()
				return
			}
			continue
		}
		delay = 0
		if !s.trackConn(c) {
			_ = c.Close()
			continue
		}
		go func() {
			// An HTTP/2 connection is served on a goroutine of its own:
			// the handshake's grew its stack (crypto is deep), and an
			// idle connection would keep that stack for as long as it
			// lives (8 KiB a connection, measured).
			if serve := s.handleTLS(c); serve != nil {
				go func() {
					defer s.untrackConn(c)
					serve()
				}()
				return
			}
			s.untrackConn(c)
		}()
	}
}

// handleTLS runs the handshake and hands the connection to HTTP/1 (served
// by the http.Server), or returns the function that serves it with HTTP/2
// until it ends. A client already holding limits.conns_per_client
// connections is hung up on; the address is read here, not in the accept
// loop, because behind a balancer it comes from the PROXY header.
func (s *Server) handleTLS(c net.Conn) (serve func()) {
	limitUnsent(c)
	peer := addrOf(c.RemoteAddr())
	if !s.trusted.Contains(peer) {
		if !s.conns1.acquire(peer) {
			s.metrics.limited.WithLabelValues("conns_per_client").Inc()
			_ = c.Close()
			return nil
		}
		c = &countedConn{Conn: c, release: func() { s.conns1.release(peer) }}
	}
	// One deadline for the hello read early (limits.refuse_early, early.go)
	// and the handshake.
	deadline := time.Now().Add(s.base.Timeouts.Handshake.D())
	if s.refuseTCP(c, peer) {
		return nil
	}
	rc := &recordingConn{Conn: c}
	conf := s.tlsConf
	if fc := tlsfp.ConnOf(c); fc != nil && s.handler.Load().cfg.Fingerprints.TicketJA4On() {
		conf = tlsfp.SessionConfig(s.tlsConf, fc) // fingerprints.ticket_ja4
	}
	tc := tls.Server(rc, conf)
	ctx, cancel := context.WithDeadline(s.hsCtx, deadline)
	err := tc.HandshakeContext(ctx) // closes the connection when ctx ends
	cancel()
	first := rc.stop()
	if err != nil {
		var re tls.RecordHeaderError
		if errors.As(err, &re) && re.Conn != nil && looksLikeHTTP(re.RecordHeader[:]) {
			s.answerPlainHTTP(c, first)
			return nil
		}
		s.metrics.handshakes.WithLabelValues("failed", "tcp").Inc()
		if tlsfp.ConnOf(c).Err() != nil {
			_ = c.Close()
			return nil // helloError logged it already, once
		}
		// A hello that crypto/tls refused was still fingerprinted: say which.
		msg := err.Error()
		if rc.unknownName {
			msg = "the server name (SNI) is no site's: refused with the TLS alert unrecognized_name"
		}
		attrs := []slog.Attr{slog.String("remote", c.RemoteAddr().String()), slog.String("error", msg)}
		if fp := tlsfp.ConnOf(c).Fingerprint(); fp != nil {
			attrs = append(attrs, slog.String("ja4", fp.JA4), slog.String("sni", fp.SNI))
		}
		s.log.LogAttrs(context.Background(), slog.LevelInfo, "tls_handshake_failed", attrs...)
		_ = c.Close()
		return nil
	}
	s.metrics.handshakes.WithLabelValues("ok", "tcp").Inc()
	s.seen.add(peer)
	st := tc.ConnectionState()
	// The tap's HPACK table is the client's for as long as the connection
	// lives: it takes no more than the HTTP/2 server takes.
	hcfg := httpfp.Config{JA4H: s.handler.Load().cfg.Fingerprints.JA4H, MaxHeaderBytes: s.h1.MaxHeaderBytes,
		MaxHPACKTable: h2DecoderTable}
	var pushed bool
	switch st.NegotiatedProtocol {
	case "h2":
		hc := httpfp.NewConn(tc, httpfp.H2, hcfg)
		return func() { s.serveH2(hc) }
	case "acme-tls/1":
		_ = tc.Close() // the TLS-ALPN-01 answer was the handshake itself
		return nil
	default:
		pushed = s.h1ln.push(s.park.Wrap(httpfp.NewConn(tc, httpfp.H1, hcfg))) // parked when idle, unless park_after is 0s
	}
	if !pushed {
		_ = tc.Close()
	}
	return nil
}

// connState tells an HTTP/1 connection when it falls idle (it may be
// parked), and logs, when one ends, why its header capture stopped, if it
// did.
func (s *Server) connState(c net.Conn, st http.ConnState) {
	var hc *httpfp.Conn
	msg := "http1_fingerprint_failed"
	switch c := c.(type) {
	case *park.Conn:
		c.ConnState(st)
		hc = c.Conn
	case *httpfp.Conn: // HTTP/1 never parked, or HTTP/2 (x/net calls ConnState too)
		hc = c
		if c.Proto() == httpfp.H2 {
			msg = "http2_fingerprint_failed"
		}
	default:
		return
	}
	if st == http.StateClosed || st == http.StateHijacked {
		if err := hc.Err(); err != nil {
			s.log.LogAttrs(context.Background(), slog.LevelInfo, msg,
				slog.String("remote", c.RemoteAddr().String()), slog.String("error", err.Error()))
		}
	}
}

// serveH2 serves a connection that negotiated h2 until it ends, with
// x/net's server (see New).
func (s *Server) serveH2(hc *httpfp.Conn) {
	//lint:ignore SA1019 x/net's server on purpose: see New
	s.h2.ServeConn(hc, &http2.ServeConnOpts{Context: connContext(s.bg, hc), BaseConfig: s.h1, Handler: s.h1.Handler})
}

// helloError logs a ClientHello that could not be fingerprinted, once per
// connection. Plain HTTP on the TLS port is answered, not logged.
func (s *Server) helloError(remote net.Addr, err error) {
	if errors.Is(err, io.EOF) { // closed before a byte: port probes, health checks
		return
	}
	if errors.Is(err, tlsfp.ErrNotTLS) {
		s.metrics.handshakes.WithLabelValues("plain_http", "tcp").Inc()
		return
	}
	s.metrics.handshakes.WithLabelValues("bad_hello", "tcp").Inc()
	s.log.LogAttrs(context.Background(), slog.LevelInfo, "bad_client_hello",
		slog.String("remote", remote.String()), slog.String("error", err.Error()))
}

// parkHost is what the Server gives parking (park.Host): its connections
// are tracked for Shutdown while parked, and go back to the HTTP/1 server
// when they wake.
type parkHost struct{ s *Server }

func (h parkHost) Track(c net.Conn) bool  { return h.s.trackConn(c) }
func (h parkHost) Untrack(c net.Conn)     { h.s.untrackConn(c) }
func (h parkHost) Resume(c net.Conn) bool { return h.s.h1ln.push(c) }

// parkOptions are the options of parking under cfg: limits.park_after
// (0s: never), and the Server's test hooks.
func (s *Server) parkOptions(cfg *config.Config) park.Options {
	return park.Options{After: cfg.Limits.ParkAfter.D(), Disabled: cfg.Limits.ParkAfter == 0,
		NoPoll: s.env.hooks.parkNoPoll, Trace: s.env.hooks.parkTrace}
}

// countedConn releases its client's connection count once, when it is
// closed (by whichever server holds it then).
type countedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// NetConn returns the connection underneath, for tlsfp.ConnOf.
func (c *countedConn) NetConn() net.Conn { return c.Conn }

// addrOf is the IP address of a net.Addr.
func addrOf(a net.Addr) netip.Addr {
	if ta, ok := a.(*net.TCPAddr); ok {
		ip, _ := netip.AddrFromSlice(ta.IP)
		return ip.Unmap()
	}
	return peerAddr(a.String())
}

// proxyError logs a connection whose PROXY protocol header could not be
// read, once.
func (s *Server) proxyError(remote net.Addr, err error) {
	s.metrics.handshakes.WithLabelValues("bad_proxy_header", "tcp").Inc()
	s.log.LogAttrs(context.Background(), slog.LevelInfo, "bad_proxy_header",
		slog.String("remote", remote.String()), slog.String("error", err.Error()))
}

// connContext puts a connection's fingerprints in its context: the TLS
// hello's (tlsfp, found under the httpfp tap) and the header capture
// (httpfp). It is http.Server.ConnContext for HTTP/1 and the base of each
// HTTP/2 connection's context.
func connContext(ctx context.Context, c net.Conn) context.Context {
	var hc *httpfp.Conn
	switch c := c.(type) {
	case *httpfp.Conn:
		hc = c
	case *park.Conn:
		hc = c.Conn
	default:
		return ctx
	}
	if fc := tlsfp.ConnOf(hc); fc != nil {
		ctx = tlsfp.NewContext(ctx, fc)
	}
	return httpfp.NewContext(ctx, hc)
}

// chanListener feeds handshaken HTTP/1 connections to an http.Server.
type chanListener struct {
	addr   net.Addr
	ch     chan net.Conn
	done   chan struct{}
	closed sync.Once
}

func newChanListener(addr net.Addr) *chanListener {
	return &chanListener{addr: addr, ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *chanListener) push(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.closed.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.addr }

// looksLikeHTTP reports whether a TLS record header is the start of a plain
// HTTP request (as net/http's tlsRecordHeaderLooksLikeHTTP).
func looksLikeHTTP(h []byte) bool {
	switch string(h) {
	case "GET /", "HEAD ", "POST ", "PUT /", "OPTIO", "DELET", "PATCH", "CONNE", "TRACE":
		return true
	}
	return false
}

// recordingConn keeps the first bytes a client sends, until the handshake
// ends, so that a plain-HTTP request that crypto/tls already consumed can
// still be read and answered.
type recordingConn struct {
	net.Conn
	rec  []byte
	done bool
	// unknownName: the hello's server name is no site's
	// (refuseUnknownNames); set and read in the handshake's goroutine.
	unknownName bool
}

// refuseUnknownNames wraps the certificate manager's GetCertificate so that
// a hello whose server name no site serves (certs.ErrUnknownHost: in
// self-signed and acme modes) is refused with the alert unrecognized_name
// (RFC 6066, section 3), which says what is wrong, instead of the
// internal_error crypto/tls sends for an error of GetCertificate: answering
// no certificate and no error leaves crypto/tls without one, which it
// refuses so. No certificate of another site is shown to a client that
// did not name it (a scanner learns no site's name from the address).
func refuseUnknownNames(get func(*tls.ClientHelloInfo) (*tls.Certificate, error)) func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		c, err := get(hello)
		if errors.Is(err, certs.ErrUnknownHost) {
			if rc, ok := hello.Conn.(*recordingConn); ok {
				rc.unknownName = true
			}
			return nil, nil
		}
		return c, err
	}
}

const maxRecorded = 4 << 10

func (c *recordingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if !c.done && len(c.rec) < maxRecorded {
		c.rec = append(c.rec, p[:min(n, maxRecorded-len(c.rec))]...)
	}
	return n, err
}

// NetConn returns the connection under the recorder, so that
// tlsfp.ConnOf finds the fingerprinting connection beneath it.
func (c *recordingConn) NetConn() net.Conn { return c.Conn }

// stop ends recording and returns what was recorded.
func (c *recordingConn) stop() []byte {
	c.done = true
	b := c.rec
	c.rec = nil
	return b
}

func netipPrefix(p config.Prefix) netip.Prefix { return netip.Prefix(p) }

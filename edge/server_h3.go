package edge

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"

	"github.com/maatproxy/maat/httpfp"
	"github.com/maatproxy/maat/tlsfp"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/quic-go/quic-go/qlogwriter"
)

// startH3 serves HTTP/3 on udp, the UDP port of the same number as the
// TCP one (listenHTTPS).
func (s *Server) startH3(udp net.PacketConn) error {
	s.udp = udp
	limit := int64(s.base.Limits.QUICHandshakes)
	tr := &quic.Transport{
		Conn:        udp,
		ConnContext: s.quicConnContext,
		// Handshakes piling up (a flood of Initials from spoofed addresses):
		// new clients first prove their address with a Retry round trip,
		// unless it completed a handshake lately (seen.go) — and even then
		// past twice the limit, so that a flood spoofing seen addresses
		// holds no more than that.
		VerifySourceAddress: func(a net.Addr) bool {
			n := s.quicHS.Load()
			return n >= 2*limit || n >= limit && !s.seen.has(addrOf(a))
		},
	}
	s.quicTr = tr
	base := s.tlsConf.Clone()
	base.GetConfigForClient = tlsfp.GetConfigForClient(s.refuseQUIC(s.quicSessions(base, base.GetConfigForClient))) // limits.refuse_early (early.go)
	tlsConf := http3.ConfigureTLSConfig(base)
	qconf := &quic.Config{
		HandshakeIdleTimeout: s.base.Timeouts.Handshake.D(),
		MaxIdleTimeout:       s.base.Timeouts.Idle.D(),
		MaxIncomingStreams:   int64(s.base.Limits.H2Streams),
		Allow0RTT:            false, // replayable requests would bypass the single-use marks
		// The qlog tracer is quic-go's only view of the decoded QPACK
		// fields in wire order: httpfp keeps the HEADERS, drops the rest.
		// Built per connection, so that it follows a reloaded
		// fingerprints.ja4h as TCP connections do.
		Tracer: func(ctx context.Context, isClient bool, id quic.ConnectionID) qlogwriter.Trace {
			cfg := httpfp.Config{JA4H: s.handler.Load().cfg.Fingerprints.JA4H, MaxHeaderBytes: s.base.Limits.HeaderBytes}
			return httpfp.H3Tracer(cfg, nil)(ctx, isClient, id)
		},
	}
	ln, err := tr.Listen(tlsConf, qconf) // not early: an accepted connection has finished its handshake
	if err != nil {
		_ = udp.Close()
		return fmt.Errorf("edge: http3: %w", err)
	}
	s.h3 = &http3.Server{
		Handler:        h3Request(httpfp.Handler(http.HandlerFunc(s.serveH3))),
		MaxHeaderBytes: s.base.Limits.HeaderBytes,
		IdleTimeout:    s.base.Timeouts.Idle.D(),
		ConnContext: func(ctx context.Context, c *quic.Conn) context.Context {
			if hs, ok := ctx.Value(quicHandshakeKey{}).(*quicHandshake); ok && hs.done.CompareAndSwap(false, true) {
				s.quicHS.Add(-1)
				s.metrics.handshakes.WithLabelValues("ok", "quic").Inc()
				s.seen.add(addrOf(c.RemoteAddr()))
			}
			// A handler ends an answer it cannot finish (the upstream's
			// cut short, the client gone before it) with
			// http.ErrAbortHandler, which quic-go recovers as net/http
			// does: it resets the stream, quietly. httputil.ReverseProxy
			// and proxyCommon panic only where they see net/http's
			// ServerContextKey (quic-go sets its own), and would otherwise
			// end a cut answer cleanly: the edge's TCP server stands for
			// it (its ErrorLog is the edge's log too).
			ctx = context.WithValue(ctx, http.ServerContextKey, s.h1)
			return httpfp.NewH3Context(ctx, c) // the tlsfp Capture is in ctx already
		},
	}
	s.addrs.HTTP3 = udp.LocalAddr().String()
	s.group.Go("http3", func() error { return serveErr(s.h3.ServeListener(ln)) })
	return nil
}

// serveH3 is the handler for HTTP/3.
func (s *Server) serveH3(w http.ResponseWriter, r *http.Request) {
	if !s.requests.Enter() {
		return
	}
	defer s.requests.Leave()
	s.handler.Load().ServeHTTP(w, r)
}

// h3Request keeps the request quic-go passed to the handler in its
// context, for requestTrailer: quic-go sets the Trailer field of that
// one request (replacing the map) once the body's trailers were read,
// where the copies WithContext made since never see it.
func h3Request(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodHead: // no body, no trailers: no copy
		default:
			r = r.WithContext(context.WithValue(r.Context(), h3RequestKey{}, r))
		}
		h.ServeHTTP(w, r)
	})
}

type h3RequestKey struct{}

// requestTrailer is r's trailer: on HTTP/3, that of the request quic-go
// filled in (h3Request).
func requestTrailer(r *http.Request) http.Header {
	if in, ok := r.Context().Value(h3RequestKey{}).(*http.Request); ok {
		return in.Trailer
	}
	return r.Trailer
}

// errQUICBusy refuses a QUIC connection while too many handshakes are in
// progress.
var errQUICBusy = errors.New("edge: too many QUIC handshakes in progress")

// quicHandshake marks a QUIC connection's handshake as counted in
// Server.quicHS until it ends: accepted by HTTP/3, or failed.
type quicHandshake struct{ done atomic.Bool }

type quicHandshakeKey struct{}

// quicConnContext starts a QUIC connection: it counts the handshake in
// progress (refusing it beyond 16 times limits.quic_handshakes) and
// prepares the ClientHello capture for JA4.
func (s *Server) quicConnContext(ctx context.Context, _ *quic.ClientInfo) (context.Context, error) {
	if s.quicHS.Load() >= 16*int64(s.base.Limits.QUICHandshakes) {
		s.metrics.limited.WithLabelValues("quic_handshakes").Inc()
		return nil, errQUICBusy
	}
	s.quicHS.Add(1)
	hs := &quicHandshake{}
	// The context ends when the connection closes or its handshake fails;
	// a handshake that never reached HTTP/3 counts as failed.
	context.AfterFunc(ctx, func() {
		if hs.done.CompareAndSwap(false, true) {
			s.quicHS.Add(-1)
			s.metrics.handshakes.WithLabelValues("failed", "quic").Inc()
		}
	})
	ctx = context.WithValue(ctx, quicHandshakeKey{}, hs)
	return tlsfp.NewContext(ctx, tlsfp.NewCapture()), nil
}

// quicSessions wraps next, the GetConfigForClient of QUIC connections, so
// that with fingerprints.ticket_ja4 on, a connection's session tickets
// carry the JA4 of the session's full handshake (tlsfp.SessionConfig of
// base, the QUIC tls.Config, for the connection's Capture), as on TCP.
// quic-go and its http3 add their own entries to the same tickets, around
// it.
func (s *Server) quicSessions(base *tls.Config, next func(*tls.ClientHelloInfo) (*tls.Config, error)) func(*tls.ClientHelloInfo) (*tls.Config, error) {
	return func(chi *tls.ClientHelloInfo) (*tls.Config, error) {
		if next != nil {
			if conf, err := next(chi); conf != nil || err != nil {
				return conf, err
			}
		}
		src, ok := tlsfp.SourceFromContext(chi.Context())
		if !ok || !s.handler.Load().cfg.Fingerprints.TicketJA4On() {
			return nil, nil
		}
		return tlsfp.SessionConfig(base, src), nil
	}
}

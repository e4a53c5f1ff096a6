package edge

import (
	"context"
	"fmt"
	"net"
	"net/http"

	"github.com/maatproxy/maat/httpfp"
	"github.com/maatproxy/maat/tlsfp"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/quic-go/quic-go/qlogwriter"
)

// startH3 serves HTTP/3 on the UDP port of the same number as the TCP one.
func (s *Server) startH3(tcp *net.TCPAddr) error {
	udp, err := s.listenUDP(&net.UDPAddr{IP: tcp.IP, Port: tcp.Port, Zone: tcp.Zone})
	if err != nil {
		return fmt.Errorf("edge: listen http3 (udp): %w", err)
	}
	s.udp = udp
	tr := &quic.Transport{
		Conn: udp,
		ConnContext: func(ctx context.Context, _ *quic.ClientInfo) (context.Context, error) {
			return tlsfp.NewContext(ctx, tlsfp.NewCapture()), nil
		},
	}
	base := s.tlsConf.Clone()
	base.GetConfigForClient = tlsfp.GetConfigForClient(base.GetConfigForClient)
	tlsConf := http3.ConfigureTLSConfig(base)
	qconf := &quic.Config{
		HandshakeIdleTimeout: s.base.Timeouts.Handshake.D(),
		MaxIdleTimeout:       s.base.Timeouts.Idle.D(),
		Allow0RTT:            false, // replayable requests would bypass the single-use marks
		// The qlog tracer is quic-go's only view of the decoded QPACK
		// fields in wire order: httpfp keeps the HEADERS, drops the rest.
		// Built per connection, so that it follows a reloaded
		// fingerprints.ja4h as TCP connections do.
		Tracer: func(ctx context.Context, isClient bool, id quic.ConnectionID) qlogwriter.Trace {
			cfg := httpfp.Config{JA4H: s.handler.Load().cfg.Fingerprints.JA4H, MaxHeaderBytes: 1 << 20}
			return httpfp.H3Tracer(cfg, nil)(ctx, isClient, id)
		},
	}
	ln, err := tr.ListenEarly(tlsConf, qconf)
	if err != nil {
		_ = udp.Close()
		return fmt.Errorf("edge: http3: %w", err)
	}
	s.h3 = &http3.Server{
		Handler:        httpfp.Handler(http.HandlerFunc(s.serveH3)),
		MaxHeaderBytes: 1 << 20,
		IdleTimeout:    s.base.Timeouts.Idle.D(),
		ConnContext: func(ctx context.Context, c *quic.Conn) context.Context {
			return httpfp.NewH3Context(ctx, c) // the tlsfp Capture is in ctx already
		},
	}
	s.addrs.HTTP3 = udp.LocalAddr().String()
	s.group.Go("http3", func() error { return serveErr(s.h3.ServeListener(ln)) })
	return nil
}

// serveH3 is the handler for HTTP/3.
func (s *Server) serveH3(w http.ResponseWriter, r *http.Request) { s.handler.Load().ServeHTTP(w, r) }

package edge

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/maatproxy/maat/fplog"
	"github.com/maatproxy/maat/geo"
	"github.com/maatproxy/maat/policy"
	"github.com/maatproxy/maat/tlsfp"
)

// Early refusal (limits.refuse_early; issue 35, "cheap refusals"): a
// client whose every request the policy would deny, from its ClientHello
// and address alone (policy.DenyConn), is refused before crypto/tls does
// any work for it: on TCP the edge reads the hello itself
// (tlsfp.Conn.ReadHello) and answers with a fatal access_denied alert; on
// QUIC its GetConfigForClient fails the handshake with that alert, which
// quic-go sends as CRYPTO_ERROR 0x131. No certificate signature, no key
// exchange. The standard path (refuse_early: false) gives the same client
// the deny page after a full handshake.

// errRefusedEarly fails a QUIC handshake at its ClientHello. crypto/tls
// hands a GetConfigForClient error to quic-go wrapped with its own
// internal_error alert after it; quic-go closes the connection with
// CRYPTO_ERROR 0x100 plus the first tls.AlertError it finds in the
// error: this one's access_denied, 0x131 (TestRefuseEarlyQUIC pins it).
var errRefusedEarly = fmt.Errorf("edge: refused at the ClientHello: %w", tls.AlertError(tlsfp.AlertAccessDenied))

// refusesEarly reports whether h refuses any connection early (asked on
// every new connection; NewHandler computes it once with earlyRefusal).
func (h *Handler) refusesEarly() bool { return h.refuseEarly }

// earlyRefusal reports whether the configuration asks for early refusal,
// no site runs dry (a dry run decides and logs, and forwards everything),
// and every site's policy can deny a connection.
func (h *Handler) earlyRefusal() bool {
	if !h.cfg.Limits.RefuseEarly {
		return false
	}
	for _, st := range h.connSites() {
		if st.dryRun || !h.policyFor(st).policy.DeniesConns() {
			return false
		}
	}
	return true
}

// connSites are the sites a connection's requests may reach, whatever its
// SNI names: HTTP/2 coalesces hosts on one connection, and a client names
// the Host it likes.
func (h *Handler) connSites() []*site {
	if len(h.sites.list) == 0 && h.sites.fallback != nil {
		return []*site{h.sites.fallback}
	}
	return h.sites.list
}

// denyConn reports whether every request of a connection from peer whose
// ClientHello is fp would be denied, and what geo knows of peer. It gives
// the policy what policyRequest gives it for each request on the
// connection.
func (h *Handler) denyConn(fp *tlsfp.Fingerprint, peer netip.Addr) (geo.Info, bool) {
	if fp.ALPN == "acme-tls/1" {
		return geo.Info{}, false // the ACME CA validating a TLS-ALPN-01 challenge
	}
	// The JA4 the request path judges by (reqState.ja4): a resumed
	// hello's full handshake's.
	c := policy.ConnInfo{RemoteAddr: peer, JA4: fp.JA4Session, ClientFamily: fp.Client.Family}
	var gi geo.Info
	if h.env.Geo != nil {
		gi = h.env.Geo.Lookup(peer)
		c.ASN, c.ASOrg, c.Country = gi.ASN, gi.ASOrg, gi.Country
	}
	// Every site's policy must deny it: the requests of one connection may
	// name any site (see connSites).
	for _, st := range h.connSites() {
		if st.dryRun || !h.policyFor(st).policy.DenyConn(&c) {
			return gi, false
		}
	}
	return gi, true
}

// refuseTCP reads the ClientHello of c, a connection from peer, and
// refuses c there when its every request would be denied. It reports
// whether it did; c is closed then. A connection from a trusted proxy is
// never refused early: its requests name their client in X-Forwarded-For.
func (s *Server) refuseTCP(c net.Conn, peer netip.Addr) bool {
	h := s.handler.Load()
	if !h.refusesEarly() || h.trusted.Contains(peer) {
		return false
	}
	fc := tlsfp.ConnOf(c)
	if fc == nil {
		return false
	}
	// The hello is read under the handshake timeout (tlsfp's), and ends
	// when shutdown begins, as a handshake does.
	stop := context.AfterFunc(s.hsCtx, func() { _ = c.Close() })
	fp, err := fc.ReadHello()
	stop()
	if err != nil || fp == nil {
		return false // crypto/tls answers it as always (helloError logged it)
	}
	gi, deny := h.denyConn(fp, peer)
	if !deny {
		return false
	}
	s.metrics.refusedEarly.WithLabelValues("tcp").Inc()
	h.logRefusal(fp, peer, gi)
	_ = fc.Refuse(tlsfp.AlertAccessDenied)
	_ = c.Close() // releases what the layers above hold (conns_per_client)
	return true
}

// refuseQUIC wraps next, the GetConfigForClient of QUIC connections, so
// that a connection whose every request would be denied is refused at its
// ClientHello. It goes inside tlsfp.GetConfigForClient, which has put the
// fingerprint in the connection's context by then.
func (s *Server) refuseQUIC(next func(*tls.ClientHelloInfo) (*tls.Config, error)) func(*tls.ClientHelloInfo) (*tls.Config, error) {
	return func(chi *tls.ClientHelloInfo) (*tls.Config, error) {
		if h := s.handler.Load(); h.refusesEarly() && chi.Conn != nil {
			peer := addrOf(chi.Conn.RemoteAddr())
			if fp := tlsfp.FromContext(chi.Context()); fp != nil && !h.trusted.Contains(peer) {
				if gi, deny := h.denyConn(fp, peer); deny {
					s.metrics.refusedEarly.WithLabelValues("quic").Inc()
					h.logRefusal(fp, peer, gi)
					return nil, errRefusedEarly
				}
			}
		}
		if next == nil {
			return nil, nil
		}
		return next(chi)
	}
}

// logRefusal writes the fingerprint log line of a connection refused
// early: the connection's fields, DENY and reason early_refusal, nothing
// of a request (there was none). Its fields are bounded as every line's.
func (h *Handler) logRefusal(fp *tlsfp.Fingerprint, peer netip.Addr, gi geo.Info) {
	if h.env.FPLog == nil {
		return
	}
	h.env.FPLog.Write(&fplog.Record{
		Time: time.Now(), RequestID: h.env.ids.next(), RemoteIP: peer,
		ASN: gi.ASN, ASOrg: gi.ASOrg, Country: gi.Country,
		TLSVersion: fp.TLSVersion, SNI: fp.SNI, ALPN: fp.ALPN,
		JA4: fp.JA4, JA4R: fp.JA4R, JA4O: fp.JA4O, JA4RO: fp.JA4RO, ClientFamily: fp.Client.Family,
		Action: fplog.ActionDeny, Reason: reasonEarlyRefusal,
	})
}

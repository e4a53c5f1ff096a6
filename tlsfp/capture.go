package tlsfp

import (
	"crypto/tls"
	"errors"
	"slices"
	"sync/atomic"
)

// Capture holds the fingerprint of a QUIC connection, taken by
// [GetConfigForClient] from crypto/tls's ClientHelloInfo. Create one per
// connection in quic.Transport.ConnContext and put it in the context with
// [NewContext]:
//
//	tr.ConnContext = func(ctx context.Context, _ *quic.ClientInfo) (context.Context, error) {
//		return tlsfp.NewContext(ctx, tlsfp.NewCapture()), nil
//	}
//	tlsConf.GetConfigForClient = tlsfp.GetConfigForClient(tlsConf.GetConfigForClient)
//
// quic-go derives the context of the handshake (ClientHelloInfo.Context) and
// of every request on the connection from that context, so the fingerprint
// reaches the handler without any map keyed by address.
type Capture struct {
	result atomic.Pointer[result]
}

// NewCapture returns an empty Capture.
func NewCapture() *Capture { return new(Capture) }

// Fingerprint returns the captured fingerprint; nil before the ClientHello,
// or if it could not be fingerprinted (see Err).
func (c *Capture) Fingerprint() *Fingerprint {
	if c == nil {
		return nil
	}
	if r := c.result.Load(); r != nil {
		return r.fp
	}
	return nil
}

// Err returns why the Capture has no fingerprint, or nil.
func (c *Capture) Err() error {
	if r := c.result.Load(); r != nil {
		return r.err
	}
	return nil
}

// GetConfigForClient wraps next, a tls.Config.GetConfigForClient callback
// (which may be nil), so that the ClientHello of a connection whose context
// carries a [*Capture] is fingerprinted into it as a QUIC hello. The first
// hello of a connection is kept. Connections without a Capture (such as TCP
// connections fingerprinted by [NewListener]) are left alone. The wrapper
// never fails a handshake itself.
func GetConfigForClient(next func(*tls.ClientHelloInfo) (*tls.Config, error)) func(*tls.ClientHelloInfo) (*tls.Config, error) {
	return func(chi *tls.ClientHelloInfo) (*tls.Config, error) {
		if c, ok := sourceFromContext(chi.Context()).(*Capture); ok && c.result.Load() == nil {
			fp, err := FromClientHelloInfo(chi, true)
			c.result.CompareAndSwap(nil, &result{fp: fp, err: err})
		}
		if next == nil {
			return nil, nil
		}
		return next(chi)
	}
}

// errNoHello reports a missing ClientHelloInfo.
var errNoHello = errors.New("tlsfp: no ClientHelloInfo")

// FromClientHelloInfo computes the fingerprint of the hello crypto/tls
// parsed into chi, for QUIC if quic is set. crypto/tls keeps the cipher
// suites and extension types in wire order, GREASE included, so the result
// equals that of [ParseHandshake] on the same bytes. Two differences in
// input: without supported_versions, crypto/tls reports the versions up to
// legacy_version instead of legacy_version itself (the highest is the
// same); with it, legacy_version is not reported and taken as TLS 1.2, as
// RFC 8446 requires.
func FromClientHelloInfo(chi *tls.ClientHelloInfo, quic bool) (*Fingerprint, error) {
	if chi == nil {
		return nil, errNoHello
	}
	h := &Hello{
		CipherSuites: chi.CipherSuites,
		Extensions:   chi.Extensions,
		ServerName:   chi.ServerName,
		ALPN:         chi.SupportedProtos,
	}
	if h.has(extSupportedVersions) {
		h.SupportedVersions = chi.SupportedVersions
		// crypto/tls does not report legacy_version; a client sending
		// supported_versions sets it to TLS 1.2 (RFC 8446 §4.1.2), and
		// JA4 falls back to it when the list holds only GREASE.
		h.Version = tls.VersionTLS12
	} else if len(chi.SupportedVersions) > 0 {
		h.Version = slices.Max(chi.SupportedVersions)
	}
	if len(chi.SignatureSchemes) > 0 {
		h.SignatureAlgorithms = make([]uint16, len(chi.SignatureSchemes))
		for i, s := range chi.SignatureSchemes {
			h.SignatureAlgorithms[i] = uint16(s)
		}
	}
	return h.Fingerprint(quic), nil
}

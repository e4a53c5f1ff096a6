package tlsfp

import (
	"context"
	"net"
)

// Source gives the fingerprint of a connection once its ClientHello has been
// read: [*Conn] on TCP, [*Capture] on QUIC.
type Source interface {
	Fingerprint() *Fingerprint
}

type contextKey struct{}

// NewContext returns a copy of ctx that carries s, the fingerprint source of
// the connection ctx belongs to.
func NewContext(ctx context.Context, s Source) context.Context {
	return context.WithValue(ctx, contextKey{}, s)
}

// FromContext returns the fingerprint of the connection ctx belongs to, or
// nil if there is none (yet).
func FromContext(ctx context.Context) *Fingerprint {
	s, _ := ctx.Value(contextKey{}).(Source)
	if s == nil {
		return nil
	}
	return s.Fingerprint()
}

// SourceFromContext returns the Source that NewContext put in ctx, e.g.
// for [SessionConfig] in a GetConfigForClient callback of QUIC.
func SourceFromContext(ctx context.Context) (Source, bool) {
	s := sourceFromContext(ctx)
	return s, s != nil
}

// sourceFromContext returns the Source in ctx, or nil.
func sourceFromContext(ctx context.Context) Source {
	s, _ := ctx.Value(contextKey{}).(Source)
	return s
}

// ConnOf returns the [*Conn] under c: c itself, or the connection under a
// *tls.Conn (or any connection with a NetConn method). It returns nil if c
// was not accepted from a listener of [NewListener]. Use it in
// http.Server.ConnContext:
//
//	ConnContext: func(ctx context.Context, c net.Conn) context.Context {
//		if fc := tlsfp.ConnOf(c); fc != nil {
//			return tlsfp.NewContext(ctx, fc)
//		}
//		return ctx
//	}
func ConnOf(c net.Conn) *Conn {
	for range 8 { // a few layers at most; never loop on a cycle
		switch x := c.(type) {
		case *Conn:
			return x
		case interface{ NetConn() net.Conn }: // *tls.Conn among others
			c = x.NetConn()
		default:
			return nil
		}
	}
	return nil
}

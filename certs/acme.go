package certs

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
)

// acmeSource is ModeACME.
type acmeSource struct{}

func newACMESource(ctx context.Context, cfg *Config) (*acmeSource, error) {
	return nil, errors.New("certs: mode acme: not implemented yet")
}

func (a *acmeSource) getCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	return nil, ErrNoCertificate
}
func (a *acmeSource) status() []NameStatus                    { return nil }
func (a *acmeSource) run(ctx context.Context) error           { <-ctx.Done(); return nil }
func (a *acmeSource) httpHandler(h http.Handler) http.Handler { return h }

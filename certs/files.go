package certs

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"time"
)

// fileSource is ModeFiles: one certificate chain and key from files, served
// for every server name.
type fileSource struct {
	cfg *Config

	mu      sync.RWMutex
	hosts   []string // Config.Hosts, or as setHosts changed them
	cert    *tls.Certificate
	lastErr error
}

func newFileSource(cfg *Config) (*fileSource, error) {
	f := &fileSource{cfg: cfg, hosts: cfg.Hosts}
	c, err := f.load(f.hosts)
	if err != nil {
		return nil, err
	}
	f.cert = c
	cfg.event(Event{Kind: EventLoaded, Name: cfg.CertFile, NotAfter: c.Leaf.NotAfter})
	return f, nil
}

// load reads the files and checks them, for hosts.
func (f *fileSource) load(hosts []string) (*tls.Certificate, error) {
	c, err := tls.LoadX509KeyPair(f.cfg.CertFile, f.cfg.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("certs: loading %s and %s: %w", f.cfg.CertFile, f.cfg.KeyFile, err)
	}
	now := f.cfg.now()
	var errs []error
	if now.After(c.Leaf.NotAfter) {
		errs = append(errs, fmt.Errorf("expired on %s", c.Leaf.NotAfter.UTC().Format("2006-01-02 15:04:05Z")))
	}
	for _, h := range hosts {
		if err := c.Leaf.VerifyHostname(h); err != nil {
			errs = append(errs, fmt.Errorf("does not cover host %q", h))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("certs: certificate %s: %w", f.cfg.CertFile, err)
	}
	return &c, nil
}

func (f *fileSource) setHosts(hosts []string) {
	f.mu.Lock()
	f.hosts = hosts
	f.mu.Unlock()
}

func (f *fileSource) reload() error {
	f.mu.RLock()
	hosts := f.hosts
	f.mu.RUnlock()
	c, err := f.load(hosts)
	f.mu.Lock()
	f.lastErr = err
	e := Event{Kind: EventFailed, Name: f.cfg.CertFile, NotAfter: f.cert.Leaf.NotAfter, Err: err}
	if err == nil {
		f.cert = c
		e = Event{Kind: EventLoaded, Name: f.cfg.CertFile, NotAfter: c.Leaf.NotAfter}
	}
	f.mu.Unlock()
	f.cfg.event(e) // unlocked: the hook may call Status
	return err
}

func (f *fileSource) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.cert, nil
}

func (f *fileSource) status() []NameStatus {
	f.mu.RLock()
	defer f.mu.RUnlock()
	names := f.hosts
	if len(names) == 0 {
		names = f.cert.Leaf.DNSNames
	}
	if len(names) == 0 {
		names = []string{f.cfg.CertFile}
	}
	s := make([]NameStatus, 0, len(names))
	for _, n := range names {
		st := NameStatus{Name: n, NotAfter: f.cert.Leaf.NotAfter}
		if f.lastErr != nil {
			st.LastError = f.lastErr.Error()
		}
		if len(f.hosts) > 0 && f.cert.Leaf.VerifyHostname(n) != nil {
			// A name added by setHosts that the files do not cover: no
			// certificate until they do.
			st.NotAfter = time.Time{}
			st.LastError = fmt.Sprintf("certs: the certificate of %s does not cover %q", f.cfg.CertFile, n)
		}
		s = append(s, st)
	}
	return s
}

func (f *fileSource) run(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

package certs

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"sync"
	"time"
)

// Cache keys of the local CA (file names in a [DirCache]).
const (
	localCACertKey = "maat-local-ca.pem"
	localCAKeyKey  = "maat-local-ca-key.pem"
)

const (
	localCALifetime   = 10 * 365 * 24 * time.Hour
	localLeafLifetime = 30 * 24 * time.Hour
	// localLeafRenew is how long before expiry a leaf is made again.
	localLeafRenew = 24 * time.Hour
	// maxLocalLeaves bounds the leaves kept in memory: with AnyHost a
	// client chooses the names.
	maxLocalLeaves = 4096
	// noSNI keys the leaf for hellos without a server name.
	noSNI = ""
)

// localCA is ModeSelfSigned: a CA made once (and kept in the cache when
// there is one) that signs a leaf per server name on demand.
type localCA struct {
	cfg  *Config
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte

	mu         sync.Mutex
	configured map[string]bool // Config.Hosts, or as setHosts changed them
	leaves     map[string]*tls.Certificate
}

func newLocalCA(ctx context.Context, cfg *Config) (*localCA, error) {
	l := &localCA{cfg: cfg, leaves: map[string]*tls.Certificate{}}
	l, err := l.init(ctx)
	if err != nil {
		return nil, err
	}
	if err := l.setHosts(cfg.Hosts); err != nil {
		return nil, err
	}
	return l, nil
}

// setHosts makes hosts the configured names: a leaf is made for each at
// once (so that Status lists them, valid), and the leaves of names no
// longer configured go.
func (l *localCA) setHosts(hosts []string) error {
	now := l.cfg.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.configured = make(map[string]bool, len(hosts))
	for _, h := range hosts {
		l.configured[h] = true
	}
	for name := range l.leaves {
		if name != noSNI && !l.served(name) {
			delete(l.leaves, name)
		}
	}
	for h := range l.configured {
		if _, err := l.leafLocked(h, now); err != nil {
			return err
		}
	}
	return nil
}

// served reports whether a certificate is made for name; l.mu held.
func (l *localCA) served(name string) bool {
	return name == noSNI || name == "localhost" || l.cfg.AnyHost || l.configured[name]
}

// init loads the CA from the cache or makes one (and stores it there).
func (l *localCA) init(ctx context.Context) (*localCA, error) {
	c := l.cfg.cache()
	if c != nil {
		ok, err := l.load(ctx, c)
		if err != nil {
			return nil, err
		}
		if ok {
			return l, nil
		}
	}
	if err := l.create(); err != nil {
		return nil, err
	}
	if c != nil {
		keyDER, err := x509.MarshalECPrivateKey(l.key)
		if err != nil {
			return nil, fmt.Errorf("certs: local CA: %w", err)
		}
		keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
		// The key first: a certificate without its key would be useless.
		if err := c.Put(ctx, localCAKeyKey, keyPEM); err != nil {
			return nil, fmt.Errorf("certs: storing the local CA: %w", err)
		}
		if err := c.Put(ctx, localCACertKey, l.pem); err != nil {
			return nil, fmt.Errorf("certs: storing the local CA: %w", err)
		}
	}
	return l, nil
}

// load reads the CA from the cache; it reports false when there is none.
func (l *localCA) load(ctx context.Context, c Cache) (bool, error) {
	certPEM, err := c.Get(ctx, localCACertKey)
	if errors.Is(err, ErrCacheMiss) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("certs: reading the local CA: %w", err)
	}
	keyPEM, err := c.Get(ctx, localCAKeyKey)
	if err != nil {
		return false, fmt.Errorf("certs: reading the local CA key: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return false, fmt.Errorf("certs: local CA in the cache: %w", err)
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok || !pair.Leaf.IsCA {
		return false, errors.New("certs: local CA in the cache: not an ECDSA CA certificate")
	}
	if l.cfg.now().After(pair.Leaf.NotAfter) {
		return false, fmt.Errorf("certs: local CA in the cache expired on %s; delete %s and %s to make a new one",
			pair.Leaf.NotAfter.Format(time.DateOnly), localCACertKey, localCAKeyKey)
	}
	l.cert, l.key, l.pem = pair.Leaf, key, certPEM
	return true, nil
}

func (l *localCA) create() error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("certs: local CA key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return err
	}
	now := l.cfg.now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			Organization: []string{"Maat development CA"},
			CommonName:   fmt.Sprintf("Maat local CA %.8x", serial),
		},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(localCALifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return fmt.Errorf("certs: local CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return fmt.Errorf("certs: local CA: %w", err)
	}
	l.cert, l.key = cert, key
	l.pem = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return nil
}

func (l *localCA) rootPEM() []byte { return slices.Clone(l.pem) }

func (l *localCA) getCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	name := normalizeName(hello.ServerName)
	now := l.cfg.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.served(name) {
		return nil, fmt.Errorf("%w: %q", ErrUnknownHost, name)
	}
	return l.leafLocked(name, now)
}

// leafLocked returns the leaf of name, made anew when it is due; l.mu held.
func (l *localCA) leafLocked(name string, now time.Time) (*tls.Certificate, error) {
	if c := l.leaves[name]; c != nil && now.Before(c.Leaf.NotAfter.Add(-localLeafRenew)) {
		return c, nil
	}
	c, err := l.issue(name, now)
	if err != nil {
		return nil, err
	}
	if len(l.leaves) >= maxLocalLeaves {
		// Names a client chose (AnyHost) go; the configured ones stay.
		for n := range l.leaves {
			if !l.configured[n] {
				delete(l.leaves, n)
			}
		}
	}
	l.leaves[name] = c
	return c, nil
}

// issue signs a leaf for name, or for localhost and the loopback addresses
// when name is empty.
func (l *localCA) issue(name string, now time.Time) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("certs: leaf key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{Organization: []string{"Maat development certificate"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(localLeafLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if tmpl.NotAfter.After(l.cert.NotAfter) {
		tmpl.NotAfter = l.cert.NotAfter
	}
	switch ip := net.ParseIP(name); {
	case name == noSNI:
		tmpl.DNSNames = []string{"localhost"}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	case ip != nil:
		tmpl.IPAddresses = []net.IP{ip}
	default:
		tmpl.DNSNames = []string{name}
	}
	if len(tmpl.DNSNames) > 0 {
		tmpl.Subject.CommonName = tmpl.DNSNames[0]
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, l.cert, &key.PublicKey, l.key)
	if err != nil {
		return nil, fmt.Errorf("certs: leaf for %q: %w", name, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("certs: leaf for %q: %w", name, err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

func (l *localCA) status() []NameStatus {
	now := l.cfg.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for h := range l.configured { // a configured name's leaf is made when due, as a handshake would
		_, _ = l.leafLocked(h, now)
	}
	var s []NameStatus
	for name, c := range l.leaves {
		if name == noSNI {
			name = "(no server name)"
		}
		s = append(s, NameStatus{Name: name, NotAfter: c.Leaf.NotAfter})
	}
	return s
}

func (l *localCA) run(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

// randomSerial returns a random 128-bit certificate serial number.
func randomSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("certs: serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}

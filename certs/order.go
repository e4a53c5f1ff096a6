package certs

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"path"
	"time"

	"golang.org/x/crypto/acme"
)

// accountKeyKey is the cache key of the ACME account key (autocert's).
const accountKeyKey = "acme_account+key"

// acmeClient returns the client of the registered ACME account, registering
// it (or finding it registered) on first use.
func (a *acmeSource) acmeClient(ctx context.Context) (*acme.Client, error) {
	a.clientMu.Lock()
	defer a.clientMu.Unlock()
	if a.client != nil {
		return a.client, nil
	}
	key, err := a.accountKey(ctx)
	if err != nil {
		return nil, err
	}
	dir := a.cfg.DirectoryURL
	if dir == "" {
		dir = acme.LetsEncryptURL
	}
	c := &acme.Client{Key: key, DirectoryURL: dir, HTTPClient: a.http, UserAgent: "maat"}
	acct := &acme.Account{}
	if a.cfg.Email != "" {
		acct.Contact = []string{"mailto:" + a.cfg.Email}
	}
	if eab := a.cfg.EAB; eab != nil {
		acct.ExternalAccountBinding = &acme.ExternalAccountBinding{KID: eab.KeyID, Key: eab.HMACKey}
	}
	// Configuring a CA is taken as accepting its terms of service.
	if _, err := c.Register(ctx, acct, acme.AcceptTOS); err != nil && !accountExists(err) {
		return nil, fmt.Errorf("registering the ACME account at %s: %w", dir, err)
	}
	a.client = c
	return c, nil
}

// accountExists reports whether a registration failed only because the
// account is registered already.
func accountExists(err error) bool {
	var ae *acme.Error
	return errors.Is(err, acme.ErrAccountAlreadyExists) || errors.As(err, &ae) && ae.StatusCode == http.StatusConflict
}

// forgetClient drops the registered client after an error that may mean the
// CA no longer knows the account, so that the next order registers again.
func (a *acmeSource) forgetClient(err error) {
	var ae *acme.Error
	if errors.As(err, &ae) && (ae.ProblemType == "urn:ietf:params:acme:error:accountDoesNotExist" ||
		ae.ProblemType == "urn:ietf:params:acme:error:unauthorized") {
		a.clientMu.Lock()
		a.client = nil
		a.clientMu.Unlock()
	}
}

// accountKey loads the account key from the cache, or makes and stores one.
func (a *acmeSource) accountKey(ctx context.Context) (crypto.Signer, error) {
	b, err := a.cache.Get(ctx, accountKeyKey)
	if errors.Is(err, ErrCacheMiss) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		der, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return nil, err
		}
		if err := a.cache.Put(ctx, accountKeyKey, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})); err != nil {
			return nil, fmt.Errorf("storing the ACME account key: %w", err)
		}
		return key, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the ACME account key: %w", err)
	}
	p, _ := pem.Decode(b)
	if p == nil {
		return nil, fmt.Errorf("ACME account key %s in the cache is not PEM", accountKeyKey)
	}
	return parseKey(p.Bytes)
}

func parseKey(der []byte) (crypto.Signer, error) {
	if k, err := x509.ParseECPrivateKey(der); err == nil {
		return k, nil
	}
	if k, err := x509.ParsePKCS8PrivateKey(der); err == nil {
		if s, ok := k.(crypto.Signer); ok {
			return s, nil
		}
	}
	if k, err := x509.ParsePKCS1PrivateKey(der); err == nil {
		return k, nil
	}
	return nil, errors.New("unknown private key format")
}

// challengeTypes returns the challenge types to try, best first: tls-alpn-01
// always (port 443 is ours), http-01 once port 80 is served.
func (a *acmeSource) challengeTypes() []string {
	if a.tryHTTP01.Load() {
		return []string{challengeTLSALPN01, challengeHTTP01}
	}
	return []string{challengeTLSALPN01}
}

// order runs one ACME order for name (RFC 8555, section 7.4) and returns
// the issued certificate with its new ECDSA P-256 key. It tries each
// challenge type in turn, with a new order each time, as autocert does.
func (a *acmeSource) order(ctx context.Context, name string) (*tls.Certificate, error) {
	client, err := a.acmeClient(ctx)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, typ := range a.challengeTypes() {
		o, err := a.authorize(ctx, client, name, typ)
		if err != nil {
			a.forgetClient(err)
			errs = append(errs, fmt.Errorf("%s: %w", typ, err))
			if errors.Is(err, errNoChallenge) || isAuthorizationError(err) {
				continue
			}
			return nil, errors.Join(errs...)
		}
		c, err := a.finalize(ctx, client, o, name)
		if err != nil {
			a.forgetClient(err)
			return nil, err
		}
		return c, nil
	}
	return nil, errors.Join(errs...)
}

var errNoChallenge = errors.New("challenge type not offered")

func isAuthorizationError(err error) bool {
	var ae *acme.AuthorizationError
	var oe *acme.OrderError
	return errors.As(err, &ae) || errors.As(err, &oe)
}

// authorize creates an order for name and satisfies its pending
// authorizations with challenges of type typ; it returns the ready order.
func (a *acmeSource) authorize(ctx context.Context, client *acme.Client, name, typ string) (_ *acme.Order, err error) {
	o, err := client.AuthorizeOrder(ctx, acme.DomainIDs(name))
	if err != nil {
		return nil, fmt.Errorf("new order: %w", err)
	}
	defer func() {
		if err != nil {
			// Pending authorizations left behind count against the CA's
			// limits; after success none is pending.
			a.deactivatePending(ctx, client, o.AuthzURLs)
		}
	}()
	switch o.Status {
	case acme.StatusReady:
		return o, nil
	case acme.StatusPending:
	default:
		return nil, fmt.Errorf("new order %s has status %q", o.URI, o.Status)
	}
	for _, u := range o.AuthzURLs {
		z, err := client.GetAuthorization(ctx, u)
		if err != nil {
			return nil, fmt.Errorf("authorization: %w", err)
		}
		if z.Status != acme.StatusPending {
			continue
		}
		var chal *acme.Challenge
		for _, c := range z.Challenges {
			if c.Type == typ {
				chal = c
			}
		}
		if chal == nil {
			return nil, errNoChallenge
		}
		cleanup, err := a.provision(ctx, client, chal, name)
		if err != nil {
			return nil, err
		}
		_, err = client.Accept(ctx, chal)
		if err == nil {
			_, err = client.WaitAuthorization(ctx, z.URI)
		}
		cleanup()
		if err != nil {
			return nil, fmt.Errorf("validation: %w", err)
		}
	}
	o, err = client.WaitOrder(ctx, o.URI)
	if err != nil {
		return nil, fmt.Errorf("order: %w", err)
	}
	return o, nil
}

// deactivatePending gives up the authorizations still pending, ignoring
// errors, within deactivateTimeout, also when ctx has ended (the order was
// abandoned: all the more reason to release what it left).
func (a *acmeSource) deactivatePending(ctx context.Context, client *acme.Client, urls []string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deactivateTimeout)
	defer cancel()
	for _, u := range urls {
		if z, err := client.GetAuthorization(ctx, u); err == nil && z.Status == acme.StatusPending {
			client.RevokeAuthorization(ctx, u)
		}
	}
}

// provision makes the challenge's answer available to the CA (in memory and
// in the cache, for other nodes) and returns the function that removes it.
func (a *acmeSource) provision(ctx context.Context, client *acme.Client, chal *acme.Challenge, name string) (func(), error) {
	switch chal.Type {
	case challengeTLSALPN01:
		cert, err := client.TLSALPN01ChallengeCert(chal.Token, name)
		if err != nil {
			return nil, err
		}
		key := name + "+token"
		a.challMu.Lock()
		a.alpnCerts[name] = &cert
		a.challMu.Unlock()
		if b, err := encodePair(&cert); err == nil && a.cache != nil {
			a.cache.Put(ctx, key, b) // best effort: only other nodes need it
		}
		return func() {
			a.challMu.Lock()
			delete(a.alpnCerts, name)
			a.challMu.Unlock()
			a.cacheDelete(key)
		}, nil
	case challengeHTTP01:
		body, err := client.HTTP01ChallengeResponse(chal.Token)
		if err != nil {
			return nil, err
		}
		p := client.HTTP01ChallengePath(chal.Token)
		key := path.Base(p) + "+http-01"
		a.challMu.Lock()
		a.httpTokens[p] = []byte(body)
		a.challMu.Unlock()
		if a.cache != nil {
			a.cache.Put(ctx, key, []byte(body)) // best effort, as above
		}
		return func() {
			a.challMu.Lock()
			delete(a.httpTokens, p)
			a.challMu.Unlock()
			a.cacheDelete(key)
		}, nil
	}
	return nil, fmt.Errorf("unknown challenge type %q", chal.Type)
}

func (a *acmeSource) cacheDelete(key string) {
	if a.cache == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), cacheTimeout)
	defer cancel()
	a.cache.Delete(ctx, key)
}

// finalize sends the CSR of a new ECDSA P-256 key for the ready order and
// returns the issued chain with the key.
func (a *acmeSource) finalize(ctx context.Context, client *acme.Client, o *acme.Order, name string) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject:  pkix.Name{CommonName: name},
		DNSNames: []string{name},
	}, key)
	if err != nil {
		return nil, err
	}
	der, _, err := client.CreateCertFromOrder(ctx, o, csr, true)
	if err != nil {
		return nil, fmt.Errorf("finalizing order %s: %w", o.URI, err)
	}
	c, err := a.checkPair(name, der, key)
	if err != nil {
		return nil, fmt.Errorf("the CA's certificate: %w", err)
	}
	return c, nil
}

// checkPair returns the certificate of chain der and key if its leaf is
// valid now for name and matches key.
func (a *acmeSource) checkPair(name string, der [][]byte, key crypto.Signer) (*tls.Certificate, error) {
	if len(der) == 0 {
		return nil, errors.New("empty chain")
	}
	leaf, err := x509.ParseCertificate(der[0])
	if err != nil {
		return nil, err
	}
	now := a.cfg.now()
	if now.Before(leaf.NotBefore) || !now.Before(leaf.NotAfter) {
		return nil, fmt.Errorf("not valid now (valid %s to %s)", leaf.NotBefore.UTC().Format(time.RFC3339), leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	if err := leaf.VerifyHostname(name); err != nil {
		return nil, err
	}
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(leaf.PublicKey) {
		return nil, errors.New("the certificate does not match the key")
	}
	return &tls.Certificate{Certificate: der, PrivateKey: key, Leaf: leaf}, nil
}

// cacheGet reads name's certificate from the cache in autocert's format
// (the key, then the chain, in PEM); an unusable entry is ErrCacheMiss.
func (a *acmeSource) cacheGet(ctx context.Context, name string) (*tls.Certificate, error) {
	if a.cache == nil {
		return nil, ErrCacheMiss
	}
	b, err := a.cache.Get(ctx, name)
	if err != nil {
		if errors.Is(err, ErrCacheMiss) {
			return nil, err
		}
		return nil, fmt.Errorf("certs: reading %q from the cache: %w", name, err)
	}
	p, err := tls.X509KeyPair(b, b)
	if err != nil {
		return nil, ErrCacheMiss
	}
	signer, ok := p.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, ErrCacheMiss
	}
	c, err := a.checkPair(name, p.Certificate, signer)
	if err != nil {
		return nil, ErrCacheMiss
	}
	return c, nil
}

func (a *acmeSource) cachePut(ctx context.Context, name string, c *tls.Certificate) error {
	if a.cache == nil {
		return nil
	}
	b, err := encodePair(c)
	if err != nil {
		return err
	}
	return a.cache.Put(ctx, name, b)
}

// encodePair writes c's key and chain in PEM, autocert's cache format.
func encodePair(c *tls.Certificate) ([]byte, error) {
	var buf bytes.Buffer
	var block *pem.Block
	switch k := c.PrivateKey.(type) {
	case *ecdsa.PrivateKey:
		der, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			return nil, err
		}
		block = &pem.Block{Type: "EC PRIVATE KEY", Bytes: der}
	default:
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			return nil, err
		}
		block = &pem.Block{Type: "PRIVATE KEY", Bytes: der}
	}
	pem.Encode(&buf, block)
	for _, der := range c.Certificate {
		pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: der})
	}
	return buf.Bytes(), nil
}

package certs_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/acme"
	"golang.org/x/crypto/acme/autocert"

	"github.com/maatproxy/maat/certs"
	"github.com/maatproxy/maat/internal/testacme"
)

// eventLog collects a Manager's events.
type eventLog struct {
	mu     sync.Mutex
	events []certs.Event
}

func (l *eventLog) add(e certs.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *eventLog) ofKind(kind certs.EventKind) []certs.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var evs []certs.Event
	for _, e := range l.events {
		if e.Kind == kind {
			evs = append(evs, e)
		}
	}
	return evs
}

func (l *eventLog) count(kind certs.EventKind, name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.events {
		if e.Kind == kind && e.Name == name {
			n++
		}
	}
	return n
}

// TestACMEPebble runs the edge's certificate life against Pebble: first
// certificates through tls-alpn-01 and http-01, service over HTTP/1.1,
// HTTP/2 and HTTP/3, no order for an unconfigured name, a restart from the
// cache without an order, and a forced renewal without a failed request.
func TestACMEPebble(t *testing.T) {
	t.Parallel()
	const (
		alpnName  = "alpn.maat.test"
		httpName  = "http.maat.test"
		otherName = "other.maat.test"
		badName   = "bad.maat.test" // configured, but no challenge succeeds
	)
	edge, tcp, udp, plain := newTestEdge(t)
	edge.refuseALPN[httpName] = true // so that this name needs http-01
	edge.refuseALPN[badName], edge.refuseHTTP[badName] = true, true
	pebble := testacme.Start(t, edge.httpPort, edge.tlsPort, testacme.Options{})
	cacheDir := filepath.Join(t.TempDir(), "edge")
	var events eventLog
	cfg := certs.Config{
		Mode:         certs.ModeACME,
		CacheDir:     cacheDir,
		Hosts:        []string{alpnName, httpName, badName},
		Email:        "ops@maat.test",
		DirectoryURL: pebble.DirURL,
		CARootsFile:  pebble.RootsFile,
		RetryMin:     50 * time.Millisecond,
		RetryMax:     time.Second,
		OnEvent:      events.add,
	}
	m, err := certs.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	edge.serve(t, m, tcp, udp, plain)
	ctx, stop := context.WithCancel(t.Context())
	runDone := make(chan error, 1)
	go func() { runDone <- m.Run(ctx) }()
	waitFor(t, "both certificates", func() bool { return ready(m, alpnName) && ready(m, httpName) })

	t.Run("challenges", func(t *testing.T) {
		if alpn, http01 := edge.counts(alpnName); alpn == 0 || http01 != 0 {
			t.Errorf("%s: %d tls-alpn-01 and %d http-01 validations, want tls-alpn-01 only", alpnName, alpn, http01)
		}
		if _, http01 := edge.counts(httpName); http01 == 0 {
			t.Errorf("%s: no http-01 validation", httpName)
		}
		for _, name := range []string{alpnName, httpName} {
			if n := events.count(certs.EventObtained, name); n != 1 {
				t.Errorf("%s: %d obtained events, want 1", name, n)
			}
		}
	})

	t.Run("a failing name does not block others", func(t *testing.T) {
		waitFor(t, "the failure in Status", func() bool { return events.count(certs.EventFailed, badName) > 0 })
		for _, s := range m.Status() {
			if s.Name == badName && (s.Ready(time.Now()) || s.LastError == "" || s.NextRetry.IsZero()) {
				t.Errorf("status of %s = %+v, want an error and a retry time", badName, s)
			}
		}
		_, err := m.GetCertificate(&tls.ClientHelloInfo{ServerName: badName})
		var acmeErr *acme.AuthorizationError
		if !errors.Is(err, certs.ErrNoCertificate) || !errors.As(err, &acmeErr) {
			t.Errorf("GetCertificate(%s) = %v, want ErrNoCertificate wrapping the CA's AuthorizationError", badName, err)
		}
	})

	t.Run("cache files", func(t *testing.T) {
		checkMode(t, cacheDir, 0o700)
		for _, f := range []string{alpnName, httpName, "acme_account+key"} {
			checkMode(t, filepath.Join(cacheDir, f), 0o600)
		}
	})

	t.Run("protocols", func(t *testing.T) {
		for _, name := range []string{alpnName, httpName} {
			for _, tt := range []struct{ proto, want string }{{"1.1", "HTTP/1.1"}, {"2", "HTTP/2.0"}, {"3", "HTTP/3.0"}} {
				body, leaf, err := edge.get(t, pebble.Roots, name, tt.proto)
				if err != nil {
					t.Errorf("GET https://%s/ over HTTP/%s: %v", name, tt.proto, err)
					continue
				}
				if want := name + " " + tt.want; body != want {
					t.Errorf("GET https://%s/ over HTTP/%s = %q, want %q", name, tt.proto, body, want)
				}
				if leaf.PublicKeyAlgorithm != x509.ECDSA {
					t.Errorf("%s: certificate key %v, want ECDSA", name, leaf.PublicKeyAlgorithm)
				}
			}
		}
	})

	t.Run("unconfigured name", func(t *testing.T) {
		for _, proto := range []string{"1.1", "3"} {
			if _, _, err := edge.get(t, pebble.Roots, otherName, proto); err == nil {
				t.Errorf("GET https://%s/ over HTTP/%s succeeded", otherName, proto)
			}
		}
		_, err := m.GetCertificate(&tls.ClientHelloInfo{ServerName: otherName})
		if !errors.Is(err, certs.ErrUnknownHost) {
			t.Errorf("GetCertificate(%s) = %v, want ErrUnknownHost", otherName, err)
		}
		if n := pebble.OrdersFor(otherName); n != 0 {
			t.Errorf("%d orders for %s, want none", n, otherName)
		}
	})

	stop()
	select {
	case err := <-runDone:
		if err != nil {
			t.Errorf("Run() = %v after its context ended, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run() did not return within 30s of its context's end")
	}
	ordersBefore := pebble.OrdersFor(alpnName) + pebble.OrdersFor(httpName)

	// A restart reads the cache and orders nothing.
	m2, err := certs.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	edge.use(m2)
	ctx2, stop2 := context.WithCancel(t.Context())
	defer stop2()
	go m2.Run(ctx2)
	t.Run("restart", func(t *testing.T) {
		for _, name := range []string{alpnName, httpName} {
			if !ready(m2, name) {
				t.Errorf("%s: not ready after restart", name)
			}
			if _, _, err := edge.get(t, pebble.Roots, name, "2"); err != nil {
				t.Errorf("GET https://%s/ after restart: %v", name, err)
			}
		}
		if n := pebble.OrdersFor(alpnName) + pebble.OrdersFor(httpName); n != ordersBefore {
			t.Errorf("%d orders after restart, want %d", n, ordersBefore)
		}
	})

	t.Run("forced renewal", func(t *testing.T) {
		_, before, err := edge.get(t, pebble.Roots, alpnName, "1.1")
		if err != nil {
			t.Fatal(err)
		}
		served := edge.underLoad(t, pebble.Roots, alpnName, func() {
			if err := m2.Renew(bounded(t), alpnName); err != nil {
				t.Errorf("Renew() = %v", err)
			}
		})
		t.Logf("%d requests served during the renewal", served)
		_, after, err := edge.get(t, pebble.Roots, alpnName, "1.1")
		if err != nil {
			t.Fatal(err)
		}
		if after.SerialNumber.Cmp(before.SerialNumber) == 0 {
			t.Error("the same certificate serves after Renew")
		}
		// The renewed certificate is the one a restart loads.
		m3, err := certs.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		c, err := m3.GetCertificate(&tls.ClientHelloInfo{ServerName: alpnName})
		if err != nil || !c.Leaf.Equal(after) {
			t.Errorf("after a restart GetCertificate = %v; want the renewed certificate", err)
		}
	})
}

// TestACMECADown starts with the CA unreachable: the name with a cached
// certificate serves, the other fails clearly, and gets its certificate
// once the CA is back.
func TestACMECADown(t *testing.T) {
	t.Parallel()
	const cachedName, newName = "cached.maat.test", "new.maat.test"
	edge, tcp, udp, plain := newTestEdge(t)
	pebble := testacme.Start(t, edge.httpPort, edge.tlsPort, testacme.Options{})
	cfg := certs.Config{
		Mode:         certs.ModeACME,
		CacheDir:     t.TempDir(),
		Hosts:        []string{cachedName},
		DirectoryURL: pebble.DirURL,
		CARootsFile:  pebble.RootsFile,
		RetryMin:     100 * time.Millisecond,
		RetryMax:     200 * time.Millisecond,
	}
	// An earlier run cached a certificate for cachedName.
	first, err := certs.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	edge.serve(t, first, tcp, udp, plain)
	if _, _, err := edge.get(t, pebble.Roots, cachedName, "2"); err != nil {
		t.Fatalf("first certificate: %v", err)
	}

	pebble.Down.Store(true)
	cfg.Hosts = []string{cachedName, newName}
	m, err := certs.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	edge.use(m)
	go m.Run(t.Context())
	if _, _, err := edge.get(t, pebble.Roots, cachedName, "2"); err != nil {
		t.Errorf("cached site with the CA down: %v", err)
	}
	waitFor(t, "the failed order in Status", func() bool {
		for _, s := range m.Status() {
			if s.Name == newName && s.LastError != "" && !s.NextRetry.IsZero() {
				return true
			}
		}
		return false
	})
	_, err = m.GetCertificate(&tls.ClientHelloInfo{ServerName: newName})
	if !errors.Is(err, certs.ErrNoCertificate) {
		t.Errorf("GetCertificate(%s) with the CA down = %v, want ErrNoCertificate", newName, err)
	}
	t.Logf("error shown: %v", err)
	if _, _, err := edge.get(t, pebble.Roots, newName, "2"); err == nil {
		t.Errorf("GET https://%s/ with the CA down succeeded", newName)
	}
	for _, s := range m.Status() {
		if s.Name == cachedName && (s.LastError != "" || !s.Ready(time.Now())) {
			t.Errorf("cached name's status = %+v, want ready without error", s)
		}
	}

	// A renewal asked for while the CA is down fails and changes nothing.
	if err := m.Renew(bounded(t), cachedName); err == nil {
		t.Error("Renew() with the CA down succeeded")
	}
	if _, _, err := edge.get(t, pebble.Roots, cachedName, "1.1"); err != nil {
		t.Errorf("cached site after a failed Renew: %v", err)
	}

	pebble.Down.Store(false)
	waitFor(t, "the certificate once the CA is back", func() bool { return ready(m, newName) })
	if _, _, err := edge.get(t, pebble.Roots, newName, "3"); err != nil {
		t.Errorf("GET https://%s/ after the CA came back: %v", newName, err)
	}
	waitFor(t, "no error left in Status", func() bool {
		for _, s := range m.Status() {
			if s.LastError != "" || !s.NextRetry.IsZero() || !s.Ready(time.Now()) {
				return false
			}
		}
		return true
	})
}

// TestACMEOnDemand: without Run, the first handshake for a configured name
// orders its certificate and waits for it; the CA requires External Account
// Binding; autocert reads the cache.
func TestACMEOnDemand(t *testing.T) {
	t.Parallel()
	const name = "demand.maat.test"
	edge, tcp, udp, plain := newTestEdge(t)
	pebble := testacme.Start(t, edge.httpPort, edge.tlsPort, testacme.Options{EABKeys: map[string]string{
		"kid-1": "zWNDZM6eQGHWpSRTPal5eIUYFTu7EajVIoguysqZ9wG44nMEtx3MUAsUDkMTQ12W",
	}})
	hmac, err := base64.RawURLEncoding.DecodeString("zWNDZM6eQGHWpSRTPal5eIUYFTu7EajVIoguysqZ9wG44nMEtx3MUAsUDkMTQ12W")
	if err != nil {
		t.Fatal(err)
	}
	cacheDir := t.TempDir()
	m, err := certs.New(certs.Config{
		Mode:         certs.ModeACME,
		CacheDir:     cacheDir,
		Hosts:        []string{name},
		DirectoryURL: pebble.DirURL,
		CARootsFile:  pebble.RootsFile,
		EAB:          &certs.EAB{KeyID: "kid-1", HMACKey: hmac},
	})
	if err != nil {
		t.Fatal(err)
	}
	edge.serve(t, m, tcp, udp, plain)
	// A burst of first visitors waits for one order.
	var wg sync.WaitGroup
	for _, proto := range []string{"1.1", "2", "2", "3"} {
		wg.Go(func() {
			body, _, err := edge.get(t, pebble.Roots, name, proto)
			if err != nil {
				t.Errorf("first request over HTTP/%s: %v", proto, err)
			} else if !strings.HasPrefix(body, name+" HTTP/") {
				t.Errorf("body = %q", body)
			}
		})
	}
	wg.Wait()
	if n := pebble.OrdersFor(name); n != 1 {
		t.Errorf("%d orders, want 1", n)
	}

	// autocert reads the cache as its own, without contacting a CA.
	ac := &autocert.Manager{
		Cache:      autocert.DirCache(cacheDir),
		HostPolicy: autocert.HostWhitelist(name),
		Client:     &acme.Client{DirectoryURL: "https://127.0.0.1:1/dir"},
	}
	c, err := ac.GetCertificate(&tls.ClientHelloInfo{
		ServerName:       name,
		CipherSuites:     []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256},
		SignatureSchemes: []tls.SignatureScheme{tls.ECDSAWithP256AndSHA256},
		SupportedCurves:  []tls.CurveID{tls.CurveP256},
	})
	if mine, _ := m.GetCertificate(&tls.ClientHelloInfo{ServerName: name}); err != nil || !c.Leaf.Equal(mine.Leaf) {
		t.Errorf("autocert with our cache: %v, want our certificate", err)
	}

	// Without the binding the CA refuses the account, and says so.
	noEAB, err := certs.New(certs.Config{
		Mode:         certs.ModeACME,
		CacheDir:     t.TempDir(),
		Hosts:        []string{"no-eab.maat.test"},
		DirectoryURL: pebble.DirURL,
		CARootsFile:  pebble.RootsFile,
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = noEAB.GetCertificate(&tls.ClientHelloInfo{ServerName: "no-eab.maat.test"})
	var acmeErr *acme.Error
	if !errors.Is(err, certs.ErrNoCertificate) || !errors.As(err, &acmeErr) || acmeErr.ProblemType != "urn:ietf:params:acme:error:externalAccountRequired" {
		t.Errorf("GetCertificate without EAB = %v, want ErrNoCertificate wrapping externalAccountRequired", err)
	}
}

// TestACMERenewal: Run renews ahead of expiry; a renewal that fails keeps the
// current certificate, shows in Status, and is retried until it succeeds.
func TestACMERenewal(t *testing.T) {
	t.Parallel()
	const name = "renew.maat.test"
	edge, tcp, udp, plain := newTestEdge(t)
	pebble := testacme.Start(t, edge.httpPort, edge.tlsPort, testacme.Options{Validity: 12})
	var events eventLog
	var m *certs.Manager
	m, err := certs.New(certs.Config{
		Mode:         certs.ModeACME,
		CacheDir:     t.TempDir(),
		Hosts:        []string{name},
		DirectoryURL: pebble.DirURL,
		CARootsFile:  pebble.RootsFile,
		RenewBefore:  6 * time.Second, // half the lifetime at most: renewal 5.5 s after issuance
		RetryMin:     100 * time.Millisecond,
		RetryMax:     200 * time.Millisecond,
		OnEvent: func(e certs.Event) {
			events.add(e)
			m.Status() // as a caller logging the state would: no deadlock
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	edge.serve(t, m, tcp, udp, plain)
	go m.Run(t.Context())
	waitFor(t, "the first certificate", func() bool { return ready(m, name) })
	pebble.Down.Store(true)
	_, first, err := edge.get(t, pebble.Roots, name, "2")
	if err != nil {
		t.Fatal(err)
	}

	waitFor(t, "a failed renewal", func() bool { return events.count(certs.EventFailed, name) > 0 })
	st := m.Status()
	if len(st) != 1 || !st[0].Ready(time.Now()) || st[0].LastError == "" || st[0].NextRetry.IsZero() || !st[0].NotAfter.Equal(first.NotAfter) {
		t.Errorf("Status() after a failed renewal = %+v, want the current certificate, the error and a retry time", st)
	}
	if _, leaf, err := edge.get(t, pebble.Roots, name, "2"); err != nil || !leaf.Equal(first) {
		t.Errorf("GET after a failed renewal: %v; want the current certificate", err)
	}

	pebble.Down.Store(false)
	waitFor(t, "the renewal", func() bool { return events.count(certs.EventRenewed, name) > 0 })
	_, renewed, err := edge.get(t, pebble.Roots, name, "3")
	if err != nil {
		t.Fatal(err)
	}
	if !renewed.NotAfter.After(first.NotAfter) {
		t.Errorf("certificate after renewal expires %v, not after the first's %v", renewed.NotAfter, first.NotAfter)
	}
	if st := m.Status(); st[0].LastError != "" || !st[0].NextRetry.IsZero() {
		t.Errorf("Status() after renewal = %+v, want no error", st)
	}
}

// sharedCache is a Cache with a Locker, in memory, as two nodes would share
// one in Redis.
type sharedCache struct {
	mu    sync.Mutex
	data  map[string][]byte
	locks map[string]chan struct{}
}

func newSharedCache() *sharedCache {
	return &sharedCache{data: map[string][]byte{}, locks: map[string]chan struct{}{}}
}

func (c *sharedCache) Get(_ context.Context, key string) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.data[key]
	if !ok {
		return nil, certs.ErrCacheMiss
	}
	return b, nil
}

func (c *sharedCache) Put(_ context.Context, key string, data []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.data[key] = data
	return nil
}

func (c *sharedCache) Delete(_ context.Context, key string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.data, key)
	return nil
}

func (c *sharedCache) Lock(ctx context.Context, key string) (func(), error) {
	c.mu.Lock()
	l, ok := c.locks[key]
	if !ok {
		l = make(chan struct{}, 1)
		c.locks[key] = l
	}
	c.mu.Unlock()
	select {
	case l <- struct{}{}:
		return func() { <-l }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TestACMESharedCache: two nodes sharing a cache with a lock order a name
// once between them, and a node answers the challenge of an order that the
// other runs.
func TestACMESharedCache(t *testing.T) {
	t.Parallel()
	const name = "shared.maat.test"
	edge, tcp, udp, plain := newTestEdge(t)
	pebble := testacme.Start(t, edge.httpPort, edge.tlsPort, testacme.Options{})
	cache := newSharedCache()
	node := func() *certs.Manager {
		m, err := certs.New(certs.Config{
			Mode:         certs.ModeACME,
			Cache:        cache,
			Hosts:        []string{name},
			DirectoryURL: pebble.DirURL,
			CARootsFile:  pebble.RootsFile,
		})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	a, b := node(), node()
	edge.serve(t, b, tcp, udp, plain) // the CA reaches node b only
	go a.Run(t.Context())
	go b.Run(t.Context())
	waitFor(t, "both nodes' certificates", func() bool { return ready(a, name) && ready(b, name) })
	if n := pebble.OrdersFor(name); n != 1 {
		t.Errorf("%d orders from two nodes, want 1", n)
	}

	// Node a orders; the CA's tls-alpn-01 request reaches node b, which
	// finds the answer in the shared cache.
	alpnBefore, _ := edge.counts(name)
	if err := a.Renew(bounded(t), name); err != nil {
		t.Fatalf("Renew() on the node the CA cannot reach: %v", err)
	}
	if alpn, _ := edge.counts(name); alpn == alpnBefore {
		t.Error("node b answered no tls-alpn-01 challenge for node a's order")
	}
	if n := pebble.OrdersFor(name); n != 2 {
		t.Errorf("%d orders, want 2", n)
	}
}

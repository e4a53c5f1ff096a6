package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/acme"
)

const (
	// orderTimeout bounds one order: account, authorizations, issuance.
	orderTimeout = 5 * time.Minute
	// handshakeWait bounds how long a handshake waits for a first
	// certificate being ordered.
	handshakeWait = 2 * time.Minute
	// cacheTimeout bounds a cache read made for a handshake or a challenge.
	cacheTimeout = 10 * time.Second
	// deactivateTimeout bounds giving up the authorizations of a failed
	// order.
	deactivateTimeout = 30 * time.Second

	defaultRetryMin    = time.Minute
	defaultRetryMax    = time.Hour
	maxDefaultRenewal  = 30 * 24 * time.Hour
	acmeChallengePath  = "/.well-known/acme-challenge/"
	challengeTLSALPN01 = "tls-alpn-01"
	challengeHTTP01    = "http-01"
)

// acmeSource is ModeACME: certificates ordered from an ACME CA for the
// configured names only.
type acmeSource struct {
	cfg   *Config
	cache Cache
	// names has one state per configured host; setHosts replaces the map,
	// never changes one.
	names atomic.Pointer[map[string]*nameState]
	http  *http.Client // to the CA; nil for the default

	// runMu guards runCtx, while Run runs, and each name's stop: setHosts
	// starts the loop of a name it adds and stops that of a name it
	// removes.
	runMu  sync.Mutex
	runCtx context.Context
	loops  sync.WaitGroup

	// The orders handshakes start (obtainOnDemand) outlive the handshake;
	// when Run ends it cancels them (demandCtx) and waits for them, and
	// none starts after.
	demandMu     sync.Mutex
	demandCtx    context.Context
	demandStop   context.CancelFunc
	demandClosed bool
	demand       sync.WaitGroup

	// tryHTTP01 is set once HTTPHandler was asked for: only then can the
	// CA's http-01 requests reach us.
	tryHTTP01 atomic.Bool

	clientMu sync.Mutex
	client   *acme.Client // registered account; nil until the first order

	challMu    sync.RWMutex
	httpTokens map[string][]byte           // URL path → key authorization
	alpnCerts  map[string]*tls.Certificate // name → tls-alpn-01 certificate
}

// nameState is one configured name's certificate and ordering state.
type nameState struct {
	name string
	cert atomic.Pointer[tls.Certificate] // the certificate served; nil if none
	kick chan struct{}                   // wakes the name's Run loop after an order (buffered, 1)
	stop context.CancelFunc              // ends the name's Run loop; nil before it starts (runMu)

	mu        sync.Mutex
	ordering  chan struct{} // non-nil while an order runs; closed at its end
	lastErr   error
	failures  int
	nextRetry time.Time
}

func newACMESource(ctx context.Context, cfg *Config) (*acmeSource, error) {
	a := &acmeSource{
		cfg:        cfg,
		cache:      cfg.cache(),
		httpTokens: map[string][]byte{},
		alpnCerts:  map[string]*tls.Certificate{},
	}
	a.demandCtx, a.demandStop = context.WithCancel(context.Background())
	if cfg.CARootsFile != "" {
		c, err := rootsClient(cfg.CARootsFile)
		if err != nil {
			return nil, err
		}
		a.http = c
	}
	names := make(map[string]*nameState, len(cfg.Hosts))
	a.names.Store(&names)
	for _, h := range cfg.Hosts {
		if names[h] != nil {
			continue
		}
		st := &nameState{name: h, kick: make(chan struct{}, 1)}
		names[h] = st
		gctx, cancel := context.WithTimeout(ctx, cacheTimeout)
		c, err := a.cacheGet(gctx, h)
		cancel()
		switch {
		case errors.Is(err, ErrCacheMiss):
		case err != nil:
			st.lastErr = err
		default:
			st.cert.Store(c)
			cfg.event(Event{Kind: EventLoaded, Name: h, NotAfter: c.Leaf.NotAfter})
		}
	}
	return a, nil
}

// rootsClient returns an HTTP client trusting the system roots and the
// certificates of file.
func rootsClient(file string) (*http.Client, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("certs: CA roots: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("certs: CA roots: no PEM certificate in %s", file)
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: t}, nil
}

// wantsChallengeCert reports whether a hello comes from a CA validating
// tls-alpn-01 (RFC 8737, section 3): acme-tls/1 as the only protocol.
func wantsChallengeCert(hello *tls.ClientHelloInfo) bool {
	return len(hello.SupportedProtos) == 1 && hello.SupportedProtos[0] == acme.ALPNProto
}

func (a *acmeSource) getCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	name := normalizeName(hello.ServerName)
	if name == "" {
		return nil, fmt.Errorf("%w: the client sent no server name", ErrUnknownHost)
	}
	st := a.lookup(name)
	if st == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownHost, name)
	}
	hctx := hello.Context()
	if hctx == nil { // a ClientHelloInfo made by hand
		hctx = context.Background()
	}
	if wantsChallengeCert(hello) {
		return a.challengeCert(hctx, name)
	}
	if c := a.valid(st); c != nil {
		return c, nil
	}
	// No certificate: order one now, unless a failed order waits for its
	// retry, and wait for it within the handshake.
	ctx, cancel := context.WithTimeout(hctx, handshakeWait)
	defer cancel()
	if err := a.obtainOnDemand(ctx, st); err != nil {
		return nil, err
	}
	if c := a.valid(st); c != nil {
		return c, nil
	}
	return nil, a.noCertError(st)
}

// valid returns the name's certificate if it is valid now.
func (a *acmeSource) valid(st *nameState) *tls.Certificate {
	c := st.cert.Load()
	if c == nil || !a.cfg.now().Before(c.Leaf.NotAfter) {
		return nil
	}
	return c
}

func (a *acmeSource) noCertError(st *nameState) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.lastErr == nil {
		return fmt.Errorf("%w for %q", ErrNoCertificate, st.name)
	}
	return fmt.Errorf("%w for %q (next try %s): %w", ErrNoCertificate, st.name,
		st.nextRetry.UTC().Format(time.RFC3339), st.lastErr)
}

// challengeCert returns the tls-alpn-01 certificate for name, from memory or
// from the cache (when another node runs the order).
func (a *acmeSource) challengeCert(ctx context.Context, name string) (*tls.Certificate, error) {
	a.challMu.RLock()
	c := a.alpnCerts[name]
	a.challMu.RUnlock()
	if c != nil {
		return c, nil
	}
	if a.cache != nil {
		ctx, cancel := context.WithTimeout(ctx, cacheTimeout)
		defer cancel()
		if b, err := a.cache.Get(ctx, name+"+token"); err == nil {
			if c, err := tls.X509KeyPair(b, b); err == nil {
				return &c, nil
			}
		}
	}
	return nil, fmt.Errorf("certs: no tls-alpn-01 challenge pending for %q", name)
}

func (a *acmeSource) httpHandler(fallback http.Handler) http.Handler {
	a.tryHTTP01.Store(true)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, acmeChallengePath) {
			fallback.ServeHTTP(w, r)
			return
		}
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if a.lookup(normalizeName(host)) == nil {
			http.Error(w, "host not configured", http.StatusForbidden)
			return
		}
		a.challMu.RLock()
		b, ok := a.httpTokens[r.URL.Path]
		a.challMu.RUnlock()
		if !ok && a.cache != nil {
			ctx, cancel := context.WithTimeout(r.Context(), cacheTimeout)
			defer cancel()
			var err error
			b, err = a.cache.Get(ctx, path.Base(r.URL.Path)+"+http-01")
			ok = err == nil
		}
		if !ok {
			http.Error(w, "no such challenge", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		w.Write(b)
	})
}

// lookup returns the state of a configured name, nil for another.
func (a *acmeSource) lookup(name string) *nameState { return (*a.names.Load())[name] }

// setHosts makes hosts the configured names. A name added is served from
// the cache or ordered at once (its Run loop starts, when Run runs); a
// name removed is no longer served, and its loop (its order, if one runs)
// ends.
func (a *acmeSource) setHosts(hosts []string) {
	a.runMu.Lock()
	defer a.runMu.Unlock()
	old := *a.names.Load()
	names := make(map[string]*nameState, len(hosts))
	for _, h := range hosts {
		if names[h] != nil {
			continue
		}
		st := old[h]
		if st == nil {
			st = &nameState{name: h, kick: make(chan struct{}, 1)}
			if a.runCtx != nil {
				a.startLocked(st)
			}
		}
		names[h] = st
	}
	for h, st := range old {
		if names[h] == nil && st.stop != nil {
			st.stop()
		}
	}
	a.names.Store(&names)
}

// startLocked starts st's Run loop; runMu held, Run running.
func (a *acmeSource) startLocked(st *nameState) {
	ctx, cancel := context.WithCancel(a.runCtx)
	st.stop = cancel
	a.loops.Go(func() {
		defer cancel()
		a.maintain(ctx, st)
	})
}

func (a *acmeSource) status() []NameStatus {
	names := *a.names.Load()
	s := make([]NameStatus, 0, len(names))
	for _, st := range names {
		ns := NameStatus{Name: st.name}
		if c := st.cert.Load(); c != nil {
			ns.NotAfter = c.Leaf.NotAfter
			ns.RenewAt = a.renewAt(c.Leaf)
		}
		st.mu.Lock()
		if st.lastErr != nil {
			ns.LastError = st.lastErr.Error()
			ns.NextRetry = st.nextRetry
		}
		ns.Ordering = st.ordering != nil
		st.mu.Unlock()
		s = append(s, ns)
	}
	return s
}

// renewAt returns when leaf should be renewed: RenewBefore ahead of its
// expiry, or by default a third of its lifetime, at most 30 days; never
// before half its lifetime, so that a CA issuing shorter certificates than
// RenewBefore does not get an order right after each issuance.
func (a *acmeSource) renewAt(leaf *x509.Certificate) time.Time {
	life := leaf.NotAfter.Sub(leaf.NotBefore)
	before := a.cfg.RenewBefore
	if before == 0 {
		before = min(life/3, maxDefaultRenewal)
	}
	return leaf.NotAfter.Add(-min(before, life/2))
}

func (a *acmeSource) backoff(failures int) time.Duration {
	lo, hi := a.cfg.RetryMin, a.cfg.RetryMax
	if lo == 0 {
		lo = defaultRetryMin
	}
	if hi == 0 {
		hi = max(defaultRetryMax, lo)
	}
	d := lo
	for i := 1; i < failures && d < hi; i++ {
		d *= 2
	}
	return min(d, hi)
}

// run keeps every name's certificate: one loop per name, so that a name
// whose orders fail never delays another.
func (a *acmeSource) run(ctx context.Context) error {
	a.runMu.Lock()
	a.runCtx = ctx
	for _, st := range *a.names.Load() {
		a.startLocked(st)
	}
	a.runMu.Unlock()
	<-ctx.Done()
	a.runMu.Lock()
	a.runCtx = nil // setHosts starts no loop from now on
	a.runMu.Unlock()
	a.demandMu.Lock()
	a.demandClosed = true // no handshake starts an order from now on
	a.demandMu.Unlock()
	a.demandStop()
	a.loops.Wait()
	a.demand.Wait()
	return nil
}

// maintain orders st's certificate when it is missing or due for renewal,
// and retries failures with backoff, until ctx is done. With a shared cache
// it also rechecks the cache every RecheckInterval.
func (a *acmeSource) maintain(ctx context.Context, st *nameState) {
	_, shared := a.cache.(Locker)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		if wait := a.nextAction(st); wait > 0 {
			recheck := shared && wait > a.cfg.recheckInterval()
			if recheck {
				wait = a.cfg.recheckInterval()
			}
			t.Reset(wait)
			select {
			case <-ctx.Done():
				return
			case <-st.kick:
				continue
			case <-t.C:
				if recheck {
					a.recheck(ctx, st)
				}
				continue // re-evaluate: the state may have changed meanwhile
			}
		}
		if ctx.Err() != nil {
			return
		}
		octx, cancel := context.WithTimeout(ctx, orderTimeout)
		a.obtain(octx, st, false)
		cancel()
	}
}

// nextAction returns how long st can wait before its next order: zero when
// it is due now. A failure is retried at its retry time, even when the
// current certificate is not yet due, so that the failure does not linger
// in Status.
func (a *acmeSource) nextAction(st *nameState) time.Duration {
	now := a.cfg.now()
	st.mu.Lock()
	failed, retry := st.lastErr != nil, st.nextRetry
	st.mu.Unlock()
	if failed {
		return max(retry.Sub(now), 0)
	}
	c := st.cert.Load()
	if c == nil {
		return 0
	}
	return max(a.renewAt(c.Leaf).Sub(now), 0)
}

// obtainOnDemand orders st's certificate for a handshake, unless a failed
// order's retry time has not come; it waits for the order within ctx.
func (a *acmeSource) obtainOnDemand(ctx context.Context, st *nameState) error {
	st.mu.Lock()
	inBackoff := st.ordering == nil && a.cfg.now().Before(st.nextRetry)
	st.mu.Unlock()
	if inBackoff {
		return a.noCertError(st)
	}
	a.demandMu.Lock()
	if a.demandClosed {
		a.demandMu.Unlock()
		return fmt.Errorf("%w for %q: the certificate manager has stopped", ErrNoCertificate, st.name)
	}
	a.demand.Add(1)
	a.demandMu.Unlock()
	done := make(chan error, 1)
	go func() {
		defer a.demand.Done()
		octx, cancel := context.WithTimeout(a.demandCtx, orderTimeout)
		defer cancel()
		done <- a.obtain(octx, st, false)
	}()
	select {
	case err := <-done:
		if err != nil {
			return a.noCertError(st)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w for %q: still ordering: %w", ErrNoCertificate, st.name, ctx.Err())
	}
}

// obtain gets st a certificate: from the cache when another process or
// node renewed it (unless force), otherwise by an order. Concurrent calls
// for one name share one order. The result is recorded in st.
func (a *acmeSource) obtain(ctx context.Context, st *nameState, force bool) error {
	st.mu.Lock()
	if ch := st.ordering; ch != nil {
		st.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.lastErr
	}
	ch := make(chan struct{})
	st.ordering = ch
	st.mu.Unlock()
	defer func() {
		// Wake the name's Run loop: its next order may be due sooner now.
		select {
		case st.kick <- struct{}{}:
		default:
		}
	}()

	old := st.cert.Load()
	c, ordered, err := a.fetch(ctx, st, old, force)
	e := a.record(st, old, c, ordered, err)
	close(ch)
	// After the state's lock is released: the hook may well call Status.
	a.cfg.event(e)
	return err
}

// record stores the outcome of an order in st and returns its event:
// obtained or renewed when this node ordered c, loaded when it read c from
// the cache (another node or an earlier run ordered it).
func (a *acmeSource) record(st *nameState, old, c *tls.Certificate, ordered bool, err error) Event {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.ordering = nil
	if err != nil {
		st.failures++
		d := a.backoff(st.failures)
		if ae := (*acme.Error)(nil); errors.As(err, &ae) {
			if ra, ok := acme.RateLimit(ae); ok && ra > d {
				d = ra // the CA's Retry-After
			}
		}
		st.lastErr = err
		st.nextRetry = a.cfg.now().Add(d)
		e := Event{Kind: EventFailed, Name: st.name, Err: err, NextRetry: st.nextRetry}
		if old != nil {
			e.NotAfter = old.Leaf.NotAfter
		}
		return e
	}
	st.cert.Store(c)
	st.lastErr, st.failures, st.nextRetry = nil, 0, time.Time{}
	kind := EventLoaded
	switch {
	case ordered && old != nil:
		kind = EventRenewed
	case ordered:
		kind = EventObtained
	}
	return Event{Kind: kind, Name: st.name, NotAfter: c.Leaf.NotAfter}
}

// fetch returns a newer certificate for st than old, and whether it
// ordered it: one the cache holds that is not yet due for renewal and is
// not old (another node, or an earlier run, got it), or old itself when the
// cache holds it and force is false; otherwise a new one from the CA, which
// it stores in the cache. With a shared cache the lock makes this one order
// among all nodes: the others find its result in the cache when they get
// the lock, and so do nodes asked to renew (force) at the same time, since
// the cache then holds another certificate than the one they would replace.
func (a *acmeSource) fetch(ctx context.Context, st *nameState, old *tls.Certificate, force bool) (*tls.Certificate, bool, error) {
	if l, ok := a.cache.(Locker); ok {
		unlock, err := l.Lock(ctx, st.name+"+lock")
		if err != nil {
			return nil, false, fmt.Errorf("certs: locking %q for an order: %w", st.name, err)
		}
		defer unlock()
	}
	c, err := a.cacheGet(ctx, st.name)
	if err == nil && a.cfg.now().Before(a.renewAt(c.Leaf)) {
		switch {
		case old == nil || !old.Leaf.Equal(c.Leaf):
			return c, false, nil
		case !force:
			return old, false, nil
		}
	}
	if ctx.Err() != nil { // ended while waiting for the lock: no order
		return nil, false, ctx.Err()
	}
	var notAfter time.Time
	if old != nil {
		notAfter = old.Leaf.NotAfter
	}
	a.cfg.event(Event{Kind: EventOrdering, Name: st.name, NotAfter: notAfter})
	c, err = a.order(ctx, st.name)
	if err != nil {
		return nil, false, fmt.Errorf("certs: ordering a certificate for %q: %w", st.name, err)
	}
	if err := a.cachePut(ctx, st.name, c); err != nil {
		// The certificate serves all the same; without the cache, the
		// next start orders again.
		a.cfg.event(Event{Kind: EventFailed, Name: st.name, NotAfter: c.Leaf.NotAfter,
			Err: fmt.Errorf("certs: caching the certificate for %q: %w", st.name, err)})
	}
	return c, true, nil
}

// recheck reads st's certificate from a shared cache again and serves it if
// another node put a different one there (a renewal, forced or not), unless
// an order of this node runs. The cached certificate must not be due for
// renewal: one that is stays for this node's own order to replace.
func (a *acmeSource) recheck(ctx context.Context, st *nameState) {
	st.mu.Lock()
	busy := st.ordering != nil
	st.mu.Unlock()
	if busy {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, cacheTimeout)
	defer cancel()
	c, err := a.cacheGet(ctx, st.name)
	if err != nil || !a.cfg.now().Before(a.renewAt(c.Leaf)) {
		return
	}
	old := st.cert.Load()
	if old != nil && old.Leaf.Equal(c.Leaf) {
		return
	}
	if st.cert.CompareAndSwap(old, c) { // an order that ended meanwhile wins
		a.cfg.event(Event{Kind: EventLoaded, Name: st.name, NotAfter: c.Leaf.NotAfter})
	}
}

// renew orders a new certificate for name now, keeping the current one in
// use until it has arrived.
func (a *acmeSource) renew(ctx context.Context, name string) error {
	st := a.lookup(normalizeName(name))
	if st == nil {
		return fmt.Errorf("%w: %q", ErrUnknownHost, name)
	}
	return a.obtain(ctx, st, true)
}

package certs

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/acme"
)

// The modes of [Config.Mode].
const (
	ModeACME       = "acme"
	ModeSelfSigned = "self-signed"
	ModeFiles      = "files"
)

// Errors returned by [Manager.GetCertificate] and [New]. Test with errors.Is.
var (
	// ErrUnknownHost reports a server name that is not configured; no
	// certificate is made or ordered for it.
	ErrUnknownHost = errors.New("certs: host not configured")
	// ErrNoCertificate reports a configured name that has no valid
	// certificate yet; the error wraps the last failure when there was one.
	ErrNoCertificate = errors.New("certs: no certificate yet")
	// ErrInvalidConfig is wrapped by every error of [Config.Validate].
	ErrInvalidConfig = errors.New("certs: invalid configuration")
)

// EAB is an ACME External Account Binding (RFC 8555, section 7.3.4), given
// by CAs that tie ACME accounts to an existing customer account.
type EAB struct {
	KeyID   string // the key identifier given by the CA
	HMACKey []byte // the MAC key given by the CA, already decoded from base64url
}

// Config configures a [Manager]. The zero Config is usable: a self-signed
// local CA kept in memory.
type Config struct {
	// Mode is ModeACME, ModeSelfSigned or ModeFiles. If empty,
	// ModeSelfSigned is used.
	Mode string

	// CacheDir is the directory for certificates, keys and the local CA;
	// files are written with mode 0600, and the directory, if New has to
	// make it, with 0700. If empty
	// and Cache is nil, ModeACME is refused and ModeSelfSigned keeps its CA
	// in memory only (a new CA at every start).
	CacheDir string

	// Hosts are the names certificates are made for. In ModeACME nothing
	// is ever ordered for another name. In ModeSelfSigned "localhost" and
	// hellos without a server name are always served. In ModeFiles, if
	// set, the certificate must cover every name.
	Hosts []string

	// AnyHost, in ModeSelfSigned only, makes a certificate for every server
	// name a client sends (the demo answers every host). If false, only
	// Hosts and localhost.
	AnyHost bool

	// Email is the ACME account contact; if empty, the account has none.
	Email string
	// DirectoryURL is the ACME directory; if empty, Let's Encrypt's
	// production directory (acme.LetsEncryptURL) is used. Configuring a
	// CA accepts its terms of service.
	DirectoryURL string
	// CARootsFile is a PEM file of root certificates trusted, in addition
	// to the system roots, for HTTPS to the ACME directory (a test or
	// private CA). If empty, only the system roots.
	CARootsFile string
	// EAB is the External Account Binding, for CAs that need one; nil if
	// none.
	EAB *EAB
	// RenewBefore is how long before expiry a certificate is renewed, at
	// most half its lifetime. If zero, a third of its lifetime, at most 30
	// days.
	RenewBefore time.Duration
	// RetryMin and RetryMax bound the exponential backoff between failed
	// orders of a name. If zero, one minute and one hour.
	RetryMin, RetryMax time.Duration
	// RecheckInterval is how often a Manager whose Cache is shared (a
	// [Locker]) reads its certificates and session ticket keys from the
	// cache again, to serve what another node renewed or rotated. If zero,
	// DefaultRecheckInterval.
	RecheckInterval time.Duration

	// CertFile and KeyFile are the PEM certificate chain and key of
	// ModeFiles, re-read by [Manager.Reload].
	CertFile, KeyFile string

	// Cache stores certificates, keys and the local CA. If nil, a
	// [DirCache] in CacheDir.
	Cache Cache

	// Now returns the current time. If nil, time.Now.
	Now func() time.Time

	// OnEvent, if not nil, is called after each certificate event (see
	// [EventKind]), for the caller to log. It must not block.
	OnEvent func(Event)
}

// DefaultRecheckInterval is how often a Manager with a shared cache reads
// it again when Config.RecheckInterval is zero.
const DefaultRecheckInterval = 10 * time.Minute

// EventKind says what happened to a certificate.
type EventKind string

// The kinds of [Event].
const (
	// EventLoaded: a certificate was read from the cache (at start, or one
	// that another node ordered) or from files.
	EventLoaded EventKind = "loaded"
	// EventOrdering: this node starts an ACME order for the name (it holds
	// the name's lock, and the cache has nothing newer).
	EventOrdering EventKind = "ordering"
	// EventObtained: this node's order brought the name's first
	// certificate.
	EventObtained EventKind = "obtained"
	// EventRenewed: this node's order replaced the name's certificate.
	EventRenewed EventKind = "renewed"
	// EventFailed: an order, a reload or a cache write failed; Err says
	// why and NextRetry when the order is tried again.
	EventFailed EventKind = "failed"
	// EventTicketKeysFailed: the TLS session ticket keys could not be read
	// from or written to the shared cache (Err); the node rotates keys of
	// its own meanwhile (sessions then resume on this node only) and tries
	// again at NextRetry. Name is empty.
	EventTicketKeysFailed EventKind = "ticket_keys_failed"
)

// Event reports a certificate event to [Config.OnEvent]. It never holds a
// key.
type Event struct {
	Kind      EventKind
	Name      string    // the host name (the certificate file in ModeFiles)
	NotAfter  time.Time // the expiry of the certificate in use (or loaded, obtained, renewed), if any
	Err       error     // for EventFailed and EventTicketKeysFailed
	NextRetry time.Time // for EventFailed and EventTicketKeysFailed: when it is tried again
}

// NameStatus is the state of one name's certificate, for readiness checks.
type NameStatus struct {
	Name      string    `json:"name"`
	NotAfter  time.Time `json:"not_after,omitzero"`   // zero when there is no certificate
	RenewAt   time.Time `json:"renew_at,omitzero"`    // when renewal starts (ACME)
	LastError string    `json:"last_error,omitempty"` // the last failure, cleared on success
	NextRetry time.Time `json:"next_retry,omitzero"`  // when a failed order is tried again
	Ordering  bool      `json:"ordering,omitempty"`   // an order for the name runs now (ACME)
}

// Ready reports whether the name has a certificate valid at now.
func (s NameStatus) Ready(now time.Time) bool { return now.Before(s.NotAfter) }

// source is one mode's way of providing certificates.
type source interface {
	getCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error)
	status() []NameStatus
	run(ctx context.Context) error
}

// Manager provides certificates for TLS servers. Its methods are safe for
// concurrent use.
type Manager struct {
	mode    string
	src     source
	tickets *tickets
	local   *localCA    // ModeSelfSigned
	files   *fileSource // ModeFiles
	acme    *acmeSource // ModeACME
}

// Validate reports every problem of the configuration at once; each wraps
// ErrInvalidConfig.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	mode := c.mode()
	switch mode {
	case ModeACME, ModeSelfSigned, ModeFiles:
	default:
		bad("unknown mode %q (want %q, %q or %q)", c.Mode, ModeACME, ModeSelfSigned, ModeFiles)
	}
	for _, h := range c.Hosts {
		if err := checkHost(h, mode == ModeACME); err != nil {
			bad("host %q: %v", h, err)
		}
	}
	if c.AnyHost && mode != ModeSelfSigned {
		bad("any_host is for mode %q only", ModeSelfSigned)
	}
	switch mode {
	case ModeACME:
		if len(c.Hosts) == 0 {
			bad("mode %q needs at least one host", ModeACME)
		}
		if c.CacheDir == "" && c.Cache == nil {
			bad("mode %q needs a cache directory (certificates must survive restarts, or the CA's rate limits will be hit)", ModeACME)
		}
		if c.EAB != nil && (c.EAB.KeyID == "" || len(c.EAB.HMACKey) == 0) {
			bad("external account binding needs a key id and an HMAC key")
		}
	case ModeFiles:
		if c.CertFile == "" || c.KeyFile == "" {
			bad("mode %q needs cert_file and key_file", ModeFiles)
		}
	}
	if c.RenewBefore < 0 || c.RetryMin < 0 || c.RetryMax < 0 || c.RecheckInterval < 0 {
		bad("negative duration")
	}
	if c.RetryMin > 0 && c.RetryMax > 0 && c.RetryMin > c.RetryMax {
		bad("retry_min %v above retry_max %v", c.RetryMin, c.RetryMax)
	}
	return errors.Join(errs...)
}

func (c *Config) mode() string {
	if c.Mode == "" {
		return ModeSelfSigned
	}
	return c.Mode
}

func (c *Config) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *Config) recheckInterval() time.Duration {
	if c.RecheckInterval > 0 {
		return c.RecheckInterval
	}
	return DefaultRecheckInterval
}

// cache returns the configured cache, or nil when there is none.
func (c *Config) cache() Cache {
	if c.Cache != nil {
		return c.Cache
	}
	if c.CacheDir != "" {
		return DirCache(c.CacheDir)
	}
	return nil
}

func (c *Config) event(e Event) {
	if c.OnEvent != nil {
		c.OnEvent(e)
	}
}

// checkHost reports whether h is a host name a certificate can be made for.
func checkHost(h string, acmeMode bool) error {
	if h == "" {
		return errors.New("empty")
	}
	if h != normalizeName(h) {
		return errors.New("must be lower case, without a trailing dot")
	}
	if strings.ContainsAny(h, " /:@") {
		return errors.New("not a host name")
	}
	if acmeMode {
		if strings.Contains(h, "*") {
			return errors.New("wildcards need the dns-01 challenge, which is not supported")
		}
		if !strings.Contains(h, ".") {
			return errors.New("a public certificate needs a name with a dot")
		}
	}
	return nil
}

// normalizeName lowercases a server name and removes a trailing dot.
func normalizeName(name string) string {
	return strings.TrimSuffix(strings.ToLower(name), ".")
}

// New returns a Manager for cfg. It validates cfg, reads the files of
// ModeFiles, and loads or creates the local CA of ModeSelfSigned; ModeACME
// loads cached certificates and orders nothing until [Manager.Run] or a
// handshake asks for a missing certificate.
func New(cfg Config) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Hosts = slices.Clone(cfg.Hosts)
	if cfg.Cache == nil && cfg.CacheDir != "" {
		// Made now, so that a bad path shows at start, not at the first
		// order. An existing directory keeps its mode; the files are 0600.
		if err := os.MkdirAll(cfg.CacheDir, 0o700); err != nil {
			return nil, fmt.Errorf("certs: cache directory: %w", err)
		}
	}
	m := &Manager{mode: cfg.mode()}
	var err error
	switch m.mode {
	case ModeSelfSigned:
		m.local, err = newLocalCA(context.Background(), &cfg)
		m.src = m.local
	case ModeFiles:
		m.files, err = newFileSource(&cfg)
		m.src = m.files
	case ModeACME:
		m.acme, err = newACMESource(context.Background(), &cfg)
		m.src = m.acme
	}
	if err != nil {
		return nil, err
	}
	m.tickets = newTickets(context.Background(), &cfg, cfg.cache())
	return m, nil
}

// GetCertificate implements tls.Config.GetCertificate: the certificate for
// the hello's server name, or the tls-alpn-01 challenge certificate when an
// ACME CA validates.
func (m *Manager) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	return m.src.getCertificate(hello)
}

// TLSConfig returns a new tls.Config for an HTTPS server: GetCertificate,
// TLS 1.2 at least, ALPN h2, http/1.1 (and acme-tls/1 in ModeACME), and
// session tickets (resumption) with the Manager's keys: WrapSession and
// UnwrapSession encrypt and decrypt them with keys that [Manager.Run]
// rotates every TicketKeyRotation, keeping the last two for decryption, and
// shares with the other nodes through a shared cache (a [Locker]), so that
// a session begun on one node resumes on another. A clone of the config
// keeps them (an HTTP/3 server's config, cloned with NextProtos h3, resumes
// alike).
func (m *Manager) TLSConfig() *tls.Config {
	protos := []string{"h2", "http/1.1"}
	if m.mode == ModeACME {
		protos = append(protos, acme.ALPNProto)
	}
	return &tls.Config{
		GetCertificate: m.GetCertificate,
		MinVersion:     tls.VersionTLS12,
		NextProtos:     protos,
		WrapSession:    m.tickets.wrap,
		UnwrapSession:  m.tickets.unwrap,
	}
}

// HTTPHandler returns the handler for port 80: in ModeACME it answers the
// CA's http-01 requests under /.well-known/acme-challenge/ for configured
// names and passes every other request to fallback. If fallback is nil,
// GET and HEAD requests are redirected to https and others refused.
func (m *Manager) HTTPHandler(fallback http.Handler) http.Handler {
	if fallback == nil {
		fallback = http.HandlerFunc(redirectHTTPS)
	}
	if m.acme == nil {
		return fallback
	}
	return m.acme.httpHandler(fallback)
}

// redirectHTTPS sends GET and HEAD requests to the same URL over https.
func redirectHTTPS(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "Use HTTPS", http.StatusBadRequest)
		return
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
		if strings.Contains(h, ":") {
			host = "[" + h + "]"
		}
	}
	http.Redirect(w, r, "https://"+host+r.URL.RequestURI(), http.StatusFound)
}

// Run keeps the Manager's certificates and session ticket keys until ctx
// is done: in ModeACME it obtains missing certificates and renews them ahead
// of expiry (and, with a shared cache, serves what other nodes renewed); in
// every mode it rotates the session ticket keys, through a shared cache when
// there is one. Call it once, and wait for it.
//
// Run returns nil when ctx is done, after every goroutine it started has
// ended. It returns for no other reason and has no fatal error: a failed
// order, renewal or exchange with the cache is retried (with backoff) and
// reported through [Config.OnEvent] and [Manager.Status], and the current
// certificate and keys stay in use meanwhile. (An order started by a
// handshake for a name without a certificate runs in a goroutine of its
// own, bounded by the order timeout of five minutes, so that the order is
// not lost when the handshake gives up; when ctx is done, Run ends such
// orders too and waits for them, and no handshake starts one after.)
func (m *Manager) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { m.tickets.run(ctx) })
	err := m.src.run(ctx)
	wg.Wait()
	return err
}

// Renew orders a new certificate for a configured name now, in ModeACME,
// and replaces the current one when it has arrived; handshakes meanwhile
// keep the current one. Operators use it after a key compromise or a
// revocation. If the cache holds another certificate than the current one
// when the name's lock is taken (another node sharing the cache renewed it
// meanwhile, for the same reason), that one is used and nothing is ordered.
// In other modes it does nothing.
func (m *Manager) Renew(ctx context.Context, name string) error {
	if m.acme == nil {
		return nil
	}
	return m.acme.renew(ctx, name)
}

// Status reports each name's certificate, sorted by name.
func (m *Manager) Status() []NameStatus {
	s := m.src.status()
	slices.SortFunc(s, func(a, b NameStatus) int { return strings.Compare(a.Name, b.Name) })
	return s
}

// SetHosts replaces [Config.Hosts], as a reload of the configuration does;
// each name must be valid for the mode, as [Config.Validate] says, or
// nothing changes. A name added is served at once in ModeSelfSigned; in
// ModeACME it is read from the cache or ordered at once (by [Manager.Run]'s
// loop, or by the first handshake that asks for it). A name removed is no
// longer served, and its order, if one runs in Run, ends. In ModeFiles the
// names are those the certificate must cover: [Manager.Status] reports
// each, with an error for one it does not cover, and [Manager.Reload]
// checks them. With AnyHost, every name stays served.
func (m *Manager) SetHosts(hosts []string) error {
	var errs []error
	hosts = slices.Clone(hosts)
	for _, h := range hosts {
		if err := checkHost(h, m.mode == ModeACME); err != nil {
			errs = append(errs, fmt.Errorf("%w: host %q: %v", ErrInvalidConfig, h, err))
		}
	}
	if m.mode == ModeACME && len(hosts) == 0 {
		errs = append(errs, fmt.Errorf("%w: mode %q needs at least one host", ErrInvalidConfig, ModeACME))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	switch {
	case m.local != nil:
		return m.local.setHosts(hosts)
	case m.acme != nil:
		m.acme.setHosts(hosts)
	case m.files != nil:
		m.files.setHosts(hosts)
	}
	return nil
}

// Reload re-reads the certificate and key files in ModeFiles (on SIGHUP).
// On error the current certificate stays in use. In other modes it does
// nothing.
func (m *Manager) Reload() error {
	if m.files == nil {
		return nil
	}
	return m.files.reload()
}

// RootPEM returns the local CA's root certificate in PEM in ModeSelfSigned,
// for the operator to trust; nil in the other modes.
func (m *Manager) RootPEM() []byte {
	if m.local == nil {
		return nil
	}
	return m.local.rootPEM()
}

package edge

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go/http3"
	"golang.org/x/net/http2"

	"github.com/maatproxy/maat/certs"
	"github.com/maatproxy/maat/challenge"
	"github.com/maatproxy/maat/compress"
	"github.com/maatproxy/maat/fplog"
	"github.com/maatproxy/maat/httpfp"
	"github.com/maatproxy/maat/policy"
	"github.com/maatproxy/maat/tlsfp"
)

// Server is the edge: its listeners, the handler chain and the state that a
// reload replaces.
type Server struct {
	log  *slog.Logger
	base Config // the configuration the listeners were built from

	rt atomic.Pointer[snapshot] // replaced whole on reload

	certs     *certs.Manager
	tlsConf   *tls.Config
	transport *http.Transport
	proxy     *httputil.ReverseProxy
	// compressed is answer with its responses compressed where they qualify.
	compressed http.Handler

	h1   *http.Server
	h1ln *chanListener
	h2   *http2.Server
	h3   *http3.Server
	web  *http.Server // :80
	adm  *http.Server

	mu        sync.Mutex
	listeners []net.Listener
	udp       net.PacketConn
	addrs     Addrs
	altSvc    string
	h2conns   sync.WaitGroup
	started   atomic.Bool
	stopping  atomic.Bool
	bg        context.Context
	bgCancel  context.CancelFunc
	idPrefix  string
	idSeq     atomic.Uint64

	secret   []byte
	store    sharedStore
	messages challenge.Messages
	fplog    *fplog.Writer // nil when off
	verifier *policy.Verifier
	accessMu sync.Mutex
	access   map[string]*fplog.AccessWriter // by path; kept across reloads
	metrics  *metrics
}

// snapshot is what a reload replaces at once: sites, routes, policy.
type snapshot struct {
	cfg        Config
	sites      *siteTable
	trusted    trustedProxies
	policy     *policy.Policy
	challenger *challenge.Challenger
	maat       http.Handler // everything under /.maat/
}

// Addrs are the bound addresses, once Start returned.
type Addrs struct {
	HTTPS, HTTP, Admin string
	HTTP3              string // "" when HTTP/3 is off
}

// New builds a server from a validated configuration. It binds nothing;
// Start does.
func New(cfg Config, log *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{log: log, base: cfg, idPrefix: randomPrefix()}
	s.bg, s.bgCancel = context.WithCancel(context.Background())
	var err error
	if s.secret, err = loadSecret(cfg.Challenge.SecretFile); err != nil {
		return nil, err
	}
	if s.messages, err = newMessages(); err != nil {
		return nil, err
	}
	sctx, cancel := context.WithTimeout(s.bg, 10*time.Second)
	s.store, err = openStore(sctx, cfg.Store, s.log)
	cancel()
	if err != nil {
		return nil, err
	}
	if s.verifier, err = policy.NewVerifier(policy.VerifierConfig{}); err != nil {
		return nil, fmt.Errorf("edge: crawler verifier: %w", err)
	}
	rt, err := s.newSnapshot(cfg)
	if err != nil {
		_ = s.store.Close()
		return nil, err
	}
	s.rt.Store(rt)
	if s.fplog, err = newFPLog(&cfg, s.secret); err != nil {
		_ = s.store.Close()
		return nil, err
	}

	cm, err := certs.New(certsConfig(&cfg))
	if err != nil {
		return nil, fmt.Errorf("edge: certificates: %w", err)
	}
	s.certs = cm
	s.metrics = newMetrics(s)
	if s.fplog != nil {
		s.metrics.addCounterFunc("maat_fplog_lines_total", "Fingerprint log lines by result.",
			map[string]string{"result": "written"}, func() float64 { return float64(s.fplog.Written()) })
		s.metrics.addCounterFunc("maat_fplog_lines_dropped_total", "Fingerprint log lines dropped because the writer fell behind.",
			nil, func() float64 { return float64(s.fplog.Dropped()) })
	}
	s.tlsConf = cm.TLSConfig()
	s.transport = newTransport(cfg.Timeouts)
	s.proxy = s.newReverseProxy(s.transport)
	cmp, err := compress.New(compress.Config{})
	if err != nil {
		return nil, fmt.Errorf("edge: compression: %w", err)
	}
	s.compressed = cmp.Wrap(http.HandlerFunc(s.answer))

	t := cfg.Timeouts
	s.h1 = &http.Server{
		Handler:           httpfp.Handler(http.HandlerFunc(s.serveTCP)), // outermost: pairs before anything edits headers
		ReadHeaderTimeout: t.ReadHeader.D(),
		IdleTimeout:       t.Idle.D(),
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		ConnContext:       connContext,
		ConnState:         s.connState,
	}
	s.h2 = &http2.Server{IdleTimeout: t.Idle.D(), MaxConcurrentStreams: 250}
	if err := http2.ConfigureServer(s.h1, s.h2); err != nil { // graceful GOAWAY on Shutdown
		return nil, fmt.Errorf("edge: http2: %w", err)
	}
	return s, nil
}

func certsConfig(cfg *Config) certs.Config {
	c := certs.Config{
		Mode:         cfg.TLS.Mode,
		CacheDir:     cfg.TLS.Cache,
		Hosts:        cfg.hosts(),
		Email:        cfg.TLS.ACME.Email,
		DirectoryURL: cfg.TLS.ACME.Directory,
		CARootsFile:  cfg.TLS.ACME.CARoots,
		CertFile:     cfg.TLS.CertFile,
		KeyFile:      cfg.TLS.KeyFile,
	}
	if cfg.TLS.ACME.EABKeyID != "" {
		key, _ := decodeEABKey(cfg.TLS.ACME.EABKey) // Validate checked it
		c.EAB = &certs.EAB{KeyID: cfg.TLS.ACME.EABKeyID, HMACKey: key}
	}
	if cfg.Demo {
		c.AnyHost = true
	}
	return c
}

// newSnapshot compiles what a configuration needs per request.
func (s *Server) newSnapshot(cfg Config) (*snapshot, error) {
	sites, err := newSiteTable(&cfg, func(a *AccessLog) (*fplog.AccessWriter, error) { return s.accessLog(&cfg, a) })
	if err != nil {
		return nil, err
	}
	rt := &snapshot{cfg: cfg, sites: sites}
	for _, p := range cfg.TrustedProxies {
		rt.trusted = append(rt.trusted, netipPrefix(p))
	}
	pol, err := loadPolicy(cfg.Policy)
	if err != nil {
		return nil, fmt.Errorf("edge: policy: %w", err)
	}
	for _, w := range pol.Warnings() {
		s.log.LogAttrs(context.Background(), slog.LevelWarn, "policy_warning", slog.String("policy", cfg.Policy), slog.String("warning", w))
	}
	rt.policy = pol
	if rt.challenger, err = s.newChallenger(&cfg, pol.Version()); err != nil {
		return nil, fmt.Errorf("edge: challenge: %w", err)
	}
	rt.maat = rt.challenger.Handler(s.challengeClient)
	return rt, nil
}

// Reload replaces sites, routes and policy at once. In-flight requests finish
// with what they started with. Listener addresses and the TLS mode need a
// restart; a change to them is reported, not applied.
func (s *Server) Reload(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	rt, err := s.newSnapshot(cfg)
	if err != nil {
		return err
	}
	if cfg.Listen != s.base.Listen || cfg.TLS.Mode != s.base.TLS.Mode {
		s.log.LogAttrs(context.Background(), slog.LevelWarn, "reload_needs_restart",
			slog.String("reason", "listen addresses or tls.mode changed; restart to apply"))
	}
	if cfg.TLS.Mode == "files" {
		if err := s.certs.Reload(); err != nil {
			return fmt.Errorf("edge: reload certificate files: %w", err)
		}
	}
	s.rt.Store(rt)
	if s.fplog != nil {
		if err := s.fplog.Reopen(); err != nil { // for external rotation
			s.log.LogAttrs(context.Background(), slog.LevelError, "fplog_reopen_failed", slog.String("error", err.Error()))
		}
	}
	s.accessMu.Lock()
	for path, w := range s.access {
		if err := w.Reopen(); err != nil {
			s.log.LogAttrs(context.Background(), slog.LevelError, "access_log_reopen_failed", slog.String("path", path), slog.String("error", err.Error()))
		}
	}
	s.accessMu.Unlock()
	return nil
}

// Start binds every listener and serves in the background.
func (s *Server) Start() error {
	if !s.started.CompareAndSwap(false, true) {
		return errors.New("edge: already started")
	}
	cfg := s.base
	ln, err := net.Listen("tcp", cfg.Listen.HTTPS)
	if err != nil {
		return fmt.Errorf("edge: listen https: %w", err)
	}
	s.track(ln)
	s.addrs.HTTPS = ln.Addr().String()
	_, port, _ := net.SplitHostPort(s.addrs.HTTPS)

	if cfg.Listen.HTTP3 {
		if err := s.startH3(ln.Addr().(*net.TCPAddr)); err != nil {
			s.closeListeners()
			return err
		}
		s.altSvc = `h3=":` + port + `"; ma=86400`
	}
	if cfg.Listen.HTTP != "" {
		web, err := net.Listen("tcp", cfg.Listen.HTTP)
		if err != nil {
			s.closeListeners()
			return fmt.Errorf("edge: listen http: %w", err)
		}
		s.track(web)
		s.addrs.HTTP = web.Addr().String()
		s.web = &http.Server{
			Handler:           s.certs.HTTPHandler(http.HandlerFunc(s.redirectHTTPS)),
			ReadHeaderTimeout: cfg.Timeouts.ReadHeader.D(),
			IdleTimeout:       cfg.Timeouts.Idle.D(),
			MaxHeaderBytes:    64 << 10,
			ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		}
		go s.web.Serve(web)
	}
	if cfg.Listen.Admin != "" {
		adm, err := net.Listen("tcp", cfg.Listen.Admin)
		if err != nil {
			s.closeListeners()
			return fmt.Errorf("edge: listen admin: %w", err)
		}
		s.track(adm)
		s.addrs.Admin = adm.Addr().String()
		s.adm = &http.Server{Handler: s.adminHandler(), ReadHeaderTimeout: 10 * time.Second}
		go s.adm.Serve(adm)
	}

	s.h1ln = newChanListener(ln.Addr())
	go s.h1.Serve(s.h1ln)
	var tcp net.Listener = ln
	if cfg.Listen.ProxyProtocol {
		tcp = &proxyListener{Listener: ln, timeout: cfg.Timeouts.Handshake.D()}
	}
	tcp = tlsfp.NewListener(tcp, tlsfp.Config{HelloTimeout: cfg.Timeouts.Handshake.D(), OnError: s.helloError})
	go s.acceptTLS(tcp)
	go func() { _ = s.certs.Run(s.bg) }()
	return nil
}

func (s *Server) track(ln net.Listener) {
	s.mu.Lock()
	s.listeners = append(s.listeners, ln)
	s.mu.Unlock()
}

func (s *Server) closeListeners() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ln := range s.listeners {
		_ = ln.Close()
	}
	s.listeners = nil
	if s.udp != nil {
		_ = s.udp.Close()
	}
}

// Addrs returns the bound addresses.
func (s *Server) Addrs() Addrs { return s.addrs }

// Shutdown stops accepting, lets in-flight requests finish until ctx ends,
// then closes what is left.
func (s *Server) Shutdown(ctx context.Context) error {
	if !s.stopping.CompareAndSwap(false, true) {
		return nil
	}
	s.mu.Lock()
	for _, ln := range s.listeners {
		_ = ln.Close()
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	errs := make(chan error, 5)
	shut := func(f func(context.Context) error) {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- f(ctx) }()
	}
	shut(s.h1.Shutdown) // also sends GOAWAY on every HTTP/2 connection
	if s.h3 != nil {
		shut(s.h3.Shutdown)
	}
	if s.web != nil {
		shut(s.web.Shutdown)
	}
	shut(func(ctx context.Context) error { // HTTP/2 connections are not h1's to wait for
		done := make(chan struct{})
		go func() { s.h2conns.Wait(); close(done) }()
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	wg.Wait()
	close(errs)
	var err error
	for e := range errs {
		if e != nil && err == nil {
			err = e
		}
	}
	if s.adm != nil {
		_ = s.adm.Close()
	}
	if s.h3 != nil {
		_ = s.h3.Close()
	}
	if s.udp != nil {
		_ = s.udp.Close()
	}
	_ = s.h1.Close()
	s.bgCancel()
	s.transport.CloseIdleConnections()
	if s.fplog != nil {
		_ = s.fplog.Close() // flushes
	}
	s.accessMu.Lock()
	for _, w := range s.access {
		_ = w.Close()
	}
	s.accessMu.Unlock()
	_ = s.store.Close()
	return err
}

// Serve starts the server and serves until ctx is done, then drains for at
// most the configured drain timeout.
func (s *Server) Serve(ctx context.Context) error {
	if err := s.Start(); err != nil {
		return err
	}
	s.log.LogAttrs(ctx, slog.LevelInfo, "listening",
		slog.String("https", s.addrs.HTTPS), slog.String("http", s.addrs.HTTP), slog.String("admin", s.addrs.Admin),
		slog.Bool("http3", s.addrs.HTTP3 != ""))
	<-ctx.Done()
	s.log.LogAttrs(context.Background(), slog.LevelInfo, "draining", slog.Duration("timeout", s.base.Timeouts.Drain.D()))
	dctx, cancel := context.WithTimeout(context.Background(), s.base.Timeouts.Drain.D())
	defer cancel()
	if err := s.Shutdown(dctx); err != nil {
		s.log.LogAttrs(context.Background(), slog.LevelWarn, "drain_incomplete", slog.String("error", err.Error()))
	}
	return nil
}

// redirectHTTPS answers port 80: a redirect to the same URL over https.
func (s *Server) redirectHTTPS(w http.ResponseWriter, r *http.Request) {
	host := hostOnly(r.Host)
	if host == "" || s.rt.Load().sites.lookup(host) == nil {
		http.Error(w, "unknown site", http.StatusMisdirectedRequest)
		return
	}
	status := http.StatusMovedPermanently
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		status = http.StatusPermanentRedirect // keeps the method and body
	}
	http.Redirect(w, r, s.httpsURL(host, r), status)
}

// randomPrefix returns 6 random base-32 characters and a dash, so request
// ids differ between nodes and restarts.
func randomPrefix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return strconv.FormatUint(uint64(binary.BigEndian.Uint32(b[:])), 36) + "-"
}

// accessLog returns the writer of an access log file, opening it once: sites
// that share a file share its writer, and a reload keeps it.
func (s *Server) accessLog(cfg *Config, a *AccessLog) (*fplog.AccessWriter, error) {
	s.accessMu.Lock()
	defer s.accessMu.Unlock()
	if w, ok := s.access[a.Path]; ok {
		return w, nil
	}
	w, err := fplog.NewAccessWriter(fplog.AccessConfig{
		Path: a.Path, Format: a.Format, MaxSizeMB: cfg.Log.MaxSizeMB, MaxFiles: cfg.Log.MaxFiles,
		ClientIP: cfg.Log.ClientIP, HashKey: derive(s.secret, "maat fplog client_ip"),
	})
	if err != nil {
		return nil, fmt.Errorf("edge: access log: %w", err)
	}
	if s.access == nil {
		s.access = map[string]*fplog.AccessWriter{}
	}
	s.access[a.Path] = w
	return w, nil
}

// ReloadFile reads the configuration file again and applies it; a bad file
// keeps the old configuration, and the log says why.
func (s *Server) ReloadFile(ctx context.Context, path string) {
	cfg, err := LoadConfig(path)
	if err == nil {
		err = s.Reload(cfg)
	}
	if err != nil {
		s.log.LogAttrs(ctx, slog.LevelError, "reload_failed", slog.String("config", path), slog.String("error", err.Error()))
		return
	}
	s.log.LogAttrs(ctx, slog.LevelInfo, "reloaded", slog.String("config", path))
}

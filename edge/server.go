package edge

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"golang.org/x/net/http2"

	"github.com/maatproxy/maat/certs"
	"github.com/maatproxy/maat/edge/config"
	"github.com/maatproxy/maat/edge/internal/basicauth"
	"github.com/maatproxy/maat/edge/internal/console"
	"github.com/maatproxy/maat/edge/internal/drain"
	"github.com/maatproxy/maat/edge/internal/park"
	"github.com/maatproxy/maat/edge/internal/secret"
	"github.com/maatproxy/maat/edge/internal/spill"
	"github.com/maatproxy/maat/forwarded"
	"github.com/maatproxy/maat/fplog"
	"github.com/maatproxy/maat/geo"
	"github.com/maatproxy/maat/policy"
	"github.com/maatproxy/maat/store"
)

// Server is the edge's connections: the listeners, the TLS handshake and
// its fingerprint, HTTP/1.1, HTTP/2 and HTTP/3, the port-80 redirect and
// the admin port. Requests go to the current Handler, which Reload swaps.
// Every goroutine the Server starts is tracked and waited for by Shutdown.
type Server struct {
	log     *slog.Logger
	base    config.Config // the configuration the listeners were built from
	handler atomic.Pointer[Handler]
	// procsNow is the processors the procs controller last set
	// (maat_procs).
	procsNow atomic.Int32

	env    Env // shared by every Handler the Server builds
	store  storeCloser
	shared *store.Resilient // the Redis store, when store.kind is redis
	// certStore is the certificates' connection to the same Redis, with a
	// timeout for background work (openCertStore).
	certStore *store.Resilient
	certs     *certs.Manager
	tlsConf   *tls.Config
	metrics   *metrics

	h1   *http.Server
	h1ln *chanListener
	//lint:ignore SA1019 x/net's, not Go 1.26's net/http one: see New
	h2  *http2.Server
	h3  *http3.Server
	web *http.Server // :80
	adm *http.Server

	addrs  Addrs
	altSvc string
	// bound holds listeners made before Start, by configured address
	// (tests hand over ports they hold, so none is free for a moment).
	bound map[string]net.Listener
	udp0  map[string]net.PacketConn

	group    *group
	bg       context.Context // ends when the Server has shut down
	bgCancel context.CancelFunc
	hsCtx    context.Context // ends when shutdown starts: handshakes in progress stop
	hsCancel context.CancelFunc
	started  atomic.Bool
	stopping atomic.Bool

	requests *drain.Gate // the requests being served, hijacked ones included

	conns1  *clientCounter    // TCP connections per client (limits.conns_per_client)
	trusted forwarded.Proxies // exempt from conns1
	quicHS  atomic.Int64      // QUIC handshakes in progress
	seen    *seenAddrs        // addresses that completed a handshake lately
	park    *park.Parker      // parks idle HTTP/1 connections
	quicTr  *quic.Transport

	mu           sync.Mutex // guards the fields below
	listeners    []net.Listener
	udp          net.PacketConn
	conns        map[net.Conn]struct{}      // TCP connections in their handshake, HTTP/2 or parked
	tunnels      map[*drain.Tunnel]struct{} // websockets: connections hijacked from net/http
	connWG       sync.WaitGroup             // Add only under mu while !shuttingDown
	shuttingDown bool
	tunnelsCut   bool // the drain is over: a tunnel is closed as it comes
}

// Addrs are the bound addresses, once Start returned.
type Addrs struct {
	HTTPS, HTTP, Admin string
	HTTP3              string // "" when HTTP/3 is off
}

// New builds a server from a configuration: one that LoadConfig or
// ParseConfig returned is not validated again, one built otherwise is. It
// binds nothing; Start does. When it fails, it has released everything it
// opened.
func New(cfg config.Config, log *slog.Logger) (*Server, error) {
	return newServer(cfg, log, testHooks{})
}

// newServer is New with the hooks of a test.
func newServer(cfg config.Config, log *slog.Logger, hooks testHooks) (_ *Server, err error) {
	if err := validateOnce(&cfg, &hooks); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{log: log, base: cfg, group: newGroup(), conns: map[net.Conn]struct{}{},
		tunnels: map[*drain.Tunnel]struct{}{}, requests: drain.NewGate()}
	s.bg, s.bgCancel = context.WithCancel(context.Background())
	s.hsCtx, s.hsCancel = context.WithCancel(s.bg)
	var undo []func()
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
			s.hsCancel()
			s.bgCancel()
		}
	}()

	s.env.Log = log
	s.env.hooks = hooks
	if s.env.Secret, err = loadSecret(&cfg, log); err != nil {
		return nil, err
	}
	if s.env.Messages, err = newMessages(); err != nil {
		return nil, err
	}
	if s.store, s.shared, err = openStore(cfg.Store, hooks.storeTimeout, log); err != nil {
		return nil, err
	}
	undo = append(undo, func() { _ = s.store.Close() })
	s.env.Store = s.store
	if s.env.verifier, err = policy.NewVerifier(policy.VerifierConfig{}); err != nil {
		return nil, fmt.Errorf("edge: crawler verifier: %w", err)
	}
	if s.env.FPLog, err = newFPLog(&cfg, s.env.Secret); err != nil {
		return nil, err
	}
	if w := s.env.FPLog; w != nil {
		undo = append(undo, func() { _ = w.Close() })
	}
	s.env.access = &accessLogs{secret: s.env.Secret}
	undo = append(undo, s.env.access.close)
	s.env.ids = newRequestIDs()
	s.env.inflight = newClientCounter(cfg.Limits.RequestsPerClient)
	s.env.bcrypt = basicauth.NewSlots()
	s.env.spill = spill.NewBudget(max(cfg.Limits.SpillTotal, 0))
	s.env.console = console.NewRecorder()
	s.conns1 = newClientCounter(cfg.Limits.ConnsPerClient)
	s.seen = newSeenAddrs()
	s.park = park.New(parkHost{s}, s.parkOptions(&cfg))
	for _, p := range cfg.TrustedProxies {
		s.trusted = append(s.trusted, netipPrefix(p))
	}

	if cfg.Geo != (config.GeoConfig{}) {
		if s.env.Geo, err = geo.Open(geo.Config{ASNDB: cfg.Geo.ASNDB, CountryDB: cfg.Geo.CountryDB,
			CheckInterval: hooks.geoCheckInterval, OnReload: s.geoReloaded}); err != nil {
			return nil, &config.Error{File: cfg.File, Key: "geo", Err: err}
		}
	}

	cc := cfg.Certs()
	cc.OnEvent = s.certEvent
	if s.shared != nil {
		// Certificates, keys and the ACME account live in Redis, where one
		// node orders a name under a lock and the others read it; the
		// directory stays as this node's warm copy for when Redis is away.
		if s.certStore, err = openCertStore(cfg.Store); err != nil {
			return nil, err
		}
		undo = append(undo, func() { _ = s.certStore.Close() })
		sealed, err := sealCertStore(s.certStore, s.env.Secret, log)
		if err != nil {
			return nil, err
		}
		cc.Cache = certs.LayeredCache{
			Shared: certs.StorageCache{Storage: sealed, IsNotFound: certMissing},
			Local:  certs.DirCache(cfg.TLS.Cache),
			OnError: func(err error) {
				s.log.LogAttrs(context.Background(), slog.LevelWarn, "certificate_cache", slog.String("error", err.Error()))
			},
		}
	}
	if s.certs, err = certs.New(cc); err != nil {
		return nil, fmt.Errorf("edge: certificates: %w", err)
	}
	s.metrics = newMetrics(s.certs.Status)
	s.env.metrics = s.metrics
	s.metrics.addGaugeFunc("maat_procs", "Processors the edge runs Go code on (GOMAXPROCS; procs: adaptive changes it).",
		func() float64 { return float64(s.procsNow.Load()) })
	s.metrics.addGaugeFunc("maat_connections_parked", "Idle client connections parked: holding no buffer and no goroutine until their next byte.",
		func() float64 { return float64(s.park.Parked()) })
	if w := s.env.FPLog; w != nil {
		s.metrics.addCounterFunc("maat_fplog_lines_total", "Fingerprint log lines by result.",
			map[string]string{"result": "written"}, func() float64 { return float64(w.Written()) })
		s.metrics.addCounterFunc("maat_fplog_lines_dropped_total", "Fingerprint log lines dropped because the writer fell behind.",
			nil, func() float64 { return float64(w.Dropped()) })
	}
	s.tlsConf = s.certs.TLSConfig()
	s.tlsConf.GetCertificate = refuseUnknownNames(s.tlsConf.GetCertificate)
	_, s.env.HTTPSPort, _ = net.SplitHostPort(cfg.Listen.HTTPS)

	h, err := NewHandler(cfg, s.env)
	if err != nil {
		return nil, err
	}
	s.handler.Store(h)

	t := cfg.Timeouts
	s.h1 = &http.Server{
		Handler:           http.HandlerFunc(s.serveTCP),
		ReadHeaderTimeout: t.ReadHeader.D(),
		IdleTimeout:       t.Idle.D(),
		MaxHeaderBytes:    cfg.Limits.HeaderBytes, // HTTP/2's header list too (ConfigureServer)
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		ConnContext:       connContext,
		ConnState:         s.connState,
	}
	// HTTP/2 is x/net's server, given each connection that negotiated h2
	// by ALPN (ServeConn: net/http serves HTTP/2 only on a *tls.Conn, and
	// the fingerprint tap wraps it). x/net deprecates it for net/http's
	// own, but Go 1.26's net/http server races on its HPACK encoder when a
	// client changes SETTINGS_HEADER_TABLE_SIZE mid-connection and sends
	// corrupt header blocks (TestH2HeaderTableSizeMidConnection), where
	// x/net v0.63's own server, used below Go 1.27, waits for its writes;
	// from Go 1.27 x/net hands ServeConn to net/http's fixed server.
	// Frames of at most 16 KiB, the protocol's least (RFC 9113, section
	// 4.2), as nginx: x/net would take 1 MiB, and the buffer a connection
	// reads a frame into keeps the size of the largest it met, for as long
	// as the connection lives.
	//lint:ignore SA1019 x/net's server on purpose: see above
	s.h2 = &http2.Server{IdleTimeout: t.Idle.D(), MaxConcurrentStreams: uint32(cfg.Limits.H2Streams), MaxReadFrameSize: h2MaxFrame, MaxDecoderHeaderTableSize: h2DecoderTable}
	//lint:ignore SA1019 as above; it sends GOAWAY on every HTTP/2 connection at Shutdown
	if err := http2.ConfigureServer(s.h1, s.h2); err != nil {
		h.Close()
		return nil, fmt.Errorf("edge: http2: %w", err)
	}
	return s, nil
}

// h2MaxFrame is the largest HTTP/2 frame the edge reads.
const h2MaxFrame = 16 << 10

// h2DecoderTable is the HPACK dynamic table a client may have the edge
// keep: x/net's default, which s.h2 keeps.
const h2DecoderTable = 4096

// certEvent logs a certificate event: what happened to which name, the
// expiry of the certificate in use and, after a failure, when it is tried
// again.
func (s *Server) certEvent(e certs.Event) {
	attrs := []slog.Attr{slog.String("event", string(e.Kind)), slog.String("name", e.Name)}
	if !e.NotAfter.IsZero() {
		attrs = append(attrs, slog.Time("not_after", e.NotAfter))
	}
	level := slog.LevelInfo
	if e.Err != nil {
		level = slog.LevelError
		attrs = append(attrs, slog.String("error", e.Err.Error()))
		if !e.NextRetry.IsZero() {
			attrs = append(attrs, slog.Time("next_retry", e.NextRetry), slog.Duration("retry_in", time.Until(e.NextRetry).Round(time.Second)))
		}
	}
	s.log.LogAttrs(context.Background(), level, "certificate", attrs...)
}

// geoReloaded logs a geo database that was read again (its file changed,
// or SIGHUP), or could not be and stays as it was.
func (s *Server) geoReloaded(path string, err error) {
	if err != nil {
		s.log.LogAttrs(context.Background(), slog.LevelError, "geo_reload_failed", slog.String("path", path),
			slog.String("error", err.Error()), slog.String("effect", "the database loaded before stays in use"))
		return
	}
	s.log.LogAttrs(context.Background(), slog.LevelInfo, "geo_reloaded", slog.String("path", path))
}

// Handler returns the Handler that serves requests now.
func (s *Server) Handler() *Handler { return s.handler.Load() }

// Reload replaces sites, routes and policy at once: it builds a new Handler
// and swaps it in, after the certificates follow the sites' names (an added
// name is served at once in tls.mode self-signed and ordered at once in
// acme; /readyz says not ready until it has its certificate). In-flight
// requests finish with the Handler they started with. Listener addresses,
// the TLS mode, the store and the fingerprint log's file need a restart; a
// change to them is reported, not applied.
func (s *Server) Reload(cfg config.Config) error {
	if err := validateOnce(&cfg, &s.env.hooks); err != nil {
		return err
	}
	h, err := NewHandler(cfg, s.env)
	if err != nil {
		return err
	}
	// The certificates follow the sites: an added name is served (ordered,
	// in tls.mode acme) before the Handler that routes it is swapped in; a
	// removed one is no longer served.
	oldHosts := s.handler.Load().cfg.Hosts()
	if err := s.certs.SetHosts(cfg.Hosts()); err != nil {
		h.Close()
		return fmt.Errorf("edge: certificates: %w", err)
	}
	if cfg.TLS.Mode == "files" {
		if err := s.certs.Reload(); err != nil {
			_ = s.certs.SetHosts(oldHosts) // they passed before
			h.Close()
			return fmt.Errorf("edge: reload certificate files: %w", err)
		}
	}
	if !cfg.Listen.Same(&s.base.Listen) || cfg.TLS.Mode != s.base.TLS.Mode || cfg.Store != s.base.Store ||
		cfg.Log.Fingerprints != s.base.Log.Fingerprints || cfg.Geo != s.base.Geo {
		s.log.LogAttrs(context.Background(), slog.LevelWarn, "reload_needs_restart",
			slog.String("reason", "listen addresses, tls.mode, store, log.fingerprints or geo changed; restart to apply"))
	}
	old := s.handler.Swap(h)
	s.park.SetOptions(s.parkOptions(&cfg))
	s.logReload(context.Background(), old, h)
	old.Close()
	if s.env.Geo != nil {
		if err := s.env.Geo.Reload(); err != nil { // the monthly database may have been replaced
			s.log.LogAttrs(context.Background(), slog.LevelError, "geo_reload_failed", slog.String("error", err.Error()))
		}
	}
	if w := s.env.FPLog; w != nil {
		if err := w.Reopen(); err != nil { // for external rotation
			s.log.LogAttrs(context.Background(), slog.LevelError, "fplog_reopen_failed", slog.String("error", err.Error()))
		}
	}
	s.env.access.reopen(s.log)
	return nil
}

// ReloadFile reads the configuration file again and applies it; a bad file
// keeps the old configuration, and the log says why.
func (s *Server) ReloadFile(ctx context.Context, path string) {
	cfg, err := config.Load(path)
	if err == nil {
		err = cfg.Locate(s.Reload(cfg))
	}
	if err != nil {
		s.log.LogAttrs(ctx, slog.LevelError, "reload_failed", slog.String("config", path), slog.String("error", err.Error()),
			slog.String("effect", "the running configuration stays in use"))
	}
}

// Start binds every listener and serves in the background.
func (s *Server) Start() (err error) {
	if !s.started.CompareAndSwap(false, true) {
		return errors.New("edge: already started")
	}
	defer func() {
		if err != nil {
			s.closeListeners()
		}
	}()
	cfg := s.base
	ln, udp, err := s.listenHTTPS(cfg.Listen.HTTPS, cfg.Listen.HTTP3Enabled())
	if err != nil {
		return err
	}
	s.track(ln)
	s.addrs.HTTPS = ln.Addr().String()
	_, port, _ := net.SplitHostPort(s.addrs.HTTPS)
	if port != s.env.HTTPSPort { // ":0" bound a port New could not know
		s.env.HTTPSPort = port
		h, err := NewHandler(s.base, s.env)
		if err != nil {
			return err
		}
		s.handler.Swap(h).Close()
	}

	if cfg.Listen.HTTP3Enabled() {
		if err := s.startH3(udp); err != nil {
			return err
		}
		s.altSvc = `h3=":` + port + `"; ma=86400`
	}
	if err := s.startHTTP(); err != nil {
		return err
	}
	if err := s.startAdmin(); err != nil {
		return err
	}
	tcp, err := s.wrapTCP(ln)
	if err != nil {
		return err
	}
	s.h1ln = newChanListener(ln.Addr())
	s.group.Go("http1", func() error { return serveErr(s.h1.Serve(s.h1ln)) })
	s.group.Go("https_accept", func() error { s.acceptTLS(tcp); return nil })
	s.group.Go("certificates", func() error { return s.certs.Run(s.bg) })
	if s.shared != nil {
		s.group.Go("store", func() error { return s.shared.Run(s.bg) })
		s.group.Go("certificate_store", func() error { return s.certStore.Run(s.bg) })
	}
	if s.env.Geo != nil {
		s.group.Go("geo", func() error { return s.env.Geo.Run(s.bg) })
	}
	s.startProcs()
	return nil
}

// serveErr drops the error every Serve returns after Shutdown or Close.
func serveErr(err error) error {
	if errors.Is(err, http.ErrServerClosed) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// listenTCP binds addr, or returns the listener bound for it before Start.
func (s *Server) listenTCP(addr string) (net.Listener, error) {
	if ln, ok := s.bound[addr]; ok {
		return ln, nil
	}
	ln, err := net.Listen("tcp", addr)
	return ln, bindHint(addr, err)
}

// listenHTTPS binds the https listener's TCP address and, with h3, the
// UDP port of the same number. For a port left to the system (":0"),
// whose UDP twin another program may hold, it tries again with another
// port, a few times, rather than fail.
func (s *Server) listenHTTPS(addr string, h3 bool) (net.Listener, net.PacketConn, error) {
	_, port, _ := net.SplitHostPort(addr)
	_, prebound := s.bound[addr]
	listenTCP := func() (net.Listener, error) { return s.listenTCP(addr) }
	if !h3 {
		ln, err := listenTCP()
		if err != nil {
			return nil, nil, fmt.Errorf("edge: listen https: %w", err)
		}
		return ln, nil, nil
	}
	return bindPair(listenTCP, s.listenUDP, port == "0" && !prebound)
}

// bindPair binds a TCP listener (listenTCP) and the UDP port of the same
// number (listenUDP); with retry (the TCP port is the system's choice),
// a UDP port in use makes it try another TCP port, at most 8 times.
func bindPair(listenTCP func() (net.Listener, error), listenUDP func(*net.UDPAddr) (net.PacketConn, error), retry bool) (net.Listener, net.PacketConn, error) {
	for attempt := 1; ; attempt++ {
		ln, err := listenTCP()
		if err != nil {
			return nil, nil, fmt.Errorf("edge: listen https: %w", err)
		}
		tcp := ln.Addr().(*net.TCPAddr)
		udp, err := listenUDP(&net.UDPAddr{IP: tcp.IP, Port: tcp.Port, Zone: tcp.Zone})
		if err == nil {
			return ln, udp, nil
		}
		_ = ln.Close()
		if !retry || attempt == 8 || !errors.Is(err, syscall.EADDRINUSE) {
			return nil, nil, fmt.Errorf("edge: listen http3 (udp): %w", err)
		}
	}
}

// listenUDP binds addr, or returns the socket bound for it before Start.
func (s *Server) listenUDP(addr *net.UDPAddr) (net.PacketConn, error) {
	if c, ok := s.udp0[addr.String()]; ok {
		return c, nil
	}
	c, err := net.ListenUDP("udp", addr)
	if err != nil {
		return nil, bindHint(addr.String(), err)
	}
	return c, nil
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

// trackConn adds a TCP connection to those Shutdown waits for, unless the
// Server is shutting down (then the caller closes it): a connection is
// never added once Shutdown has begun waiting.
func (s *Server) trackConn(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shuttingDown {
		return false
	}
	s.conns[c] = struct{}{}
	s.connWG.Add(1)
	return true
}

func (s *Server) untrackConn(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.connWG.Done()
}

// Shutdown stops accepting, tells every websocket it is going away (a
// Close frame with status 1001 to the client and to the upstream, between
// their frames), lets in-flight requests finish until ctx ends, then closes
// what is left — connections net/http hijacked included — and waits for
// every goroutine the Server started and for every request's handler, so
// that each request writes its log lines; it closes the logs and the store
// last.
func (s *Server) Shutdown(ctx context.Context) error {
	if !s.stopping.CompareAndSwap(false, true) {
		return nil
	}
	s.mu.Lock()
	s.shuttingDown = true
	for _, ln := range s.listeners {
		if s.adm == nil || ln.Addr().String() != s.addrs.Admin {
			_ = ln.Close() // the admin port keeps answering /readyz: draining
		}
	}
	for t := range s.tunnels {
		t.GoingAway() // does not block: the tunnel's copy does the rest
	}
	s.mu.Unlock()
	s.hsCancel()
	s.park.Shutdown() // as net/http closes its idle connections at once

	var errs []error
	var wg sync.WaitGroup
	var emu sync.Mutex
	shut := func(f func(context.Context) error) {
		wg.Go(func() {
			if err := f(ctx); err != nil {
				emu.Lock()
				errs = append(errs, err)
				emu.Unlock()
			}
		})
	}
	if s.h1 != nil {
		shut(s.h1.Shutdown) // also sends GOAWAY on every HTTP/2 connection (ConfigureServer)
	}
	if s.h3 != nil {
		shut(s.h3.Shutdown)
	}
	if s.web != nil {
		shut(s.web.Shutdown)
	}
	shut(s.waitConns)
	shut(s.waitRequests) // websockets too: net/http's Shutdown forgets hijacked connections
	wg.Wait()

	// What is left after the drain is closed.
	s.mu.Lock()
	for c := range s.conns {
		_ = c.Close()
	}
	for t := range s.tunnels {
		_ = t.Close()
	}
	s.tunnelsCut = true
	s.mu.Unlock()
	if s.h1 != nil {
		_ = s.h1.Close()
	}
	if s.h3 != nil {
		_ = s.h3.Close()
		_ = s.quicTr.Close()
	}
	if s.web != nil {
		_ = s.web.Close()
	}
	if s.adm != nil {
		_ = s.adm.Close()
	}
	s.closeListeners()
	s.connWG.Wait()
	s.park.Close() // every parked connection is done: connWG counts them
	// A request cut with its connection ends now (its context is
	// canceled) and writes its log lines; none starts any more.
	s.requests.Shut()
	gctx, cancel := context.WithTimeout(context.Background(), requestGrace)
	if err := s.requests.Wait(gctx); err != nil {
		errs = append(errs, fmt.Errorf("edge: %d requests still running after their connections closed; their log lines are lost: %w",
			s.requests.InFlight(), err))
	}
	cancel()
	s.bgCancel()
	if err := s.group.Wait(); err != nil {
		errs = append(errs, err)
	}
	s.handler.Load().Close()
	if w := s.env.FPLog; w != nil {
		_ = w.Close() // flushes
	}
	s.env.access.close()
	_ = s.store.Close()
	if s.certStore != nil {
		_ = s.certStore.Close()
	}
	return errors.Join(errs...)
}

// requestGrace bounds the wait for requests whose connections Shutdown
// closed after the drain: their contexts are canceled, so they end as soon
// as their upstream exchange notices.
const requestGrace = 5 * time.Second

// waitRequests waits until no request is being served or ctx ends.
func (s *Server) waitRequests(ctx context.Context) error {
	if err := s.requests.Wait(ctx); err != nil {
		return fmt.Errorf("edge: %d requests still running after the drain: %w", s.requests.InFlight(), err)
	}
	return nil
}

// waitConns waits until the tracked TCP connections are done or ctx ends.
func (s *Server) waitConns(ctx context.Context) error {
	done := make(chan struct{})
	go func() { s.connWG.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("edge: connections still open after the drain: %w", ctx.Err())
	}
}

// Serve starts the server and serves until ctx is done or a part of the
// Server fails, then drains for at most the configured drain timeout. It
// returns the failure, if one ended it. When Start fails, Serve releases
// what New opened before it returns the error.
func (s *Server) Serve(ctx context.Context) error {
	if err := s.Start(); err != nil {
		_ = s.Shutdown(ctx) // releases what New opened: the store, the logs
		return err
	}
	s.logStartup(ctx)
	s.log.LogAttrs(ctx, slog.LevelInfo, "listening",
		slog.String("https", s.addrs.HTTPS), slog.String("http", s.addrs.HTTP), slog.String("admin", s.addrs.Admin),
		slog.Bool("http3", s.addrs.HTTP3 != ""))
	var failed error
	select {
	case <-ctx.Done():
	case <-s.group.failed:
		failed = s.group.err()
		s.log.LogAttrs(context.Background(), slog.LevelError, "server_failed", slog.String("error", failed.Error()))
	}
	drain := s.base.Timeouts.Drain.D()
	s.log.LogAttrs(context.Background(), slog.LevelInfo, "draining", slog.Float64("timeout_seconds", drain.Seconds()))
	dctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	err := s.Shutdown(dctx)
	if err != nil && failed == nil {
		s.log.LogAttrs(context.Background(), slog.LevelWarn, "drain_incomplete", slog.String("error", err.Error()))
	}
	s.log.LogAttrs(context.Background(), slog.LevelInfo, "stopped")
	return failed
}

// serveTCP is the handler for HTTP/1.1 and HTTP/2: it advertises HTTP/3.
// The Handler takes the request's fingerprint from the connection
// (httpfp.FromRequest) before anything edits the request's headers, where
// httpfp.Handler would take it into a copy of the request. net/http sets
// and x/net set r.TLS themselves: the tapped connection has a
// ConnectionState method.
//
// Every request is counted until its handler returns (Shutdown waits for
// the count), and a websocket's connection, hijacked from net/http, is
// tracked as a tunnel (drain.UpgradeWriter).
func (s *Server) serveTCP(w http.ResponseWriter, r *http.Request) {
	if !s.requests.Enter() {
		return
	}
	defer s.requests.Leave()
	if s.altSvc != "" {
		w.Header()["Alt-Svc"] = []string{s.altSvc}
	}
	if r.ProtoMajor == 1 && r.Header["Upgrade"] != nil {
		uw := drain.NewUpgradeWriter(w, (*tunnelTracker)(s))
		defer uw.Done()
		w = uw
	}
	s.handler.Load().ServeHTTP(w, r)
}

// tunnelTracker is the Server as the drain.Tracker of its websockets.
type tunnelTracker Server

// Track adds a hijacked connection to those Shutdown tells to go away and
// closes; one hijacked once Shutdown has begun goes away at once.
func (s *tunnelTracker) Track(t *drain.Tunnel) {
	s.mu.Lock()
	s.tunnels[t] = struct{}{}
	late, cut := s.shuttingDown, s.tunnelsCut
	s.mu.Unlock()
	switch {
	case cut: // the drain is over: Shutdown closed the others already
		_ = t.Close()
	case late:
		t.GoingAway()
	}
}

// Untrack forgets a tunnel whose request's handler returned.
func (s *tunnelTracker) Untrack(t *drain.Tunnel) {
	s.mu.Lock()
	delete(s.tunnels, t)
	s.mu.Unlock()
}

// newFPLog opens the fingerprint log, or returns nil when it is off.
func newFPLog(cfg *config.Config, sec []byte) (*fplog.Writer, error) {
	if cfg.Log.Fingerprints == "" {
		return nil, nil
	}
	if err := makeLogDir(cfg.Log.Fingerprints); err != nil {
		return nil, &config.Error{File: cfg.File, Key: "log.fingerprints", Err: err}
	}
	w, err := fplog.NewWriter(fplog.Config{
		Path:        cfg.Log.Fingerprints,
		MaxSizeMB:   cfg.Log.MaxSizeMB,
		MaxFiles:    cfg.Log.MaxFiles,
		ClientIP:    cfg.Log.ClientIP,
		HashKey:     secret.Derive(sec, "maat fplog client_ip"),
		SampleAllow: cfg.Log.SampleAllow,
	})
	if err != nil {
		return nil, fmt.Errorf("edge: fingerprint log: %w", err)
	}
	return w, nil
}

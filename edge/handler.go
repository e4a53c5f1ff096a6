package edge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/maatproxy/maat/challenge"
	"github.com/maatproxy/maat/compress"
	"github.com/maatproxy/maat/edge/config"
	"github.com/maatproxy/maat/edge/internal/basicauth"
	"github.com/maatproxy/maat/edge/internal/spill"
	"github.com/maatproxy/maat/edge/internal/upstream"
	"github.com/maatproxy/maat/forwarded"
	"github.com/maatproxy/maat/fplog"
	"github.com/maatproxy/maat/policy"
	"github.com/maatproxy/maat/urlpath"
)

// Handler is the edge's request path for one configuration snapshot: request
// hygiene, site and route, the bot policy, challenges, the upstream proxy
// and the log line (DESIGN.md, "The way a request travels"). It never
// changes once built; a reload builds a new one. It is safe for concurrent
// use.
type Handler struct {
	cfg         config.Config
	env         Env
	sites       *siteTable
	trusted     forwarded.Proxies
	global      *sitePolicy         // the global policy; a site may have its own (policyFor)
	refuseEarly bool                // connections are refused at their ClientHello (refusesEarly)
	upstream    *upstream.Transport // the upstreams' client: connection slots, failover
	bufs        *upstream.BufferPool
	proxy       *httputil.ReverseProxy
	compressed  http.Handler // answer, with responses compressed where they qualify
	diverts     map[string]*diverter
	when        *policy.Condition // challenge.when; nil: always
	loadAvg     loadAvg           // the system's load averages, for the policy
	prebufs     sync.Pool         // *[]byte of prebufferBytes
	own         []func()          // closes what NewHandler opened for a zero Env field
}

// NewHandler builds the Handler of cfg. What outlives a configuration comes
// from env, whose zero value works (see Env). A Config that LoadConfig or
// ParseConfig returned is not validated again; one built otherwise is.
func NewHandler(cfg config.Config, env Env) (*Handler, error) {
	if err := validateOnce(&cfg, &env.hooks); err != nil {
		return nil, err
	}
	env, own, err := env.resolve()
	if env.inflight == nil {
		env.inflight = newClientCounter(cfg.Limits.RequestsPerClient)
	}
	if env.bcrypt == nil {
		env.bcrypt = basicauth.NewSlots()
	}
	if env.spill == nil {
		env.spill = spill.NewBudget(max(cfg.Limits.SpillTotal, 0))
	}
	h := &Handler{cfg: cfg, env: env, own: own}
	h.prebufs.New = func() any { b := make([]byte, prebufferBytes); return &b }
	if err != nil {
		h.Close()
		return nil, err
	}
	if err := h.build(); err != nil {
		h.Close()
		return nil, err
	}
	return h, nil
}

// validateOnce validates cfg unless it is known to be valid (LoadConfig,
// ParseConfig or Validate said so): a configuration is validated once,
// where it is loaded, not again by New, NewHandler and Reload.
func validateOnce(cfg *config.Config, hooks *testHooks) error {
	if cfg.Validated() {
		return nil
	}
	if hooks.validating != nil {
		hooks.validating()
	}
	return cfg.Validate()
}

// build compiles what the configuration needs per request.
func (h *Handler) build() error {
	cfg, env := &h.cfg, &h.env
	var err error
	if h.upstream, err = h.newUpstream(); err != nil {
		return err
	}
	h.sites, err = newSiteTable(cfg, env.access.open, h.upstream)
	if err != nil {
		return err
	}
	for _, p := range cfg.TrustedProxies {
		h.trusted = append(h.trusted, netipPrefix(p))
	}
	if err := h.buildPolicies(); err != nil {
		return err
	}
	if err := h.checkPressureUsers(); err != nil {
		return err
	}
	h.refuseEarly = h.earlyRefusal()
	if h.when, err = policy.CompileCondition(cfg.Challenge.When); err != nil {
		return &config.Error{File: cfg.File, Key: "challenge.when", Err: err}
	}
	h.loadAvg.path = "/proc/loadavg"
	h.bufs = upstream.NewBufferPool()
	h.proxy = h.newReverseProxy(h.upstream, h.bufs)
	cmp, err := compress.New(compress.Config{})
	if err != nil {
		return fmt.Errorf("edge: compression: %w", err)
	}
	h.compressed = cmp.Wrap(http.HandlerFunc(h.answer))
	h.diverts = h.newDiverters()
	env.metrics.sites.Store(h.sites) // the upstream gauges are this configuration's
	return nil
}

// Close releases what the Handler holds on its own: its idle upstream
// connections, and what NewHandler opened for a zero field of its Env.
// Requests still in flight finish. The Server closes an old Handler after a
// reload swapped in its successor.
func (h *Handler) Close() {
	if h.upstream != nil {
		h.upstream.Close()
	}
	for _, d := range h.diverts {
		d.transport.CloseIdleConnections()
	}
	for _, f := range h.own {
		f()
	}
}

// ServeHTTP is the handler chain of DESIGN.md: hygiene, site, /.maat/,
// site answers, policy, pass cookie or challenge, upstream, log.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	st := h.newState(r)
	st.recorder.ResponseWriter = w // in the state: one allocation for both
	rec := &st.recorder
	st.rec = rec
	if dw, ok := w.(deadlineWriter); ok && h.cfg.Limits.WriteTimeout > 0 {
		if r.Header.Get("Upgrade") == "" {
			// Set now, replacing the one the connection's last request left
			// (a response net/http writes after the handler returned, as a
			// HEAD's, meets this one); writes move it as they need.
			rec.dw, rec.writeTimeout = dw, h.cfg.Limits.WriteTimeout.D()
			rec.armWrite()
		} else {
			_ = dw.SetWriteDeadline(time.Time{}) // a websocket is not bounded by it
		}
	}
	r = r.WithContext(upstream.WithRoute(context.WithValue(r.Context(), stateKey{}, st), &st.up))
	defer h.finish(st, rec, r)

	if !st.clientOK {
		st.action = fplog.ActionDeny
		plainError(rec, st, http.StatusBadRequest, reasonBadForwardedFor)
		return
	}
	if !h.env.inflight.acquire(st.client) {
		st.action = fplog.ActionRate
		h.limited(rec, st, reasonRequestsPerClient, http.StatusTooManyRequests)
		return
	}
	defer h.env.inflight.release(st.client)
	if !h.clean(rec, r, st) {
		return
	}
	st.site = h.sites.lookup(r.Host)
	if st.site == nil {
		st.action = fplog.ActionDeny
		plainError(rec, st, http.StatusMisdirectedRequest, reasonUnknownSite)
		return
	}
	if st.site.hsts != "" {
		w.Header()["Strict-Transport-Security"] = []string{st.site.hsts}
	}
	if strings.HasPrefix(r.URL.Path, challenge.PathPrefix) {
		st.action = fplog.ActionAllow
		h.policyFor(st.site).maat.ServeHTTP(rec, r) // OnPass and OnFail count and log /.maat/pass
		return
	}
	st.route = st.site.route(st.model)
	st.match = st.model
	if st.route.fold {
		st.match = urlpath.Fold(st.model)
	}
	if h.siteAnswers(rec, r, st) {
		return
	}
	if !h.decide(rec, r, st) {
		return
	}
	h.forward(rec, r, st)
}

// authAttempt asks the store whether st's client may try one more
// password: limits.auth_attempts a minute. A store that fails lets it try.
func (h *Handler) authAttempt(st *reqState) func(context.Context) bool {
	return func(ctx context.Context) bool {
		n := h.cfg.Limits.AuthAttempts
		allowed, _, err := h.env.Store.Take(ctx, "auth:"+clientKey(st.client).String(), float64(n)/60, n)
		return err != nil || allowed
	}
}

// forward sends the request to its route, after the route's basic
// authentication (which comes after the bot policy).
func (h *Handler) forward(w *recorder, r *http.Request, st *reqState) {
	if a := st.route.auth; a != nil {
		switch a.Check(r, h.env.bcrypt, h.authAttempt(st)) {
		case basicauth.Limited:
			h.limited(w, st, reasonAuthAttempts, http.StatusTooManyRequests)
			return
		case basicauth.Busy:
			h.limited(w, st, reasonAuthBusy, http.StatusServiceUnavailable)
			return
		case basicauth.Failed:
			a.Challenge(w)
			return
		}
		st.user, _, _ = r.BasicAuth()
	}
	if st.site.maxBody > 0 && r.Body != nil {
		r.Body = http.MaxBytesReader(w, r.Body, st.site.maxBody)
	}
	h.limitBody(w, r, st)
	if !h.prebuffer(w, r, st) {
		return
	}
	if st.site.compress {
		h.compressed.ServeHTTP(w, r)
		return
	}
	h.answer(w, r)
}

// answer serves the request from its route: static files or the upstream.
func (h *Handler) answer(w http.ResponseWriter, r *http.Request) {
	st := stateOf(r)
	if st.route.static != nil {
		h.serveStatic(w, r, st)
		return
	}
	st.up = upstream.Route{Pool: st.route.pool, Client: clientKey(st.client), Cluster: st.cluster, Priority: st.priority,
		OnCut: func() { h.cutSlowClient(st) }}
	if upstream.Common(r, st.route.pool) {
		h.proxyCommon(w, r, st)
		return
	}
	h.proxy.ServeHTTP(w, r)
}

// serveStatic answers from the route's root (static takes the route's
// prefix off when strip_prefix says so). Response rules and security
// headers apply as to an upstream's answer.
func (h *Handler) serveStatic(w http.ResponseWriter, r *http.Request, st *reqState) {
	hdr := w.Header()
	securityHeaders(st.site, hdr)
	for i := range st.route.respOps {
		st.route.respOps[i].apply(hdr)
	}
	st.route.static.ServeHTTP(w, r)
}

// siteAnswers answers what the site's configuration answers before the
// policy: canonical host, redirects, maintenance. It reports whether it did.
func (h *Handler) siteAnswers(w *recorder, r *http.Request, st *reqState) bool {
	site := st.site
	if site.canonical != "" && config.NormalizeHost(hostOnly(r.Host)) != site.canonical {
		st.action = fplog.ActionAllow
		loc, _ := h.httpsURL(site.canonical, r) // config validation checked the name
		writeRedirect(w, loc, http.StatusMovedPermanently)
		return true
	}
	for i := range site.redirects {
		if to, ok := site.redirects[i].match(r.URL, st.model, st.route.fold); ok {
			st.action = fplog.ActionAllow
			writeRedirect(w, to, site.redirects[i].status)
			return true
		}
	}
	if st.route.auth == nil && site.slashRoute(st.model) != nil {
		st.action = fplog.ActionAllow
		writeRedirect(w, withSlash(r.URL), http.StatusMovedPermanently)
		return true
	}
	if site.maintenance {
		st.action = fplog.ActionAllow
		w.Header().Set("Retry-After", "300")
		h.global.challenger.Error(w, r, http.StatusServiceUnavailable, st.id, "maintenance")
		return true
	}
	return false
}

// withSlash is the Location of u's path with a final slash, and its query:
// u's path is the normalized one, never the Host or the request target as
// written.
func withSlash(u *url.URL) string {
	loc := u.EscapedPath() + "/"
	if u.RawQuery != "" {
		loc += "?" + u.RawQuery
	}
	return safeLocation(loc)
}

// writeRedirect answers with a redirect to loc, which the caller built from the
// operator's configuration and a normalized path (never from a client's
// scheme or host).
func writeRedirect(w http.ResponseWriter, loc string, status int) {
	hdr := w.Header()
	hdr["Location"] = []string{loc}
	hdr["Cache-Control"] = []string{"no-store"}
	w.WriteHeader(status)
}

// httpsURL is the https URL of r on host, with the edge's port when it is
// not 443. Port 80's redirect, the plain-HTTP answer on the TLS port and the
// canonical-host redirect all use it.
func (h *Handler) httpsURL(host string, r *http.Request) (string, bool) {
	return httpsURL(h.env.HTTPSPort, host, r.URL)
}

// httpsURL builds a redirect's Location from a host the edge serves and
// u's path and query alone, never from the request target as written: an
// authority-form or asterisk target ("localhost:1@evil.example", "*")
// appended to "https://host:port" made a URL whose host was another's
// (userinfo), or no URL at all. ok is false when host is not a plain host
// name or address.
func httpsURL(port, host string, u *url.URL) (loc string, ok bool) {
	if host = config.NormalizeHost(host); !plainHost(host) {
		return "", false
	}
	if port != "" && port != "443" {
		host = joinHostPort(host, port)
	} else if strings.IndexByte(host, ':') >= 0 {
		host = "[" + host + "]"
	}
	p := u.EscapedPath()
	if p == "" || p[0] != '/' {
		p = "/"
	}
	loc = "https://" + host + p
	if u.RawQuery != "" {
		loc += "?" + u.RawQuery
	}
	return loc, true
}

// plainHost reports whether h is an IP address (no zone) or a DNS name of
// letters, digits, hyphens, underscores and dots: nothing that could end
// the authority of a URL or start another.
func plainHost(h string) bool {
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Zone() == ""
	}
	if h == "" || len(h) > 253 {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_') {
			return false
		}
	}
	return true
}

// challengeClient is what /.maat/pass binds a pass to.
func challengeClient(r *http.Request) challenge.Client {
	st := stateOf(r)
	if st == nil {
		return challenge.Client{IP: peerAddr(r.RemoteAddr)}
	}
	return st.challengeClient()
}

// errorPage answers an upstream failure with the localized error page.
func (h *Handler) errorPage(w http.ResponseWriter, r *http.Request, status int, reason string) {
	st := stateOf(r)
	st.reason = reason
	h.env.metrics.upErrors.WithLabelValues(st.siteName(), reason).Inc()
	h.global.challenger.Error(w, r, status, st.id, reason)
}

// limited answers a request that went past one of the limits, counted by
// its name.
func (h *Handler) limited(w http.ResponseWriter, st *reqState, limit string, status int) {
	h.env.metrics.limited.WithLabelValues(limit).Inc()
	w.Header().Set("Retry-After", "1")
	plainError(w, st, status, limit)
}

// plainError answers without a site: a short text naming reason (one of
// reasons.go's, logged as the request's reason) and id.
func plainError(w http.ResponseWriter, st *reqState, status int, reason string) {
	st.reason = reason
	hdr := w.Header()
	hdr.Set("Content-Type", "text/plain; charset=utf-8")
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("X-Request-Id", st.id)
	w.WriteHeader(status)
	_, _ = w.Write([]byte(plainBody(status, reason, st.id)))
}

// errClientGone marks a request whose client went away.
var errClientGone = errors.New("edge: client went away")

// sinceSeconds is the time since t in seconds, for histograms.
func sinceSeconds(t time.Time) float64 { return time.Since(t).Seconds() }

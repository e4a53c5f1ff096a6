package edge

import (
	"context"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/maatproxy/maat/challenge"
	"github.com/maatproxy/maat/fplog"
	"github.com/maatproxy/maat/httpfp"
	"github.com/maatproxy/maat/policy"
	"github.com/maatproxy/maat/tlsfp"
)

// reqState is what the edge knows and decided for one request; it travels
// to the reverse proxy's hooks in the request context.
type reqState struct {
	start       time.Time
	id          string
	peer        netip.Addr
	peerTrusted bool
	client      netip.Addr
	site        *site
	route       *route
	target      *target
	tries       int
	tried       map[*target]bool
	tls         *tlsfp.Fingerprint
	http        *httpfp.Fingerprint
	ja4         string
	weight      int
	action      string
	challenge   *fplog.Challenge
	rules       []string
	rulesBuf    [8]string
	status      int
	upstreamErr error
	demo        bool
	user        string // the basic-auth user, once accepted
}

type stateKey struct{}

func stateOf(r *http.Request) *reqState {
	st, _ := r.Context().Value(stateKey{}).(*reqState)
	return st
}

// Actions as the fingerprint log and X-Maat-Action write them.
const (
	actAllow     = "ALLOW"
	actPass      = "PASS"
	actChallenge = "CHALLENGE"
	actDeny      = "DENY"
	actRate      = "RATE"
)

// serveTCP is the handler for HTTP/1.1 and HTTP/2: it advertises HTTP/3.
func (s *Server) serveTCP(w http.ResponseWriter, r *http.Request) {
	if s.altSvc != "" {
		w.Header()["Alt-Svc"] = []string{s.altSvc}
	}
	s.serve(w, r)
}

func (s *Server) handlerH3() http.Handler { return http.HandlerFunc(s.serve) }

// serve is the handler chain of DESIGN.md: site, /.maat/, fingerprints,
// policy, pass cookie or challenge, upstream, log.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	rt := s.rt.Load()
	st := &reqState{start: time.Now(), id: s.nextID(), demo: rt.cfg.Demo}
	st.peer = peerAddr(r.RemoteAddr)
	st.peerTrusted = rt.trusted.contains(st.peer)
	st.client = rt.trusted.clientAddr(st.peer, r.Header["X-Forwarded-For"])
	st.tls = tlsfp.FromContext(r.Context())
	if st.tls != nil {
		st.ja4 = st.tls.JA4
	}
	if fp, ok := httpfp.FromRequest(r); ok {
		st.http = fp
	} else if r.ProtoMajor == 3 {
		st.http = httpfp.NewH3Fingerprint(r, httpfp.Config{JA4H: rt.cfg.Fingerprints.JA4H})
	}
	rec := &recorder{ResponseWriter: w}
	r = r.WithContext(context.WithValue(r.Context(), stateKey{}, st))
	defer s.finish(rt, st, rec, r)

	st.site = rt.sites.lookup(r.Host)
	if st.site == nil {
		st.action = actDeny
		s.plainError(rec, st, http.StatusMisdirectedRequest, "unknown_site")
		return
	}
	if st.site.hsts != "" {
		w.Header()["Strict-Transport-Security"] = []string{st.site.hsts}
	}
	if strings.HasPrefix(r.URL.Path, challenge.PathPrefix) {
		st.action = actAllow
		rt.maat.ServeHTTP(rec, r)
		if r.URL.Path == challenge.PathPrefix+"pass" {
			s.countPass(rec.status)
		}
		return
	}

	if s.siteAnswers(rt, rec, r, st) {
		return
	}

	pr := policy.Request{
		RemoteAddr: st.client,
		Host:       r.Host,
		Method:     r.Method,
		Path:       r.URL.Path,
		RawQuery:   r.URL.RawQuery,
		Proto:      r.Proto,
		TLS:        true,
		Header:     r.Header,
		JA4:        st.ja4,
	}
	if st.tls != nil {
		pr.ClientFamily, pr.ClientVersions = st.tls.Client.Family, st.tls.Client.Versions
	}
	if st.http != nil {
		pr.HFP, pr.H2FP = st.http.HFP, st.http.H2FP
		if st.http.Ordered {
			pr.HeaderOrder = st.http.Names
		}
	}
	if policy.ClaimedCrawler(r.UserAgent()) != "" {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		pr.CrawlerVerified = s.verifier.Verify(ctx, r.UserAgent(), st.client)
		cancel()
	}
	dec := rt.policy.Evaluate(&pr)
	st.weight = dec.Weight
	st.rules = dec.AppendNames(st.rulesBuf[:0])
	cl := challenge.Client{IP: st.client, JA4: st.ja4}

	switch dec.Action {
	case policy.DENY:
		st.action = actDeny
		rt.challenger.Deny(rec, r, st.id, ruleReason(dec.Rule))
		return
	case policy.RATE:
		ok, retry, err := s.store.Take(r.Context(), dec.Rate.Key, dec.Rate.Rate, dec.Rate.Burst)
		if err != nil {
			// The shared store is down: serve rather than lock everyone out.
			s.log.LogAttrs(r.Context(), slog.LevelError, "rate_store_failed", slog.String("error", err.Error()))
		} else if !ok {
			st.action = actRate
			rt.challenger.RateLimited(rec, r, st.id, retry)
			return
		}
		st.action = actAllow
	case policy.CHALLENGE:
		if reason := rt.challenger.Check(r, cl, dec.Challenge.Bits); reason != challenge.PassOK {
			st.action = actChallenge
			st.challenge = &fplog.Challenge{Alg: dec.Challenge.Algorithm, Bits: dec.Challenge.Bits}
			s.metrics.challenges.WithLabelValues("issued", reason.String()).Inc()
			rt.challenger.Challenge(rec, r, cl, challenge.Spec{Algorithm: dec.Challenge.Algorithm, Bits: dec.Challenge.Bits, Rule: dec.Rule}, st.id)
			return
		}
		st.action = actPass
	default:
		st.action = actAllow
		if rt.challenger.Check(r, cl, 0) == challenge.PassOK {
			st.action = actPass
		}
	}
	s.forward(rec, r, st)
}

// siteAnswers answers what the site's configuration answers before the
// policy: canonical host, redirects, maintenance. It reports whether it did.
func (s *Server) siteAnswers(rt *snapshot, w *recorder, r *http.Request, st *reqState) bool {
	site := st.site
	if site.canonical != "" && normalizeHost(hostOnly(r.Host)) != site.canonical {
		st.action = actAllow
		http.Redirect(w, r, s.httpsURL(site.canonical, r), http.StatusMovedPermanently)
		return true
	}
	for i := range site.redirects {
		if to, ok := site.redirects[i].match(r.URL.Path, r.URL.RawQuery); ok {
			st.action = actAllow
			http.Redirect(w, r, to, site.redirects[i].status)
			return true
		}
	}
	if site.maintenance {
		st.action = actAllow
		w.Header().Set("Retry-After", "300")
		rt.challenger.Error(w, r, http.StatusServiceUnavailable, st.id, "maintenance")
		return true
	}
	return false
}

// forward sends the request to the route's upstream, after its basic
// authentication (which comes after the bot policy).
func (s *Server) forward(w *recorder, r *http.Request, st *reqState) {
	st.route = st.site.route(r.URL.Path)
	if a := st.route.auth; a != nil {
		if !a.check(r) {
			a.challenge(w)
			return
		}
		st.user, _, _ = r.BasicAuth()
	}
	if st.site.maxBody > 0 && r.Body != nil {
		r.Body = http.MaxBytesReader(w, r.Body, st.site.maxBody)
	}
	if st.site.compress {
		s.compressed.ServeHTTP(w, r)
		return
	}
	s.answer(w, r)
}

// answer serves the request from its route: static files or the upstream.
func (s *Server) answer(w http.ResponseWriter, r *http.Request) {
	st := stateOf(r)
	if st.route.static != nil {
		s.serveStatic(w, r, st)
		return
	}
	st.target = st.route.pool.pick(st.start, nil)
	s.proxy.ServeHTTP(w, r)
}

// serveStatic answers from the route's root, its path prefix taken off.
// Response rules and security headers apply as to an upstream's answer.
func (s *Server) serveStatic(w http.ResponseWriter, r *http.Request, st *reqState) {
	h := w.Header()
	securityHeaders(st.site, h)
	for i := range st.route.respOps {
		st.route.respOps[i].apply(h)
	}
	if p := st.route.prefix; p != "" {
		r2 := *r
		u := *r.URL
		u.Path = "/" + strings.TrimPrefix(r.URL.Path, p)
		u.RawPath = ""
		r2.URL = &u
		r = &r2
	}
	st.route.static.ServeHTTP(w, r)
}

func ruleReason(rule string) string {
	if rule == "" {
		return "policy"
	}
	return rule
}

// finish writes the fingerprint log line and the metrics of a request.
func (s *Server) finish(rt *snapshot, st *reqState, rec *recorder, r *http.Request) {
	status := rec.status
	if st.status != 0 {
		status = st.status
	}
	siteName := "unknown"
	if st.site != nil {
		siteName = st.site.name
	}
	s.metrics.requests.WithLabelValues(siteName, st.action, protoLabel(r.ProtoMajor)).Inc()
	if st.site != nil && st.site.access != nil {
		st.site.access.Write(&fplog.AccessRecord{
			Time: st.start, RemoteIP: st.client, User: st.user, Method: r.Method, URI: r.RequestURI,
			Proto: r.Proto, Status: status, Bytes: rec.bytes, Referer: r.Referer(), UserAgent: r.UserAgent(),
			Host: r.Host, Duration: time.Since(st.start),
		})
	}
	if s.fplog == nil {
		return
	}
	rec2 := fplog.Record{
		Time:      st.start,
		RemoteIP:  st.client,
		Host:      r.Host,
		Method:    r.Method,
		Path:      r.URL.Path,
		Proto:     r.Proto,
		JA4:       st.ja4,
		UserAgent: r.UserAgent(),
		Weight:    st.weight,
		Rules:     st.rules,
		Action:    st.action,
		Challenge: st.challenge,
		Status:    status,
		Bytes:     rec.bytes,
		Duration:  time.Since(st.start),
	}
	if f := st.tls; f != nil {
		rec2.TLSVersion, rec2.SNI, rec2.ALPN = f.TLSVersion, f.SNI, f.ALPN
		rec2.JA4R, rec2.JA4O, rec2.JA4RO = f.JA4R, f.JA4O, f.JA4RO
		rec2.ClientFamily = f.Client.Family
	}
	if h := st.http; h != nil {
		rec2.HFP, rec2.HFPR, rec2.H2FP = h.HFP, h.HFPR, h.H2FP
		if rt.cfg.Fingerprints.JA4H {
			rec2.JA4H = h.JA4H
		}
	}
	s.fplog.Write(&rec2)
}

func protoLabel(major int) string {
	switch major {
	case 3:
		return "h3"
	case 2:
		return "h2"
	}
	return "h1"
}

// countPass counts an answer to a challenge that earned nothing, by what
// /.maat/pass replied: a 403 for a forged token or a wrong solution, a new
// challenge page for a stale one (expired, roamed, replayed). Passes are
// counted by the challenger's OnPass.
func (s *Server) countPass(status int) {
	switch status {
	case http.StatusForbidden:
		s.metrics.challenges.WithLabelValues("failed", "bad_answer").Inc()
	case http.StatusOK:
		s.metrics.challenges.WithLabelValues("failed", "stale").Inc()
	}
}

// challengeClient is what /.maat/pass binds a pass to.
func (s *Server) challengeClient(r *http.Request) challenge.Client {
	st := stateOf(r)
	if st == nil {
		return challenge.Client{IP: peerAddr(r.RemoteAddr)}
	}
	return challenge.Client{IP: st.client, JA4: st.ja4}
}

// errorPage answers an upstream failure with the localized error page.
func (s *Server) errorPage(w http.ResponseWriter, r *http.Request, status int, reason string) {
	st := stateOf(r)
	siteName := "unknown"
	if st.site != nil {
		siteName = st.site.name
	}
	s.metrics.upErrors.WithLabelValues(siteName, reason).Inc()
	s.rt.Load().challenger.Error(w, r, status, st.id, reason)
}

// plainError answers without a site: a short text naming reason and id.
func (s *Server) plainError(w http.ResponseWriter, st *reqState, status int, reason string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(strconv.Itoa(status) + " " + http.StatusText(status) +
		"\n\nThis server does not serve that host name.\nreason: " + reason + "\nrequest id: " + st.id + "\n"))
}

// nextID returns a request id: process prefix and a counter, cheap and unique
// per node.
func (s *Server) nextID() string {
	var b [24]byte
	n := copy(b[:], s.idPrefix)
	return string(strconv.AppendUint(b[:n], s.idSeq.Add(1), 36))
}

// recorder remembers the status and size of a response. It unwraps for
// http.ResponseController, so flushing (SSE) and hijacking (websockets) reach
// the real writer.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 && code >= 200 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(p)
	r.bytes += int64(n)
	return n, err
}

func (r *recorder) Flush() { _ = http.NewResponseController(r.ResponseWriter).Flush() }

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// demoHeaders tells the demo upstream what the edge saw; only `edge demo`
// sends these (DESIGN.md's contract headers are sent always).
func demoHeaders(h http.Header, r *http.Request, st *reqState) {
	h["X-Maat-Proto"] = []string{r.Proto}
	h["X-Maat-Client"] = []string{st.client.String()}
	if st.tls != nil {
		h["X-Maat-Tls-Version"] = []string{st.tls.TLSVersion}
		if st.tls.Client.Family != "" {
			h["X-Maat-Family"] = []string{st.tls.Client.Family + " " + st.tls.Client.Versions}
		}
	}
	if st.http != nil {
		h["X-Maat-Hfp"] = []string{st.http.HFP}
		h["X-Maat-Header-Order"] = []string{strings.Join(st.http.Names, ", ")}
		if st.http.H2FP != "" {
			h["X-Maat-H2fp"] = []string{st.http.H2FP}
		}
	}
	if len(st.rules) > 0 {
		h["X-Maat-Rules"] = []string{strings.Join(st.rules, ", ")}
	}
}

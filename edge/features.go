package edge

import (
	"crypto/sha256"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/maatproxy/maat/edge/config"
	"github.com/maatproxy/maat/urlpath"
)

// What a site needs beyond forwarding, compiled from its configuration:
// canonical host, redirects, HSTS and security headers, header rules,
// maintenance, basic authentication.

type redirect struct {
	from, to string
	prefix   bool
	status   int
}

// compileRedirects keeps the configured order; the first match wins.
func compileRedirects(rs []config.Redirect) []redirect {
	out := make([]redirect, 0, len(rs))
	for _, r := range rs {
		st := r.Status
		if st == 0 {
			st = http.StatusMovedPermanently
		}
		out = append(out, redirect{from: r.From, to: r.To, prefix: strings.HasSuffix(r.From, "/"), status: st})
	}
	return out
}

// match returns the target of a request for u (its path normalized) whose
// path reads as model (urlpath): from matches u's path or, failing that,
// the model, in any case when fold; the rest of a prefix is kept, escaped
// again, and the query. A redirect to the request's own path (a model or a
// case that from matches, redirected to the path it reads as) is no
// redirect. The result is always a path on the site or the operator's
// absolute URL (safeLocation).
func (r *redirect) match(u *url.URL, model string, fold bool) (string, bool) {
	rest, ok := r.cut(u.Path, fold)
	if !ok {
		rest, ok = r.cut(model, fold)
	}
	if !ok {
		return "", false
	}
	to := r.to
	if r.prefix {
		rest = (&url.URL{Path: rest}).EscapedPath()
		to = r.to + rest
		if !strings.HasSuffix(r.to, "/") && rest != "" {
			to = r.to + "/" + rest
		}
	}
	if to == u.EscapedPath() {
		return "", false
	}
	if u.RawQuery != "" {
		to += "?" + u.RawQuery
	}
	return safeLocation(to), true
}

// cut returns what of path follows a prefix redirect's from, or whether
// path is an exact one's.
func (r *redirect) cut(path string, fold bool) (string, bool) {
	if r.prefix {
		return urlpath.CutPrefix(path, r.from, fold)
	}
	return "", urlpath.Equal(path, r.from, fold)
}

// safeLocation keeps a redirect target a path on the site when it starts
// with "/": no concatenation may make it scheme-relative ("//host") or a
// backslash URL ("/\host", which browsers read as "//host"), and no line
// break may split the header.
func safeLocation(loc string) string {
	if strings.ContainsAny(loc, "\r\n\x00") {
		return "/"
	}
	if strings.HasPrefix(loc, "/") {
		rest := strings.TrimLeft(loc, "/\\")
		loc = "/" + strings.ReplaceAll(rest, "\\", "%5C")
	}
	return loc
}

func hstsValue(site *config.Site, mode string) string {
	h := site.HSTS
	if h == nil {
		if mode != "acme" {
			return ""
		}
		return "max-age=31536000"
	}
	if h.MaxAge.D() <= 0 {
		return ""
	}
	v := "max-age=" + strconv.FormatInt(int64(h.MaxAge.D().Seconds()), 10)
	if h.IncludeSubdomains {
		v += "; includeSubDomains"
	}
	if h.Preload {
		v += "; preload"
	}
	return v
}

// headerOps is HeaderOps with canonical names, applied remove, set, add.
type headerOps struct {
	remove []string
	set    [][2]string
	add    [][2]string
}

func (o *headerOps) empty() bool { return len(o.remove)+len(o.set)+len(o.add) == 0 }

func compileOps(h config.HeaderOps) headerOps {
	var o headerOps
	for _, n := range h.Remove {
		o.remove = append(o.remove, http.CanonicalHeaderKey(n))
	}
	for n, v := range h.Set {
		o.set = append(o.set, [2]string{http.CanonicalHeaderKey(n), v})
	}
	for n, v := range h.Add {
		o.add = append(o.add, [2]string{http.CanonicalHeaderKey(n), v})
	}
	return o
}

func (o *headerOps) apply(h http.Header) {
	for _, n := range o.remove {
		delete(h, n)
	}
	for _, kv := range o.set {
		h[kv[0]] = []string{kv[1]}
	}
	for _, kv := range o.add {
		h[kv[0]] = append(h[kv[0]], kv[1])
	}
}

// basicAuth checks HTTP Basic credentials against bcrypt hashes. bcrypt is
// slow on purpose (tens of milliseconds), so a verified pair is remembered
// by its SHA-256 until the configuration changes; the cache is bounded.
type basicAuth struct {
	realm string
	users map[string][]byte
	dummy []byte // a hash of nothing anyone types, at the users' cost
	mu    sync.Mutex
	ok    map[[32]byte]bool
}

const maxAuthCache = 1024

func newBasicAuth(a *config.BasicAuth) *basicAuth {
	if a == nil {
		return nil
	}
	b := &basicAuth{realm: a.Realm, users: map[string][]byte{}, ok: map[[32]byte]bool{}}
	if b.realm == "" {
		b.realm = "restricted"
	}
	cost := bcrypt.DefaultCost
	for u, h := range a.Users {
		b.users[u] = []byte(h)
		if c, err := bcrypt.Cost([]byte(h)); err == nil {
			cost = c
		}
	}
	b.dummy, _ = bcrypt.GenerateFromPassword(randomBytes(16), cost)
	return b
}

// authResult is what checkAuth found.
type authResult uint8

const (
	authOK      authResult = iota
	authFailed             // no credentials or wrong ones: 401
	authLimited            // too many attempts from this client: 429
	authBusy               // every bcrypt slot taken for too long: 503
)

// newBcryptSlots bounds the bcrypt comparisons running at once to half the
// CPUs (at least one), so that a flood of wrong passwords never takes more
// than that share of the machine.
func newBcryptSlots() chan struct{} { return make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2)) }

// bcryptQueue is how long a password check waits for a bcrypt slot.
const bcryptQueue = 2 * time.Second

// checkAuth checks r's Basic credentials against the route's users. A pair
// verified before is remembered (no bcrypt); any other attempt costs one of
// the client's limits.auth_attempts per minute, then waits for a bcrypt
// slot.
func (h *Handler) checkAuth(r *http.Request, st *reqState, b *basicAuth) authResult {
	user, pass, ok := r.BasicAuth()
	if !ok {
		return authFailed
	}
	key := sha256.Sum256([]byte(user + "\x00" + pass))
	b.mu.Lock()
	cached := b.ok[key]
	b.mu.Unlock()
	if cached {
		return authOK
	}
	n := h.cfg.Limits.AuthAttempts
	allowed, _, err := h.env.Store.Take(r.Context(), "auth:"+clientKey(st.client).String(), float64(n)/60, n)
	if err == nil && !allowed {
		return authLimited
	}
	t := time.NewTimer(bcryptQueue)
	select {
	case h.env.bcrypt <- struct{}{}:
		t.Stop()
	case <-t.C:
		return authBusy
	case <-r.Context().Done():
		t.Stop()
		return authBusy
	}
	good := b.compare(user, pass)
	<-h.env.bcrypt
	if !good {
		return authFailed
	}
	b.mu.Lock()
	if len(b.ok) >= maxAuthCache {
		clear(b.ok)
	}
	b.ok[key] = true
	b.mu.Unlock()
	return authOK
}

// compare runs bcrypt for user and pass; an unknown user costs the same
// time as a known one, so names cannot be probed.
func (b *basicAuth) compare(user, pass string) bool {
	hash, known := b.users[user]
	if !known {
		_ = bcrypt.CompareHashAndPassword(b.dummy, []byte(pass))
		return false
	}
	return bcrypt.CompareHashAndPassword(hash, []byte(pass)) == nil
}

func (b *basicAuth) challenge(w http.ResponseWriter) {
	h := w.Header()
	h.Set("WWW-Authenticate", `Basic realm="`+strings.ReplaceAll(b.realm, `"`, "'")+`", charset="UTF-8"`)
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write([]byte("401 Unauthorized: this part of the site needs a user name and password.\n"))
}

func joinHostPort(host, port string) string { return net.JoinHostPort(host, port) }

// hostOnly drops the port of a Host header value, if it has one.
func hostOnly(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		return host
	}
	return h
}

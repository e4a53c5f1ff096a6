package challenge

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Paths under the edge's own /.maat/ prefix.
const (
	PathPrefix   = "/.maat/"
	passPath     = PathPrefix + "pass"
	staticPrefix = PathPrefix + "static/"
)

// Handler serves everything under /.maat/: the static assets and
// /.maat/pass, which verifies a solution (or the elapsed wait), sets the
// pass cookie and redirects to a path on the same site. client tells the
// binding of a request (its address and JA4).
func (c *Challenger) Handler(client func(*http.Request) Client) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch p := r.URL.Path; {
		case p == passPath:
			c.servePass(w, r, client(r))
		case strings.HasPrefix(p, staticPrefix):
			c.serveStatic(w, r, strings.TrimPrefix(p, staticPrefix))
		default:
			http.NotFound(w, r)
		}
	})
}

func (c *Challenger) serveStatic(w http.ResponseWriter, r *http.Request, name string) {
	a, ok := c.assets[name]
	if !ok || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Type", a.contentType)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("ETag", `"`+a.etag+`"`)
	if r.URL.Query().Get("v") == a.etag {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "public, max-age=300")
	}
	h.Set("Vary", "Accept-Encoding")
	if inm := r.Header.Get("If-None-Match"); inm != "" && strings.Contains(inm, `"`+a.etag+`"`) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body := a.body
	if a.gz != nil && acceptsGzip(r) {
		h.Set("Content-Encoding", "gzip")
		body = a.gz
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if r.Method == http.MethodHead {
		return
	}
	w.Write(body)
}

// servePass redeems a challenge. A token that expired, was issued to
// another binding (the visitor roamed) or was already redeemed earns a
// fresh challenge, never an error; only a forged token or a wrong solution
// is refused.
func (c *Challenger) servePass(w http.ResponseWriter, r *http.Request, cl Client) {
	l := c.language(r)
	q := r.URL.Query()
	redirect := safeRedirect(q.Get("r"))
	id := ""
	if c.cfg.RequestID != nil {
		id = c.cfg.RequestID(r)
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		c.writeShort(w, r, http.StatusMethodNotAllowed, "method_not_allowed", l.t["ChallengeAPI"], id)
		return
	}
	t, err := parseToken(q.Get("t"), c.tokenKeys)
	if err != nil {
		c.Deny(w, r, id, "challenge_invalid")
		return
	}
	now := c.now()
	if now.Unix() >= t.expires || t.bind != bindHash(c.bind, cl) {
		c.challengePage(w, r, l, cl, t.spec(), redirect, id)
		return
	}
	if n := q.Get("n"); n != "" {
		nonces, ok := parseNonces(n, int(t.k))
		if t.alg != algPoW || !ok || !verifyPoW(&t, nonces) {
			c.Deny(w, r, id, "challenge_wrong_solution")
			return
		}
	} else if left := unixTime(t.issued + int64(t.wait)).Sub(now); left > 0 {
		// Too early for the wait path: show the same challenge again,
		// refreshing when the wait is over.
		c.renderChallenge(w, r, l, &t, q.Get("t"), redirect, id, uint8((left+time.Second-1)/time.Second))
		return
	}
	first, err := c.marker.MarkOnce(r.Context(), t.markKey(), unixTime(t.expires).Sub(now)+time.Second)
	if err != nil {
		c.Error(w, r, http.StatusServiceUnavailable, id, "challenge_store_unavailable")
		return
	}
	if !first {
		// A second redemption: a double submission from the same browser
		// already holds the cookie; anyone else starts over.
		if c.Check(r, cl, int(t.bits)) == PassOK {
			redirectTo(w, redirect)
			return
		}
		c.challengePage(w, r, l, cl, t.spec(), redirect, id)
		return
	}
	ck, err := c.issueCookie(&t, cl, now)
	if err != nil {
		c.Error(w, r, http.StatusInternalServerError, id, "challenge_cookie_signing")
		return
	}
	http.SetCookie(w, ck)
	if c.cfg.OnPass != nil {
		c.cfg.OnPass(r, t.spec(), now.Sub(unixTime(t.issued)))
	}
	redirectTo(w, redirect)
}

func redirectTo(w http.ResponseWriter, target string) {
	h := w.Header()
	h.Set("Location", target)
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "same-origin")
	w.WriteHeader(http.StatusSeeOther)
}

// safeRedirect returns target if it is a path on this site, otherwise "/".
// It refuses schemes, hosts, "//" and "/\" (which browsers read as a host),
// any backslash or control character (browsers strip tabs and newlines
// from URLs), and paths under /.maat/.
func safeRedirect(target string) string {
	if len(target) == 0 || len(target) > 4096 || target[0] != '/' {
		return "/"
	}
	if len(target) > 1 && (target[1] == '/' || target[1] == '\\') {
		return "/"
	}
	for i := 0; i < len(target); i++ {
		if b := target[i]; b < 0x20 || b == 0x7f || b == '\\' || b == ' ' {
			return "/"
		}
	}
	u, err := url.Parse(target)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return "/"
	}
	if strings.HasPrefix(u.Path, PathPrefix) {
		return "/"
	}
	return target
}

// memoryMarker is the single-node Marker used when Config.Marker is nil.
type memoryMarker struct {
	mu   sync.Mutex
	m    map[string]time.Time
	now  func() time.Time
	sets int
}

func newMemoryMarker(now func() time.Time) *memoryMarker {
	return &memoryMarker{m: make(map[string]time.Time), now: now}
}

func (mm *memoryMarker) MarkOnce(_ context.Context, key string, ttl time.Duration) (bool, error) {
	now := mm.now()
	mm.mu.Lock()
	defer mm.mu.Unlock()
	if exp, ok := mm.m[key]; ok && now.Before(exp) {
		return false, nil
	}
	mm.sets++
	if mm.sets%1024 == 0 {
		for k, exp := range mm.m {
			if !now.Before(exp) {
				delete(mm.m, k)
			}
		}
	}
	mm.m[key] = now.Add(ttl)
	return true, nil
}

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

// Reasons /.maat/pass refuses a request with: shown on the refusal page
// (403, in the visitor's language, with a link back to the page they came
// for) and given to Config.OnFail.
const (
	FailInvalid       = "challenge_invalid"           // undecodable, altered, or signed with another secret
	FailExpired       = "challenge_expired"           // past its challenge TTL
	FailRoamed        = "challenge_roamed"            // redeemed from another IP prefix or JA4 than it was issued to
	FailReused        = "challenge_reused"            // redeemed already, and the request holds no pass for it
	FailWrongKind     = "challenge_wrong_kind"        // a wait token with nonces
	FailNonceMissing  = "challenge_nonce_missing"     // a proof-of-work token without nonces
	FailWrongSolution = "challenge_wrong_solution"    // nonces that do not solve the puzzles
	FailMethod        = "method_not_allowed"          // not GET or HEAD (405)
	FailStore         = "challenge_store_unavailable" // the single-use mark could not be set (503)
	FailSigning       = "challenge_cookie_signing"    // the pass cookie could not be signed (500)
)

// servePass redeems a challenge token: a proof-of-work token with its
// nonces, or a wait token without any once its wait is over (before that,
// the wait page again). Every other request is refused with a reason and
// never earns a cookie. A token redeemed twice by the browser that already
// holds the pass (a double submission, two tabs) is sent on.
func (c *Challenger) servePass(w http.ResponseWriter, r *http.Request, cl Client) {
	l := c.language(r)
	q := r.URL.Query()
	redirect := safeRedirect(q.Get("r"))
	id := ""
	if c.cfg.RequestID != nil {
		id = c.cfg.RequestID(r)
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		c.failed(r, FailMethod)
		w.Header().Set("Allow", "GET, HEAD")
		c.writeShort(w, r, http.StatusMethodNotAllowed, FailMethod, l.t["ChallengeAPI"], id)
		return
	}
	tok := q.Get("t")
	t, err := parseToken(tok, c.tokenKeys)
	if err != nil {
		c.refuse(w, r, l, id, redirect, FailInvalid)
		return
	}
	nonces, hasNonces := q["n"]
	now := c.now()
	var reason string
	switch {
	case t.kind == kindWait && hasNonces:
		reason = FailWrongKind
	case t.kind == kindPoW && (!hasNonces || nonces[0] == ""):
		reason = FailNonceMissing
	case now.Unix() >= t.expires:
		reason = FailExpired
	case !t.bind.boundTo(bindingOf(c.bind, cl)):
		reason = FailRoamed
	case t.kind == kindPoW && !c.solved(&t, nonces[0]):
		reason = FailWrongSolution
	}
	if reason != "" {
		c.refuse(w, r, l, id, redirect, reason)
		return
	}
	if t.kind == kindWait {
		if left := unixTime(t.issued + int64(t.wait)).Sub(now); left > 0 {
			// Too early: the wait page again, with this visitor's own
			// token, refreshing when the wait is over.
			w.Header().Set(MitigatedHeader, "challenge")
			p := challengeTokens{wait: tok, waitSecs: uint16((left + time.Second - 1) / time.Second)}
			c.renderChallenge(w, r, l, &p, redirect, id)
			return
		}
	}
	first, err := c.marker.MarkOnce(r.Context(), t.markKey(), unixTime(t.expires).Sub(now)+time.Second)
	if err != nil {
		c.failed(r, FailStore)
		c.Error(w, r, http.StatusServiceUnavailable, id, FailStore)
		return
	}
	// A browser that holds a pass at least as good keeps it: a second
	// redemption (a double submission) is sent on, and a first one does
	// not trade a stronger pass for a weaker one (two tabs).
	holds := c.Check(r, cl, t.need()) == PassOK
	if !first {
		if holds {
			redirectTo(w, redirect)
			return
		}
		c.refuse(w, r, l, id, redirect, FailReused)
		return
	}
	if !holds {
		ck, err := c.issueCookie(&t, cl, now)
		if err != nil {
			c.failed(r, FailSigning)
			c.Error(w, r, http.StatusInternalServerError, id, FailSigning)
			return
		}
		http.SetCookie(w, ck)
	}
	if c.cfg.OnPass != nil {
		c.cfg.OnPass(r, t.spec(), now.Sub(unixTime(t.issued)))
	}
	redirectTo(w, redirect)
}

// solved reports whether n holds the nonces that solve t's puzzles.
func (c *Challenger) solved(t *token, n string) bool {
	nonces, ok := parseNonces(n, int(t.k))
	return ok && verifyPoW(t, nonces)
}

// failed reports a refusal to Config.OnFail.
func (c *Challenger) failed(r *http.Request, reason string) {
	if c.cfg.OnFail != nil {
		c.cfg.OnFail(r, reason)
	}
}

// refuse answers a refused redemption: 403 with Maat-Mitigated: challenge,
// a page that names the reason and links back to the page the visitor came
// for (which challenges them afresh: one click, never a loop).
func (c *Challenger) refuse(w http.ResponseWriter, r *http.Request, l *lang, id, redirect, reason string) {
	c.failed(r, reason)
	w.Header().Set(MitigatedHeader, "challenge")
	c.message(w, r, l, id, messagePage{status: http.StatusForbidden, title: l.t["PassFailTitle"], text: l.t["PassFailText"], reason: reason, back: redirect})
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
// from URLs), dot segments (also percent-encoded: browsers resolve them,
// and "/..//host" would become "//host"), and paths under /.maat/.
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
	if strings.HasPrefix(u.Path, PathPrefix) || hasDotSegment(u.Path) {
		return "/"
	}
	return target
}

// hasDotSegment reports whether the (decoded) path has a "." or ".."
// segment.
func hasDotSegment(p string) bool {
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
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

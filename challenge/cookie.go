package challenge

import (
	"crypto/ed25519"
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Reason says why a pass cookie did or did not pass. Its String is a
// constant snake_case word for the log and metrics.
type Reason uint8

// Reasons returned by Check.
const (
	PassOK       Reason = iota // a valid cookie for this client and difficulty
	PassNoCookie               // no pass cookie
	PassInvalid                // undecodable, bad signature, wrong algorithm
	PassExpired                // past its expiry
	PassPrefix                 // earned from another IP prefix (or address family)
	PassJA4                    // earned with another JA4
	PassBits                   // earned at fewer bits than asked
	PassPolicy                 // earned under another policy version
	PassWaitOnly               // earned by waiting, where a proof of work is asked
)

var reasonNames = [...]string{"ok", "no_cookie", "invalid", "expired", "ip_prefix", "ja4", "difficulty", "policy_version", "wait_only"}

// How a pass was earned: the cookie's "method" claim, and Token.Kind.
const (
	MethodPoW  = "pow"
	MethodWait = "wait"
)

func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "unknown"
}

// passClaims are the pass cookie's claims. Method is MethodPoW or
// MethodWait, Bits the bits proven (0 for a wait). A cookie without a
// method (issued before methods were recorded) is invalid: it may have
// been earned by waiting for a proof of work, so its holder is challenged
// once more.
type passClaims struct {
	jwt.RegisteredClaims
	Method string `json:"method"`
	Bits   int    `json:"bits"`
	Net    string `json:"net,omitempty"`
	JA4    string `json:"ja4,omitempty"`
	Family string `json:"fam,omitempty"`
	Rule   string `json:"rule,omitempty"`
	Policy string `json:"pv,omitempty"`
}

// errCookieClaims reports a pass cookie whose signature holds but whose
// method is missing or does not fit its bits.
var errCookieClaims = errors.New("challenge: pass cookie without a valid method")

// passEntry is a verified cookie in the cache.
type passEntry struct {
	expires int64 // Unix seconds
	wait    bool  // earned by waiting
	bits    int
	net     netip.Prefix
	ja4     string
	family  string
	policy  string
}

// passCache remembers verified cookies by their text.
type passCache struct {
	mu  sync.RWMutex
	m   map[string]passEntry
	max int
}

func (pc *passCache) get(k string) (passEntry, bool) {
	pc.mu.RLock()
	e, ok := pc.m[k]
	pc.mu.RUnlock()
	return e, ok
}

func (pc *passCache) put(k string, e passEntry, now int64) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if len(pc.m) >= pc.max {
		// Drop the expired entries, and if that is not enough, an
		// arbitrary quarter (map order is random).
		for key, v := range pc.m {
			if v.expires <= now {
				delete(pc.m, key)
			}
		}
		drop := len(pc.m) - pc.max*3/4
		for key := range pc.m {
			if drop <= 0 {
				break
			}
			delete(pc.m, key)
			drop--
		}
	}
	pc.m[k] = e
}

// cookieValue finds the pass cookie in r's Cookie headers without
// allocating.
func cookieValue(r *http.Request) (string, bool) {
	for _, line := range r.Header["Cookie"] {
		for line != "" {
			var part string
			part, line, _ = strings.Cut(line, ";")
			part = strings.TrimSpace(part)
			if v, ok := strings.CutPrefix(part, CookieName+"="); ok {
				return strings.Trim(v, `"`), v != ""
			}
		}
	}
	return "", false
}

// Check reports whether r carries a valid pass cookie for cl that meets
// need, and if not, why. A cookie earned by waiting meets only a need with
// Wait set (PassWaitOnly otherwise) of at most WaitBits; a proof of work
// meets a need of as many bits or fewer (PassBits otherwise). A cached
// cookie costs a map lookup and no allocation.
func (c *Challenger) Check(r *http.Request, cl Client, need Need) Reason {
	v, ok := cookieValue(r)
	if !ok {
		return PassNoCookie
	}
	now := c.now().Unix()
	e, ok := c.cache.get(v)
	if !ok {
		if c.rejected.has(v, now) {
			return PassInvalid
		}
		var err error
		if e, err = c.parseCookie(v); err != nil {
			c.rejected.add(v, now)
			return PassInvalid
		}
		c.cache.put(v, e, now)
	}
	return c.judge(&e, cl, need, now)
}

// rejectCache remembers cookies that failed to verify, so that a client
// replaying a forged or broken cookie costs a map lookup per request, not a
// JWT parse (about 14 µs). It is separate from passCache so that a flood of
// distinct bad cookies cannot evict good ones, bounded (emptied when full),
// and forgets after rejectTTL.
type rejectCache struct {
	mu sync.RWMutex
	m  map[string]int64 // cookie → Unix seconds until which it is rejected
}

const (
	maxRejected = 4096
	rejectTTL   = 60 // seconds
)

func (rc *rejectCache) has(k string, now int64) bool {
	rc.mu.RLock()
	until, ok := rc.m[k]
	rc.mu.RUnlock()
	return ok && now < until
}

func (rc *rejectCache) add(k string, now int64) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.m == nil || len(rc.m) >= maxRejected {
		rc.m = make(map[string]int64)
	}
	rc.m[k] = now + rejectTTL
}

// Pass reports whether r carries a valid pass cookie for cl that meets
// need.
func (c *Challenger) Pass(r *http.Request, cl Client, need Need) bool {
	return c.Check(r, cl, need) == PassOK
}

func (c *Challenger) judge(e *passEntry, cl Client, need Need, now int64) Reason {
	switch {
	case now >= e.expires:
		return PassExpired
	case e.wait && !need.Wait:
		return PassWaitOnly
	case e.proven() < need.Bits:
		return PassBits
	}
	switch {
	case c.policyVersion != "" && e.policy != c.policyVersion:
		return PassPolicy
	case c.bind&BindIPPrefix != 0 && e.net != cl.prefix():
		return PassPrefix
	case c.bind&BindJA4 != 0 && !e.sameStack(cl):
		return PassJA4
	}
	return PassOK
}

// proven is the proof of work e stands for.
func (e *passEntry) proven() int {
	if e.wait {
		return WaitBits
	}
	return e.bits
}

// sameStack reports whether cl's TLS stack is the one e was earned with.
// Over the same transport, the JA4s must be equal. A QUIC hello ("q…")
// and a TCP hello ("t…") of one browser always differ, so across
// transports the stacks must be of the same known family: a pass a
// browser earned over HTTP/3 holds when it falls back to HTTP/2, and is
// refused to curl or a Go program in the same network replaying it.
func (e *passEntry) sameStack(cl Client) bool {
	switch {
	case e.ja4 == "" || cl.JA4 == "":
		return e.ja4 == cl.JA4 // unknown both times (no TLS), or refused
	case e.ja4[0] == cl.JA4[0]:
		return e.ja4 == cl.JA4
	}
	return e.family != "" && e.family == cl.Family
}

func (c *Challenger) signingMethod() jwt.SigningMethod {
	if c.edKey != nil {
		return jwt.SigningMethodEdDSA
	}
	return jwt.SigningMethodHS256
}

// issueCookie signs a pass for cl: the token's proof of work, or a wait.
func (c *Challenger) issueCookie(t *token, cl Client, now time.Time) (*http.Cookie, error) {
	exp := now.Add(c.cfg.passTTL())
	claims := passClaims{
		RegisteredClaims: jwt.RegisteredClaims{
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(exp),
		},
		Method: MethodPoW,
		Bits:   int(t.bits),
		Rule:   t.rule,
		Policy: c.policyVersion,
	}
	if t.kind == kindWait {
		claims.Method, claims.Bits = MethodWait, 0
	}
	if c.bind&BindIPPrefix != 0 {
		claims.Net = cl.prefix().String()
	}
	if c.bind&BindJA4 != 0 {
		claims.JA4, claims.Family = cl.JA4, cl.Family
	}
	var key any = c.cookieKey
	if c.edKey != nil {
		key = c.edKey
	}
	s, err := jwt.NewWithClaims(c.signingMethod(), claims).SignedString(key)
	if err != nil {
		return nil, err
	}
	return &http.Cookie{
		Name:     CookieName,
		Value:    s,
		Path:     "/",
		Expires:  exp,
		MaxAge:   int(c.cfg.passTTL() / time.Second),
		HttpOnly: true,
		Secure:   true,
		SameSite: http.SameSiteLaxMode,
	}, nil
}

// parseCookie verifies a pass cookie's signature, algorithm and expiry.
func (c *Challenger) parseCookie(s string) (passEntry, error) {
	var claims passClaims
	_, err := c.parser.ParseWithClaims(s, &claims, c.keyFunc)
	if err != nil {
		return passEntry{}, err
	}
	e := passEntry{expires: claims.ExpiresAt.Unix(), bits: claims.Bits, ja4: claims.JA4, family: claims.Family, policy: claims.Policy}
	switch claims.Method {
	case MethodPoW:
	case MethodWait:
		if claims.Bits != 0 {
			return passEntry{}, errCookieClaims
		}
		e.wait = true
	default:
		return passEntry{}, errCookieClaims
	}
	if claims.Net != "" {
		if e.net, err = netip.ParsePrefix(claims.Net); err != nil {
			return passEntry{}, err
		}
	}
	return e, nil
}

func (c *Challenger) keyFunc(t *jwt.Token) (any, error) {
	if c.edKey != nil {
		return c.edKey.Public().(ed25519.PublicKey), nil
	}
	return c.cookieKey, nil
}

// PublicKey returns the EdDSA public key upstreams can verify pass cookies
// with, or nil when cookies are signed with HS256.
func (c *Challenger) PublicKey() ed25519.PublicKey {
	if c.edKey == nil {
		return nil
	}
	return c.edKey.Public().(ed25519.PublicKey)
}

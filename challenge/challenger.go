package challenge

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"html/template"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/text/language"
)

// Challenger issues and verifies challenges and pass cookies and renders
// the pages. It is safe for concurrent use.
type Challenger struct {
	cfg           Config
	tokenKeys     *macPool
	cookieKey     []byte
	edKey         ed25519.PrivateKey
	parser        *jwt.Parser
	marker        Marker
	bind          Binding
	policyVersion string
	cache         passCache
	rejected      rejectCache
	langs         map[language.Tag]*lang
	en            *lang
	msgs          Messages
	tmpl          *template.Template
	assets        map[string]*asset
	now           func() time.Time
	pools         pools

	escaper         *strings.Replacer
	customTemplates bool     // TemplateDir overrides templates: no skeletons
	skeletons       sync.Map // skeletonKey → *skeleton (nil: use the template)
	skeletonCount   atomic.Int32
}

// New returns a Challenger for cfg; cfg is copied.
func New(cfg Config) (*Challenger, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Challenger{
		cfg:           cfg,
		tokenKeys:     newMACPool(deriveKey(cfg.Secret, "maat challenge token v1")),
		cookieKey:     deriveKey(cfg.Secret, "maat pass cookie v1"),
		edKey:         cfg.SigningKey,
		marker:        cfg.Marker,
		bind:          cfg.Bind.resolve(),
		policyVersion: cfg.PolicyVersion,
		cache:         passCache{m: make(map[string]passEntry), max: cfg.cacheSize()},
		msgs:          cfg.Messages,
		now:           cfg.Now,
	}
	c.pools.init()
	c.escaper = newEscaper()
	if cfg.TemplateDir != "" {
		files, _ := filepath.Glob(filepath.Join(cfg.TemplateDir, "*.html"))
		c.customTemplates = len(files) > 0
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.marker == nil {
		c.marker = newMemoryMarker(c.now)
	}
	c.parser = jwt.NewParser(
		jwt.WithValidMethods([]string{c.signingMethod().Alg()}),
		jwt.WithExpirationRequired(),
		jwt.WithStrictDecoding(),
		jwt.WithTimeFunc(c.now),
	)
	c.langs, c.en = newLangs(cfg.Messages)
	var err error
	if c.assets, err = loadAssets(cfg.TemplateDir); err != nil {
		return nil, err
	}
	if c.tmpl, err = loadTemplates(cfg.TemplateDir, template.FuncMap{"asset": c.assetURL, "inline": c.inlineJS}); err != nil {
		return nil, err
	}
	return c, nil
}

// deriveKey separates the keys of tokens and cookies drawn from one secret.
func deriveKey(secret []byte, label string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(label))
	return m.Sum(nil)
}

// newToken starts a token of kind for cl, issued now.
func (c *Challenger) newToken(kind uint8, cl Client, rule string, now time.Time) token {
	if len(rule) > maxRuleLen {
		rule = rule[:maxRuleLen]
	}
	t := token{
		kind:    kind,
		k:       1,
		issued:  now.Unix(),
		expires: now.Add(c.cfg.challengeTTL()).Unix(),
		bind:    bindingOf(c.bind, cl),
		rule:    rule,
	}
	rand.Read(t.random[:])
	return t
}

// issuePoW makes a proof-of-work token for cl at s's difficulty.
func (c *Challenger) issuePoW(cl Client, s Spec, now time.Time) (token, string) {
	bits := s.Bits
	if bits <= 0 {
		bits = DefaultBits
	}
	bits = min(bits, MaxBits)
	t := c.newToken(kindPoW, cl, s.Rule, now)
	t.bits, t.k = uint8(bits), subPuzzles(bits)
	return t, t.marshal(c.tokenKeys)
}

// issueWait makes a wait token for cl, redeemable wait seconds from now.
func (c *Challenger) issueWait(cl Client, rule string, wait uint16, now time.Time) (token, string) {
	t := c.newToken(kindWait, cl, rule, now)
	t.wait = wait
	return t, t.marshal(c.tokenKeys)
}

// waitOf is the wait s offers, in whole seconds (0: none).
func (c *Challenger) waitOf(s Spec) uint16 {
	d := s.Wait
	if s.Algorithm == "metarefresh" && d <= 0 {
		d = c.cfg.wait()
	}
	if d <= 0 {
		return 0
	}
	d = min(d, MaxWait, c.cfg.challengeTTL()/2)
	return uint16(max(1, (d+time.Second-1)/time.Second))
}

// MitigatedHeader is the response header that marks challenge pages
// ("challenge") and deny pages ("deny"), so that monitors and crawlers do
// not take them for the site's content.
const MitigatedHeader = "Maat-Mitigated"

// Challenge answers a request that must prove itself, with Config's
// ChallengeStatus and Maat-Mitigated: challenge. Navigations get the
// challenge page, its tokens minted for this response: a proof of work
// (unless s asks for metarefresh) and, when s offers one, a wait. Other
// requests (not GET or HEAD, a Sec-Fetch-Mode other than navigate,
// XMLHttpRequest) get 401 with Retry-After and a short text or JSON body,
// never HTML and never a redirect.
func (c *Challenger) Challenge(w http.ResponseWriter, r *http.Request, cl Client, s Spec, requestID string) {
	l := c.language(r)
	w.Header().Set(MitigatedHeader, "challenge")
	if !isNavigation(r) {
		w.Header().Set("WWW-Authenticate", `Maat realm="browser check"`)
		w.Header().Set("Retry-After", fmt.Sprint(int(c.cfg.wait()/time.Second)))
		c.writeShort(w, r, http.StatusUnauthorized, "challenge_required", l.t["ChallengeAPI"], requestID)
		return
	}
	now := c.now()
	var p challengeTokens
	if wait := c.waitOf(s); wait > 0 {
		_, p.wait = c.issueWait(cl, s.Rule, wait, now)
		p.waitSecs = wait
	}
	if s.Algorithm != "metarefresh" {
		t, tok := c.issuePoW(cl, s, now)
		p.pow, p.powTok = &t, tok
	}
	c.renderChallenge(w, r, l, &p, safeRedirect(r.URL.RequestURI()), requestID)
}

// Deny answers with the deny page, Config's DenyStatus and Maat-Mitigated:
// deny; reason is a short public code that the operator finds in the log
// next to requestID.
func (c *Challenger) Deny(w http.ResponseWriter, r *http.Request, requestID, reason string) {
	l := c.language(r)
	w.Header().Set(MitigatedHeader, "deny")
	c.message(w, r, l, requestID, messagePage{status: c.cfg.denyStatus(), title: l.t["DenyTitle"], text: l.t["DenyText"], reason: reason})
}

// RateLimited answers 429 with Retry-After.
func (c *Challenger) RateLimited(w http.ResponseWriter, r *http.Request, requestID string, retryAfter time.Duration) {
	l := c.language(r)
	secs := max(1, int((retryAfter+time.Second-1)/time.Second))
	w.Header().Set("Retry-After", fmt.Sprint(secs))
	c.message(w, r, l, requestID, messagePage{status: http.StatusTooManyRequests, title: l.t["RateTitle"], text: l.plural("RateText", secs), reason: "rate_limited", retry: true})
}

// Error answers a gateway failure (502, 503, 504; any other status is
// shown as 502's text) without blaming the visitor or leaking internals.
func (c *Challenger) Error(w http.ResponseWriter, r *http.Request, status int, requestID, reason string) {
	l := c.language(r)
	text := l.t["Error502"]
	switch status {
	case http.StatusServiceUnavailable:
		text = l.t["Error503"]
	case http.StatusGatewayTimeout:
		text = l.t["Error504"]
	}
	c.message(w, r, l, requestID, messagePage{status: status, title: l.t["ErrorTitle"], text: text, reason: reason, retry: true})
}

// language chooses the page language for r.
func (c *Challenger) language(r *http.Request) *lang {
	if c.msgs == nil {
		return c.en
	}
	tag := c.msgs.Match(r.URL.Query().Get("lang"), r.Header.Get("Accept-Language"))
	if l, ok := c.langs[tag]; ok {
		return l
	}
	return c.en
}

// isNavigation reports whether r is a top-level page load that can show
// and run a challenge page.
func isNavigation(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	if m := r.Header.Get("Sec-Fetch-Mode"); m != "" && m != "navigate" {
		return false
	}
	return r.Header.Get("X-Requested-With") == ""
}

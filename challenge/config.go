package challenge

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"time"

	"github.com/maatproxy/maat/clientnet"
)

// Defaults used when the corresponding Config field is zero.
const (
	DefaultPassTTL      = 24 * time.Hour
	DefaultChallengeTTL = 30 * time.Minute
	DefaultWait         = 5 * time.Second
	DefaultSolveTimeout = 20 * time.Second
	DefaultBits         = 16
	DefaultCacheSize    = 65536

	// MaxBits is the largest difficulty a Spec may ask for.
	MaxBits = 35
	// WaitBits is the proof of work a pass earned by the no-JavaScript
	// wait stands for: the default difficulty. A rule that asks for more
	// is offered no wait, and a wait's pass does not meet it.
	WaitBits = DefaultBits
	// MaxWait is the longest wait a Spec may ask for; longer ones are
	// shortened to it.
	MaxWait = 10 * time.Minute
	// MinSecretLen is the shortest accepted Config.Secret.
	MinSecretLen = 32
	// CookieName is the pass cookie's name.
	CookieName = "__Host-maat-pass"
)

// Marker sets single-use marks: MarkOnce reports whether key was unmarked
// (and marks it for ttl). The store package implements it in memory and in
// Redis (SET NX).
type Marker interface {
	MarkOnce(ctx context.Context, key string, ttl time.Duration) (first bool, err error)
}

// Binding is the set of client properties a challenge token and a pass
// cookie are bound to.
type Binding uint8

// Binding flags. The zero Binding means BindIPPrefix|BindJA4; BindNone binds
// to nothing.
const (
	BindIPPrefix Binding = 1 << iota // the client's /24 (IPv4) or /64 (IPv6)
	BindJA4                          // the client's JA4 (compared within one transport)
	BindNone     Binding = 1 << 7
)

// ParseBinding turns the configuration words "ip_prefix" and "ja4" into a
// Binding; an empty list means BindNone.
func ParseBinding(words []string) (Binding, error) {
	if len(words) == 0 {
		return BindNone, nil
	}
	var b Binding
	for _, w := range words {
		switch w {
		case "ip_prefix":
			b |= BindIPPrefix
		case "ja4":
			b |= BindJA4
		default:
			return 0, fmt.Errorf("challenge: unknown binding %q (want ip_prefix or ja4)", w)
		}
	}
	return b, nil
}

func (b Binding) resolve() Binding {
	switch {
	case b == 0:
		return BindIPPrefix | BindJA4
	case b&BindNone != 0:
		return 0
	}
	return b
}

// Config configures a Challenger. Only Secret is required.
type Config struct {
	// Secret keys the challenge tokens and (with HS256) the pass cookies.
	// Every node of a cluster must hold the same secret. At least
	// MinSecretLen bytes.
	Secret []byte

	// SigningKey, if set, signs pass cookies with EdDSA instead of HS256,
	// so that an upstream can verify them with the public key.
	SigningKey ed25519.PrivateKey

	// PassTTL is the pass cookie's lifetime. If zero, DefaultPassTTL.
	PassTTL time.Duration

	// ChallengeTTL is how long a challenge token may be redeemed. If zero,
	// DefaultChallengeTTL.
	ChallengeTTL time.Duration

	// Wait is the wait of the metarefresh algorithm when its Spec sets
	// none. (Whether a proof-of-work page offers a wait, and how long, is
	// the Spec's Wait.) At most MaxWait. If zero, DefaultWait.
	Wait time.Duration

	// SolveTimeout is how long the browser solver works before it falls
	// back to the wait, when the page offers one. If zero,
	// DefaultSolveTimeout.
	SolveTimeout time.Duration

	// ChallengeStatus and DenyStatus are the HTTP status codes of the
	// challenge pages and the deny pages (Anubis's status_codes CHALLENGE
	// and DENY): 200–299 but 204 and 205, or 400–599. Both pages also carry
	// the response header Maat-Mitigated: challenge or deny. If zero, 403.
	// (A challenged request that cannot show a page, such as an API call,
	// gets 401 whatever ChallengeStatus says; a refused /.maat/pass gets
	// 403.)
	ChallengeStatus int
	DenyStatus      int

	// Marker refuses the replay of a solved token. If nil, an in-process
	// map is used (enough for a single node).
	Marker Marker

	// Bind is what tokens and cookies are bound to. If zero,
	// BindIPPrefix|BindJA4.
	Bind Binding

	// PolicyVersion is recorded in pass cookies; a cookie issued under
	// another non-empty version does not pass. Change it to re-challenge
	// everyone. If empty, not checked.
	PolicyVersion string

	// Messages localizes pages. If nil, pages are in English.
	Messages Messages

	// TemplateDir, if set, holds *.html files whose {{define}}s replace the
	// embedded templates of the same name ("page", the whole document;
	// "head", extra <head> content; "brand", above the heading, empty by
	// default: the place for a logo; "solver", the challenge page's inline
	// script in <head>; "challenge"; "message"; "footer"), and
	// a static/ folder whose files replace or add to the embedded assets
	// served under /.maat/static/ (maat.css for colours; a logo, linked from
	// a template as {{asset "logo.svg"}}).
	TemplateDir string

	// Contact and PolicyURL, if set, are shown on failure pages.
	Contact   string
	PolicyURL string

	// RequestID, if set, names the request on the pages that /.maat/pass
	// serves itself (refusals, fresh challenges), as on every other page.
	// If nil, those pages carry no request ID.
	RequestID func(*http.Request) string

	// CacheSize bounds the verified-cookie cache. If zero, DefaultCacheSize.
	CacheSize int

	// Now is the clock. If nil, time.Now.
	Now func() time.Time

	// OnPass, if set, is called each time a challenge is passed at
	// /.maat/pass, with what was proven (a wait reads as Algorithm
	// "metarefresh" and Bits 0) and the time from the token's issue to its
	// redemption (the solve time as the server measures it).
	OnPass func(r *http.Request, s Spec, solve time.Duration)

	// OnFail, if set, is called each time /.maat/pass refuses a request,
	// with the reason it shows the visitor (one of the Fail… constants), so
	// that the edge can log it. Nothing refused is a pass.
	OnFail func(r *http.Request, reason string)
}

// Validate reports every problem of the configuration at once.
func (cfg *Config) Validate() error {
	var errs []error
	if len(cfg.Secret) < MinSecretLen {
		errs = append(errs, fmt.Errorf("challenge: secret is %d bytes, want at least %d", len(cfg.Secret), MinSecretLen))
	}
	if cfg.SigningKey != nil && len(cfg.SigningKey) != ed25519.PrivateKeySize {
		errs = append(errs, errors.New("challenge: signing key is not an Ed25519 private key"))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"pass TTL", cfg.PassTTL}, {"challenge TTL", cfg.ChallengeTTL}, {"wait", cfg.Wait}, {"solve timeout", cfg.SolveTimeout}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("challenge: negative %s %v", d.name, d.v))
		}
	}
	if w := cfg.wait(); w > MaxWait {
		errs = append(errs, fmt.Errorf("challenge: wait %v exceeds %v", w, MaxWait))
	}
	for _, st := range []struct {
		name string
		code int
	}{{"challenge", cfg.ChallengeStatus}, {"deny", cfg.DenyStatus}} {
		if st.code != 0 && !pageStatus(st.code) {
			errs = append(errs, fmt.Errorf("challenge: %s status %d: want 200–299 (not 204 or 205) or 400–599", st.name, st.code))
		}
	}
	if cfg.wait() >= cfg.challengeTTL() {
		errs = append(errs, errors.New("challenge: wait must be shorter than the challenge TTL"))
	}
	if cfg.CacheSize < 0 {
		errs = append(errs, errors.New("challenge: negative cache size"))
	}
	if cfg.Bind&^(BindIPPrefix|BindJA4|BindNone) != 0 {
		errs = append(errs, fmt.Errorf("challenge: unknown binding bits %#x", uint8(cfg.Bind)))
	}
	if cfg.TemplateDir != "" {
		if fi, err := os.Stat(cfg.TemplateDir); err != nil {
			errs = append(errs, fmt.Errorf("challenge: template dir: %w", err))
		} else if !fi.IsDir() {
			errs = append(errs, fmt.Errorf("challenge: template dir %s is not a directory", cfg.TemplateDir))
		}
	}
	return errors.Join(errs...)
}

func (cfg *Config) passTTL() time.Duration { return orDefault(cfg.PassTTL, DefaultPassTTL) }
func (cfg *Config) challengeTTL() time.Duration {
	return orDefault(cfg.ChallengeTTL, DefaultChallengeTTL)
}
func (cfg *Config) wait() time.Duration { return orDefault(cfg.Wait, DefaultWait) }
func (cfg *Config) solveTimeout() time.Duration {
	return orDefault(cfg.SolveTimeout, DefaultSolveTimeout)
}
func (cfg *Config) cacheSize() int {
	if cfg.CacheSize == 0 {
		return DefaultCacheSize
	}
	return cfg.CacheSize
}

func (cfg *Config) challengeStatus() int { return orForbidden(cfg.ChallengeStatus) }
func (cfg *Config) denyStatus() int      { return orForbidden(cfg.DenyStatus) }

func orForbidden(code int) int {
	if code == 0 {
		return http.StatusForbidden
	}
	return code
}

// pageStatus reports whether a page may be sent with code: a success with
// a body, or an error. (A redirect without a Location, 1xx, 204 and 205
// cannot carry a page.)
func pageStatus(code int) bool {
	return (code >= 200 && code <= 299 && code != http.StatusNoContent && code != http.StatusResetContent) ||
		(code >= 400 && code <= 599)
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// Client is what a challenge and a pass are bound to.
type Client struct {
	IP netip.Addr
	// JA4 is the client's TLS fingerprint as a pass binds it: the same
	// for a session's full and resumed handshakes (the edge leaves out
	// what only a resumption sends). Empty when unknown.
	JA4 string
	// Family is the known client (browser or library) whose TLS stack
	// JA4 is, e.g. "chrome"; empty when unknown. A pass earned over one
	// transport (TCP, QUIC: their JA4s always differ) holds over the
	// other only for a stack of the same known family.
	Family string
}

// prefix is the client's /24 (IPv4) or /64 (IPv6) network.
func (cl Client) prefix() netip.Prefix { return clientnet.Prefix(cl.IP) }

// Spec is what the policy asks of a challenge, and what the edge allows
// this client instead.
type Spec struct {
	Algorithm string // "pow" (also "fast", "slow", "") or "metarefresh" (the wait only)
	Bits      int    // leading zero bits; if zero, DefaultBits
	Rule      string // the rule's name, for the log

	// Wait, if positive, offers this client a wait of that length instead
	// of the proof of work: the page's <noscript> part and its fallback for
	// slow devices. The edge offers it only to clients it trusts with it.
	// A wait's pass proves WaitBits: the edge offers it only where Bits is
	// at most that. If zero, no wait is offered: the page says, in the visitor's
	// language, that JavaScript is needed and why. For the metarefresh
	// algorithm it is the wait (if zero, Config.Wait). Whole seconds,
	// rounded up; at most MaxWait and half the challenge TTL.
	Wait time.Duration
}

// Need is what a request must have proven to pass Check: a proof of work of
// Bits or more. A pass earned by waiting stands for WaitBits, and meets a
// need only when Wait is set too (the edge sets it when it would offer
// this client the wait right now).
type Need struct {
	Bits int
	Wait bool
}

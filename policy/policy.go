package policy

import (
	"errors"
	"net/http"
	"net/netip"
	"os"
)

// Errors returned by Parse and Load; the returned errors wrap them.
var (
	// ErrSyntax reports a policy file that is not valid YAML or JSON.
	ErrSyntax = errors.New("policy: syntax error")
	// ErrInvalid reports a policy that parses but does not make sense.
	ErrInvalid = errors.New("policy: invalid policy")
	// ErrImport reports an import that cannot be read.
	ErrImport = errors.New("policy: import failed")
)

// Action is what the edge does with a request.
type Action uint8

// The actions a Decision carries. WEIGH is a rule action only: it never
// decides.
const (
	ALLOW Action = iota
	DENY
	CHALLENGE
	RATE
	WEIGH
)

var actionNames = [...]string{"ALLOW", "DENY", "CHALLENGE", "RATE", "WEIGH"}

// String returns the action's name as it is written in policy files.
func (a Action) String() string {
	if int(a) < len(actionNames) {
		return actionNames[a]
	}
	return "UNKNOWN"
}

func parseAction(s string) (Action, bool) {
	for i, n := range actionNames {
		if n == s {
			return Action(i), true
		}
	}
	return 0, false
}

// Options tune Parse and Load.
type Options struct {
	// ReadFile reads imported files. If nil, os.ReadFile is used.
	ReadFile func(name string) ([]byte, error)
	// Glob expands import patterns. If nil, filepath.Glob is used; a
	// pattern without glob characters is read as is.
	Glob func(pattern string) ([]string, error)
}

func (o Options) readFile(name string) ([]byte, error) {
	if o.ReadFile != nil {
		return o.ReadFile(name)
	}
	return os.ReadFile(name)
}

// Request is what the policy sees of one HTTP request. The edge fills it
// from the connection and the request; Evaluate only reads it.
type Request struct {
	RemoteAddr netip.Addr
	Host       string
	Method     string
	Path       string
	RawQuery   string
	Proto      string // "HTTP/1.1", "HTTP/2.0" or "HTTP/3.0"
	TLS        bool
	Header     http.Header
	// HeaderOrder holds the header names in wire order (HTTP/2 and HTTP/3
	// pseudo-headers included where they stand), or nil when unknown.
	HeaderOrder []string
	JA4         string
	HFP         string
	H2FP        string
	// ClientFamily is the known-client table's family for JA4 ("chrome",
	// "firefox", "safari", "ios", "curl", "go", "python", …); "" when the
	// JA4 is unknown, which fires no signal.
	ClientFamily   string
	ClientVersions string
	// Pass identifies the client's valid pass cookie (for RATE keyed by
	// pass); "" when it has none.
	Pass string
	// CrawlerVerified is the Verifier's answer for a User-Agent that claims
	// a known crawler; CrawlerUnchecked when the edge did not ask.
	CrawlerVerified CrawlerCheck
}

// CrawlerCheck is the outcome of crawler verification.
type CrawlerCheck uint8

// The outcomes of Verifier.Verify.
const (
	// CrawlerUnchecked: no crawler claimed, or no way to verify it.
	CrawlerUnchecked CrawlerCheck = iota
	// CrawlerVerified: the address belongs to the claimed crawler.
	CrawlerVerified
	// CrawlerFailed: the address does not belong to the claimed crawler.
	CrawlerFailed
)

// String names the outcome.
func (c CrawlerCheck) String() string {
	switch c {
	case CrawlerVerified:
		return "verified"
	case CrawlerFailed:
		return "failed"
	}
	return "unchecked"
}

// Challenge says which challenge to serve and how hard.
type Challenge struct {
	// Algorithm is "pow" (proof of work) or "metarefresh".
	Algorithm string
	// Bits is the number of leading zero bits the proof of work needs (also
	// the difficulty a pass cookie records for metarefresh).
	Bits int
}

// RateLimit says which token bucket a RATE decision takes from.
type RateLimit struct {
	// Key names the bucket: "ip:203.0.113.0/24", "ip:2001:db8::/64",
	// "ja4:t13d…" or "pass:…", prefixed by the rule's identity.
	Key string
	// Rate is the refill rate in tokens per second.
	Rate float64
	// Burst is the bucket's size.
	Burst int
}

// maxMatched bounds the rule indexes a Decision records.
const maxMatched = 16

// Decision is the outcome of Evaluate. Its rule and signal lists are held in
// fixed arrays so that reading them does not allocate.
type Decision struct {
	Action    Action
	Weight    int
	Challenge Challenge // when Action is CHALLENGE
	Rate      RateLimit // when Action is RATE
	// Rule is the name of the rule or threshold that decided; "" when
	// nothing matched and the request is allowed by default.
	Rule string
	// RuleID is the stable identity (a content hash) of that rule or
	// threshold; a pass cookie can be bound to it.
	RuleID string
	// Signals are the built-in signals that fired.
	Signals Signals

	p        *Policy
	nMatched int
	matched  [maxMatched]uint16 // indexes into p.rules, in order
}

// Rules yields the names of the rules that matched, in policy order: the
// WEIGH rules, then the rule that decided, if any. A threshold that decided
// is not included (see Rule). At most 16 names are kept.
func (d *Decision) Rules(yield func(string) bool) {
	if d.p == nil {
		return
	}
	for _, i := range d.matched[:d.nMatched] {
		if !yield(d.p.rules[i].name) {
			return
		}
	}
}

// AppendNames appends the names of the matched rules, then the threshold
// that decided (if one did), then the fired signals, to dst: the list the
// fingerprint log's "rules" field holds. It does not allocate when dst has
// room.
func (d *Decision) AppendNames(dst []string) []string {
	for n := range d.Rules {
		dst = append(dst, n)
	}
	if d.p != nil && d.Rule != "" && (d.nMatched == 0 || d.p.rules[d.matched[d.nMatched-1]].name != d.Rule) {
		dst = append(dst, d.Rule)
	}
	for s := range d.Signals.All {
		dst = append(dst, s.String())
	}
	return dst
}

func (d *Decision) addMatched(i int) {
	if d.nMatched < maxMatched {
		d.matched[d.nMatched] = uint16(i)
		d.nMatched++
	}
}

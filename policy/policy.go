package policy

import (
	"errors"
	"net/http"
	"net/netip"
	"os"
	"regexp"
	"slices"
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
// decides. Anubis's DENY_AND_REROUTE decides DENY with Decision.RerouteTo
// set, so that logs and metrics count it as a denial.
const (
	ALLOW Action = iota
	DENY
	CHALLENGE
	RATE
	WEIGH
	// DIVERT proxies the request to the divert: target Decision.DivertTo
	// names (a tarpit such as iocaine or Nepenthes) instead of the site.
	DIVERT
)

var actionNames = [...]string{"ALLOW", "DENY", "CHALLENGE", "RATE", "WEIGH", "DIVERT"}

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
	// Geo says which geo databases the edge has, and so which of
	// Request.ASN, ASOrg and Country it fills. A rule with asns: loads
	// without an ASN database, and a rule with geoip: without a country
	// database, with one warning each naming the missing configuration key,
	// and never matches. The zero value: no databases.
	Geo Geo
	// DivertTargets names the divert: targets of the edge's configuration.
	// When it is not nil, a divert_to: that names none of them is an error
	// naming the rule's file:line; when nil, divert_to: names are not
	// checked (Policy.DivertTargets lists them for the caller to check).
	DivertTargets []string
	// Strict makes an unknown key (a top-level section, a rule's key, a
	// status_codes: key) an error naming its file:line instead of a
	// warning: for CI (edge policy check -strict). Anubis-only sections,
	// which are known and ignored, stay warnings.
	Strict bool
}

// Geo says which geo databases exist (edge.yaml geo:).
type Geo struct {
	// ASN: geo.asn_db is configured; the edge fills Request.ASN and ASOrg.
	ASN bool
	// Country: geo.country_db is configured; the edge fills
	// Request.Country.
	Country bool
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
	// H2Family is the HTTP/2 known-client table's family for the
	// connection's HTTP/2 fingerprint (its SETTINGS, WINDOW_UPDATE and
	// PRIORITY frames: "chrome", "firefox", "curl", "go", …); "" when
	// unknown or not HTTP/2, which fires no signal.
	H2Family string
	// Pass identifies the client's valid pass cookie (for RATE keyed by
	// pass); "" when it has none.
	Pass string
	// CrawlerVerified is the Verifier's answer for a User-Agent that claims
	// a known crawler; CrawlerUnchecked when the edge did not ask.
	CrawlerVerified CrawlerCheck
	// ASN and ASOrg are the client address's autonomous system from the
	// geo ASN database; 0 and "" when unknown or without a database.
	ASN   uint32
	ASOrg string
	// Country is the client address's country from the geo country
	// database, ISO 3166-1 alpha-2 in upper case ("US"); "" when unknown.
	Country string
	// Cluster is the client's cluster key, which the edge computes (a
	// pass cookie's subject, else JA4 + HTTP/2 fingerprint + ASN or
	// /24, /48 for IPv6): CEL's cluster, and RATE's key: cluster. ""
	// when the edge did not compute one; a RATE rule keyed by cluster
	// then counts by address.
	Cluster string
	// Pressure is the site's upstream pressure, 0 (idle) to 1
	// (saturated), which the edge computes from Upstream: CEL's
	// pressure. 0 on an edge without upstream slots.
	Pressure float64
	// Storm is the edge's storm mode: on when Pressure rose above the
	// site's storm threshold, off again only when it fell below the lower
	// one (the hysteresis is the edge's, not the policy's): CEL's storm.
	Storm bool
	// Upstream holds the parts Pressure is made of: CEL's upstream map.
	Upstream UpstreamLoad
	// Load is the system load average over 1, 5 and 15 minutes, which
	// the edge fills (Anubis's load_1m, load_5m and load_15m); zeros
	// when unknown.
	Load [3]float64
	// FCrDNS is what forward-confirmed reverse DNS found for RemoteAddr,
	// which Anubis's verifyFCrDNS and reverseDNS expressions read. The
	// zero value: not looked up; an evaluation that needs it says so
	// (Decision.NeedFCrDNS), and the caller looks it up (Verifier.FCrDNS)
	// and evaluates again.
	FCrDNS FCrDNS
}

// UpstreamLoad is the state of a site's upstream slots, as the edge
// measures it: CEL's upstream map (in_use, capacity, queue, queue_wait_ms,
// p50_ms, p95_ms, all doubles).
type UpstreamLoad struct {
	// InUse is the number of upstream slots (connections) in use;
	// Capacity the number there are (limits.upstream_conns); Queue the
	// number of requests waiting for one.
	InUse, Capacity, Queue int
	// QueueWaitMs is how long requests waited for a slot, in
	// milliseconds, over the last seconds; P50Ms and P95Ms are the
	// upstream's median and 95th-percentile latency over the last
	// seconds.
	QueueWaitMs, P50Ms, P95Ms float64
}

// FCrDNS is the outcome of forward-confirmed reverse DNS (RFC 1912 section
// 2.1) for an address: its PTR names, and whether the address records of
// one of them include the address.
type FCrDNS struct {
	// Checked: the lookups ran.
	Checked bool
	// Failed: the reverse lookup failed for another reason than that the
	// address has no PTR record.
	Failed bool
	// Names are the address's PTR names, without the final dot.
	Names []string
	// Confirmed: the A or AAAA records of one of Names include the address.
	Confirmed bool
}

// verify is Anubis's verifyFCrDNS (internal/dns VerifyFCrDNS): false when
// the reverse lookup failed; with no PTR names, true only without a
// pattern; with a pattern, one name must match it; then one name (any)
// must resolve back to the address.
func (f *FCrDNS) verify(pattern *regexp.Regexp) bool {
	switch {
	case f.Failed:
		return false
	case len(f.Names) == 0:
		return pattern == nil
	case pattern != nil && !slices.ContainsFunc(f.Names, pattern.MatchString):
		return false
	}
	return f.Confirmed
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
	// "ja4:t13d…", "pass:…", "cluster:…", "asn:64496", "hfp:…" or
	// "h2fp:…", prefixed by the rule's identity. A key whose request field
	// is empty (no pass cookie, ASN 0, …) falls back to the address.
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
	// RerouteTo is the absolute URL an Anubis DENY_AND_REROUTE rule sends
	// the client to, with a redirect (Anubis answers 307); Action is DENY.
	// "" for every other decision.
	RerouteTo string
	// DivertTo names the divert: target (edge.yaml) the request is proxied
	// to when Action is DIVERT; "" otherwise.
	DivertTo string
	// NeedFCrDNS reports that evaluation reached an expression that reads
	// forward-confirmed reverse DNS (Anubis's verifyFCrDNS or reverseDNS)
	// while Request.FCrDNS was not checked; those calls answered false (no
	// names). Look the address up (Verifier.FCrDNS) and evaluate again.
	NeedFCrDNS bool
	// BrowserAgrees reports that the User-Agent claims a browser, without a
	// bot token, and that the TLS fingerprint's known-client family is that
	// browser's (Chromium-based: chrome or edge; Firefox: firefox; Safari
	// and iOS: safari or ios), and, on HTTP/2, that the HTTP/2
	// fingerprint's pseudo-header order is that browser's and its family
	// (H2Family), when known, is that browser's too. An unknown JA4
	// (empty ClientFamily) gives false. With Lied and the weight, it decides
	// whether the no-JS wait may be offered (DESIGN.md, "Challenges"):
	//
	//	d.BrowserAgrees && !d.Lied() && d.Weight < p.WaitMaxWeight()
	BrowserAgrees bool
	// Rule is the name of the rule or threshold that decided; "" when
	// nothing matched and the request is allowed by default.
	Rule string
	// RuleID is the stable identity (a content hash) of that rule or
	// threshold; a pass cookie can be bound to it.
	RuleID string
	// Signals are the built-in signals that fired.
	Signals Signals

	p        *Policy
	raw      Signals // the signals that fired, before signals: switched any off
	nMatched int
	matched  [maxMatched]uint16 // indexes into p.rules, in order
}

// lieSignals are the signals that say the client lies about what it is.
const lieSignals = 1<<SignalUATLSMismatch | 1<<SignalFakeCrawler | 1<<SignalHeadless | 1<<SignalTLSHTTPMismatch

// Lied reports whether a lie-detection signal fired: ua_tls_mismatch,
// fake_crawler, headless or tls_http_mismatch. It reads what fired even when the policy's
// signals: section switched the signal off (off removes its weight and
// its rule matches, not the fact), so that a client that lied is never
// offered the no-JS wait.
func (d *Decision) Lied() bool { return d.raw&lieSignals != 0 }

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
// fingerprint log's "rules" field holds; a signal already there by name
// (the rule named for it) is not repeated. It does not allocate when dst
// has room.
func (d *Decision) AppendNames(dst []string) []string {
	start := len(dst)
	for n := range d.Rules {
		dst = append(dst, n)
	}
	if d.p != nil && d.Rule != "" && (d.nMatched == 0 || d.p.rules[d.matched[d.nMatched-1]].name != d.Rule) {
		dst = append(dst, d.Rule)
	}
	named := dst[start:]
	for s := range d.Signals.All {
		// A rule named for its signal (the built-in fake_crawler) says it
		// once: a reader counts names, and one event is one name.
		if n := s.String(); !slices.Contains(named, n) {
			dst = append(dst, n)
		}
	}
	return dst
}

func (d *Decision) addMatched(i int) {
	if d.nMatched < maxMatched {
		d.matched[d.nMatched] = uint16(i)
		d.nMatched++
	}
}

package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/types"
)

// Policy is a compiled policy. It is immutable and safe for concurrent use.
type Policy struct {
	rules      []rule
	thresholds []threshold
	weights    [numSignals]int
	off        Signals
	// signalsAt is the file:line of the signals: section that puts Maat's
	// signals in force (its own, or that of a policy it imports: Maat's
	// default policy, (builtin)/maat-signals.yaml); "" when none does, and
	// fired signals add no weight (an Anubis policy decides as in Anubis).
	signalsAt string
	ua, path  *prefilter
	warnings  []string
	version   string
	geo       Geo
	hosting   asnSet
	status    [2]int // CHALLENGE, DENY; 0: not set
	// waitMax is WaitMaxWeightFor's answer, calm and in a storm.
	waitMax [2]int
	// usesPressure names the rules and thresholds whose expression reads
	// pressure, storm or upstream (UsesPressure).
	usesPressure []string
	// readsLoad: an expression reads load_1m, load_5m or load_15m.
	readsLoad bool
	diverts   []DivertTarget
	// familyBit numbers the client families that client_family: names,
	// so that a rule checks a request's family with one AND; famOverflow
	// is set when more than 64 distinct names leave some without a bit.
	familyBit   map[string]uint8
	famOverflow bool
	early       earlyPlan // for DenyConn (early.go)
	// dnsPatterns are the constant patterns of verifyFCrDNS calls,
	// compiled once.
	dnsPatterns map[string]*regexp.Regexp
}

type rateKey uint8

// The keys a RATE rule counts by (rate: key:). Every key but ip falls
// back to ip for a request that lacks its value (no pass cookie, ASN 0, no
// cluster, no fingerprint).
const (
	rateByIP rateKey = iota
	rateByJA4
	rateByPass
	rateByCluster
	rateByASN
	rateByHFP
	rateByH2FP
)

// rateKeyNames are the names of the rate keys, indexed by rateKey.
var rateKeyNames = [...]string{"ip", "ja4", "pass", "cluster", "asn", "hfp", "h2fp"}

func parseRateKey(s string) (rateKey, bool) {
	if s == "" {
		return rateByIP, true
	}
	i := slices.Index(rateKeyNames[:], s)
	return rateKey(max(i, 0)), i >= 0
}

type rule struct {
	name, id, src string
	action        Action
	adjust        int
	challenge     Challenge
	rateKey       rateKey
	rateKeyPrefix string // "<id>:ip:" and so on
	perSecond     float64
	burst         int

	rerouteTo string // DENY_AND_REROUTE
	divertTo  string // DIVERT

	ua, path      *regexMatcher
	headers       []headerRegex
	addrs         addrSet
	ja4, hfp, h2f fpList
	families      []string // client_family: as written
	famMask       uint64   // the same as bits of Policy.familyBit, when all fit
	signals       Signals  // any of them
	asns          asnSet
	countries     []string
	never         bool // a geo matcher without its database
	expr          cel.Program
}

// headerRegex is one entry of headers_regex, matched as Anubis matches it
// (lib/policy NewHeadersChecker): the regular expression against the
// header's first value, "" when the header is missing, so that an
// expression that matches the empty string matches a missing header;
// ".*" alone (re nil) asks that the header be present and not empty.
type headerRegex struct {
	name string         // canonical
	re   *regexp.Regexp // nil: present and not empty
}

// fpList matches a fingerprint exactly or by prefix ("t13d*").
type fpList struct {
	exact    []string
	prefixes []string
}

func (f *fpList) empty() bool { return len(f.exact)+len(f.prefixes) == 0 }

func (f *fpList) match(v string) bool {
	if v == "" {
		return false
	}
	if slices.Contains(f.exact, v) {
		return true
	}
	for _, p := range f.prefixes {
		if strings.HasPrefix(v, p) {
			return true
		}
	}
	return false
}

func newFPList(vals []string) fpList {
	var f fpList
	for _, v := range vals {
		if p, ok := strings.CutSuffix(v, "*"); ok {
			f.prefixes = append(f.prefixes, p)
		} else {
			f.exact = append(f.exact, v)
		}
	}
	return f
}

// Parse compiles a policy file (YAML or JSON) named name. Errors name
// name:line; they wrap ErrSyntax, ErrInvalid, ErrImport or ErrExpression.
func Parse(name string, data []byte, opts Options) (*Policy, error) {
	pf, err := parseFile(name, data, opts)
	if err != nil {
		return nil, err
	}
	return compile(pf, opts)
}

// Load reads and compiles the policy file at path. A relative import is
// read from the policy file's directory, or else from the working
// directory, as Anubis reads it.
func Load(path string, opts Options) (*Policy, error) {
	data, err := opts.readFile(path)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	return Parse(filepath.Clean(path), data, opts)
}

// Warnings returns the warnings of loading: Anubis-only sections and rules
// that were skipped, unknown keys. The slice must not be modified.
func (p *Policy) Warnings() []string { return p.warnings }

// Version returns a stable hash of the compiled policy: the same rules,
// thresholds and signal weights give the same version on every load and
// every node.
func (p *Policy) Version() string { return p.version }

// RuleInfo describes one compiled rule.
type RuleInfo struct {
	Name   string
	ID     string // stable hash of the rule's content
	Source string // file:line
	Action Action
	// RerouteTo is the URL of a DENY_AND_REROUTE rule; DivertTo the
	// divert: target of a DIVERT rule.
	RerouteTo, DivertTo string
}

// Rules lists the compiled rules in evaluation order.
func (p *Policy) Rules() []RuleInfo {
	out := make([]RuleInfo, len(p.rules))
	for i, r := range p.rules {
		out[i] = RuleInfo{Name: r.name, ID: r.id, Source: r.src, Action: r.action, RerouteTo: r.rerouteTo, DivertTo: r.divertTo}
	}
	return out
}

// DivertTarget is a divert: target a rule or threshold names.
type DivertTarget struct {
	Name   string // the divert_to: value, a key of edge.yaml's divert:
	Source string // file:line of the rule or threshold
}

// DivertTargets lists the divert_to: targets of the policy's DIVERT rules
// and thresholds, in policy order, so that the edge can check each exists
// in its configuration and name the rule's file:line when one does not
// (or pass Options.DivertTargets to Load, which does the same).
func (p *Policy) DivertTargets() []DivertTarget { return p.diverts }

// MaatSignals reports whether Maat's own signals (ua_tls_mismatch,
// browser_headers_missing, proto_mismatch, fake_crawler, headless,
// hosting_asn, …) add their weight under this policy, and says why in a
// sentence for `edge policy check`. A signals: section switches them on:
// the policy's own or that of a policy it imports, such as Maat's default
// policy or (builtin)/maat-signals.yaml, the one line an Anubis policy
// adds to weigh them. Without one, a fired signal adds nothing (rules
// that name it with signal: still see it), so that an Anubis policy
// decides as it does in Anubis.
func (p *Policy) MaatSignals() (on bool, why string) {
	if p.signalsAt != "" {
		return true, "Maat's signals add weight (signals: at " + p.signalsAt + ")"
	}
	return false, "Maat's signals add no weight (no signals: section; `- import: " + builtinPrefix + "maat-signals.yaml` under bots: switches them on)"
}

// StatusCodes returns the HTTP status codes the policy's status_codes:
// section (Anubis's key) sets for challenge and deny pages; 0 for one
// that is not set, which leaves the edge's default (403).
func (p *Policy) StatusCodes() (challenge, deny int) { return p.status[0], p.status[1] }

// WaitMaxWeight returns the weight below which the no-JS wait may be
// offered by default (challenge.wait.max_weight in edge.yaml overrides it):
// the upper bound of the band of weights the lowest CHALLENGE threshold
// decides. For the default policy, whose lowest challenge threshold is
// `weight < 20`, it is 20. It is math.MaxInt when that band has no upper
// bound (Anubis's legacy `weight > 0`), and 0 when no threshold
// challenges. The wait is offered only to a client whose decision has
// BrowserAgrees, not Lied, and Weight < WaitMaxWeight.
//
// It is the bound in a calm site (storm off, pressure 0); under a policy
// whose thresholds read storm or pressure the bound in a storm may differ:
// WaitMaxWeightFor gives the bound for the request's state.
func (p *Policy) WaitMaxWeight() int { return p.waitMax[0] }

// WaitMaxWeightFor is WaitMaxWeight for the site's state in r: the calm
// bound when r.Storm is off, else the bound of a storm (storm on, pressure
// 1, the upstream's slots full), computed from the same thresholds that
// decide, so that a threshold such as `weight >= 5 && storm` lowers the
// no-JS wait's bound exactly when it challenges.
func (p *Policy) WaitMaxWeightFor(r *Request) int {
	if r != nil && r.Storm {
		return p.waitMax[1]
	}
	return p.waitMax[0]
}

// UsesPressure reports whether a rule or threshold expression reads
// pressure, storm or upstream, which only an edge with upstream slots
// (limits.upstream_conns) fills; PressureUsers names them.
func (p *Policy) UsesPressure() bool { return len(p.usesPressure) > 0 }

// PressureUsers names the rules and thresholds, "file:line: rule \"name\"",
// whose expression reads pressure, storm or upstream, for the error of an
// edge that cannot fill them. The slice must not be modified.
func (p *Policy) PressureUsers() []string { return p.usesPressure }

func hashJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// Only NaN and infinite numbers fail to marshal; validation
		// rejects them, so the identity never matters.
		b = []byte(err.Error())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

func compile(pf *parsed, opts Options) (*Policy, error) {
	p := &Policy{ua: newPrefilter(), path: newPrefilter(), warnings: pf.warnings, geo: opts.Geo, familyBit: map[string]uint8{}}
	fts, err := p.applySettings(pf)
	if err != nil {
		return nil, err
	}
	var env *cel.Env
	var errs []error
	for _, fr := range pf.rules {
		if fr.Expression != nil && env == nil {
			if env, err = botEnv(); err != nil {
				return nil, err
			}
		}
		r, err := p.compileRule(fr, env)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: rule %q: %w", fr.src, fr.Name, err))
			continue
		}
		p.rules = append(p.rules, r)
		if r.action == DIVERT {
			p.diverts = append(p.diverts, DivertTarget{Name: r.divertTo, Source: r.src})
		}
	}
	tenv, err := thresholdEnv()
	if err != nil {
		return nil, err
	}
	for _, ft := range fts {
		t, err := p.compileThreshold(ft, tenv)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: threshold %q: %w", ft.src, ft.Name, err))
			continue
		}
		p.thresholds = append(p.thresholds, t)
		if t.action == DIVERT {
			p.diverts = append(p.diverts, DivertTarget{Name: t.divertTo, Source: t.src})
		}
	}
	if opts.DivertTargets != nil {
		for _, d := range p.diverts {
			if !slices.Contains(opts.DivertTargets, d.Name) {
				errs = append(errs, fmt.Errorf("%s: divert_to: %q is not a divert: target of the configuration (targets: %s)", d.Source, d.Name, strings.Join(opts.DivertTargets, ", ")))
			}
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, errors.Join(errs...))
	}
	p.waitMax = [2]int{waitMaxWeight(p.thresholds, &calmRequest), waitMaxWeight(p.thresholds, &stormRequest)}
	p.early = p.planEarly()
	h := sha256.New()
	for _, r := range p.rules {
		h.Write([]byte(r.id))
	}
	for _, t := range p.thresholds {
		h.Write([]byte(t.id))
	}
	fmt.Fprint(h, p.weights, p.off, p.signalsAt != "", p.status, p.hosting)
	p.version = hex.EncodeToString(h.Sum(nil)[:8])
	return p, nil
}

// applySettings merges the sections of the imported policies and of the
// policy itself (which wins) into p, and returns the thresholds to
// compile.
func (p *Policy) applySettings(pf *parsed) ([]*fileThreshold, error) {
	hosting, err := builtinHostingASNs()
	if err != nil {
		return nil, err
	}
	p.weights = defaultSignalWeights
	var fts []*fileThreshold
	for i, s := range append(slices.Clone(pf.imported), pf.root) {
		if p.signalsAt == "" {
			p.signalsAt = s.signalsAt
		}
		for sig, set := range s.signals {
			switch {
			case !set.set:
			case set.off:
				p.off |= 1 << sig
			default:
				p.off &^= 1 << sig
				p.weights[sig] = set.weight
			}
		}
		for k, c := range s.status {
			if c != nil {
				p.status[k] = *c
			}
		}
		if s.hosting != nil {
			hosting = s.hosting.apply(hosting)
		}
		if len(s.thresholds) == 0 {
			continue
		}
		if fts != nil && i < len(pf.imported) {
			p.warnings = append(p.warnings, fmt.Sprintf("%s: thresholds of a second imported policy ignored; the first imported policy's apply", s.thresholds[0].src))
			continue
		}
		fts = s.thresholds
	}
	p.hosting = newASNSet(hosting)
	if fts == nil {
		// Anubis's default thresholds (also for thresholds: []): any
		// weight above zero is challenged.
		fts = []*fileThreshold{{Name: "legacy-anubis-behaviour", Expression: &exprOrList{Expr: "weight > 0"},
			Action: "CHALLENGE", Challenge: &fileChallenge{Algorithm: "fast", Difficulty: defaultDifficulty}, src: "(default)"}}
	}
	return fts, nil
}

func (p *Policy) compileRule(fr *fileRule, env *cel.Env) (rule, error) {
	r := rule{name: fr.Name, src: fr.src, id: hashJSON(fr)}
	var errs []error
	if fr.Name == "" {
		errs = append(errs, errors.New("name: is required"))
	}
	a, err := p.ruleAction(&r, fr)
	if err != nil {
		errs = append(errs, err)
	}
	r.action = a
	n, err := p.compileMatchers(&r, fr, env)
	if err != nil {
		errs = append(errs, err)
	}
	if n == 0 {
		errs = append(errs, errors.New("no matcher: set user_agent_regex, path_regex, headers_regex, remote_addresses, expression, ja4, hfp, h2fp, client_family, signal, asns or geoip"))
	}
	switch a {
	case WEIGH:
		r.adjust = 5 // Anubis's default
		if fr.Weight != nil {
			r.adjust = fr.Weight.Adjust
		}
	case CHALLENGE:
		c, err := p.challenge(fr.Challenge, fr.src)
		if err != nil {
			errs = append(errs, err)
		}
		r.challenge = c
	case RATE:
		if err := r.setRate(fr.Rate); err != nil {
			errs = append(errs, err)
		}
	}
	return r, errors.Join(errs...)
}

// ruleAction reads a rule's action, with Anubis's DENY_AND_REROUTE (a DENY
// that redirects to reroute_to) and Maat's DIVERT (divert_to).
func (p *Policy) ruleAction(r *rule, fr *fileRule) (Action, error) {
	if fr.Action == actionDenyAndReroute {
		if fr.RerouteTo == nil || *fr.RerouteTo == "" {
			return DENY, errors.New("action DENY_AND_REROUTE needs reroute_to: an absolute URL")
		}
		u, err := url.Parse(*fr.RerouteTo)
		if err != nil || !u.IsAbs() || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return DENY, fmt.Errorf("reroute_to: %q is not an absolute http:// or https:// URL", *fr.RerouteTo)
		}
		r.rerouteTo = *fr.RerouteTo
		return DENY, nil
	}
	a, ok := parseAction(fr.Action)
	if !ok {
		return a, fmt.Errorf("unknown action %q (ALLOW, DENY, CHALLENGE, WEIGH, RATE, DIVERT, DENY_AND_REROUTE)", fr.Action)
	}
	return a, setDivert(&r.divertTo, a, fr.DivertTo)
}

// setDivert checks divert_to: against the action.
func setDivert(dst *string, a Action, name string) error {
	switch {
	case a == DIVERT && name == "":
		return errors.New("action DIVERT needs divert_to: the name of a divert: target in edge.yaml")
	case a != DIVERT && name != "":
		return fmt.Errorf("divert_to: is used only with action DIVERT, not %s", a)
	case strings.ContainsAny(name, " \t\n/:"):
		return fmt.Errorf("divert_to: %q is not a target name", name)
	}
	*dst = name
	return nil
}

// compileMatchers compiles the matchers of fr into r and returns how many
// there are.
func (p *Policy) compileMatchers(r *rule, fr *fileRule, env *cel.Env) (int, error) {
	var errs []error
	n := 0
	if fr.UserAgentRegex != nil {
		n++
		m, err := p.ua.compile(strings.TrimSpace(*fr.UserAgentRegex)) // as Anubis compiles it
		if err != nil {
			errs = append(errs, fmt.Errorf("user_agent_regex: %w", err))
		}
		r.ua = m
	}
	if fr.PathRegex != nil {
		n++
		m, err := p.path.compile(strings.TrimSpace(*fr.PathRegex))
		if err != nil {
			errs = append(errs, fmt.Errorf("path_regex: %w", err))
		}
		r.path = m
	}
	keys := make([]string, 0, len(fr.HeadersRegex))
	for k := range fr.HeadersRegex {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		n++
		name := strings.TrimSpace(k)
		if name == "" {
			errs = append(errs, errors.New("headers_regex: a header name is empty"))
			continue
		}
		h := headerRegex{name: canonicalHeader(name)}
		if expr := fr.HeadersRegex[k]; expr != ".*" {
			re, err := regexp.Compile(strings.TrimSpace(expr))
			if err != nil {
				errs = append(errs, fmt.Errorf("headers_regex %s: %w", k, err))
				continue
			}
			h.re = re
		}
		r.headers = append(r.headers, h)
	}
	var prefixes []netip.Prefix
	for _, s := range fr.RemoteAddresses {
		n++
		pfx, err := parsePrefix(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("remote_addresses: %w", err))
			continue
		}
		prefixes = append(prefixes, pfx)
	}
	r.addrs = newAddrSet(prefixes)
	r.ja4, r.hfp, r.h2f = newFPList(fr.JA4), newFPList(fr.HFP), newFPList(fr.H2FP)
	r.families = fr.ClientFamily
	for _, f := range fr.ClientFamily {
		b, ok := p.familyBit[f]
		if !ok {
			if len(p.familyBit) == 64 {
				p.famOverflow = true
				continue
			}
			b = uint8(len(p.familyBit))
			p.familyBit[f] = b
		}
		r.famMask |= 1 << b
	}
	n += len(fr.JA4) + len(fr.HFP) + len(fr.H2FP) + len(fr.ClientFamily)
	for _, s := range fr.Signal {
		n++
		sig, ok := parseSignal(s)
		if !ok {
			errs = append(errs, fmt.Errorf("unknown signal %q (known: %s)", s, strings.Join(signalNames[:], ", ")))
			continue
		}
		r.signals |= 1 << sig
	}
	g, err := p.compileGeo(r, fr)
	n += g
	if err != nil {
		errs = append(errs, err)
	}
	if fr.Expression != nil {
		n++
		if err := p.compileExpr(r, fr, env); err != nil {
			errs = append(errs, fmt.Errorf("expression: %w", err))
		}
	}
	return n, errors.Join(errs...)
}

// compileExpr compiles a rule's CEL expression, and warns when it reads
// asn or country without the database that fills them.
func (p *Policy) compileExpr(r *rule, fr *fileRule, env *cel.Env) error {
	src, err := fr.Expression.source()
	if err != nil {
		return err
	}
	a, prg, err := compileBoolAST(env, src)
	if err != nil {
		return err
	}
	r.expr = prg
	if err := p.checkDNSCalls(a.NativeRep().Expr()); err != nil {
		return err
	}
	facts, err := checkLoadRefs(a)
	if err != nil {
		return err
	}
	if facts.pressure {
		p.usesPressure = append(p.usesPressure, fmt.Sprintf("%s: rule %q", fr.src, fr.Name))
	}
	p.readsLoad = p.readsLoad || facts.load
	seen := map[string]bool{}
	for _, ref := range a.NativeRep().ReferenceMap() {
		seen[ref.Name] = true
	}
	if seen["asn"] && !p.geo.ASN {
		p.warnings = append(p.warnings, fmt.Sprintf("%s: rule %q: expression reads asn, which is always 0 without an ASN database (geo.asn_db in edge.yaml)", fr.src, fr.Name))
	}
	if seen["country"] && !p.geo.Country {
		p.warnings = append(p.warnings, fmt.Sprintf("%s: rule %q: expression reads country, which is always \"\" without a country database (geo.country_db in edge.yaml)", fr.src, fr.Name))
	}
	return nil
}

// checkDNSCalls checks the calls of Anubis's DNS functions in e: Maat
// answers verifyFCrDNS and reverseDNS for the request's own address, which
// the edge looks up (Request.FCrDNS), so their first argument must be
// remoteAddress; a constant pattern of verifyFCrDNS must compile, and is
// compiled once.
func (p *Policy) checkDNSCalls(e ast.Expr) error {
	var errs []error
	ast.PostOrderVisit(e, ast.NewExprVisitor(func(e ast.Expr) {
		if e.Kind() != ast.CallKind {
			return
		}
		c := e.AsCall()
		fn := c.FunctionName()
		if fn != fnVerifyFCrDNS && fn != fnReverseDNS {
			return
		}
		args := c.Args()
		if len(args) == 0 || !isIdent(args[0], "remoteAddress") {
			errs = append(errs, fmt.Errorf("%s: the first argument must be remoteAddress: Maat looks up the address of the request, not others", fn))
			return
		}
		if fn != fnVerifyFCrDNS || len(args) < 2 || args[1].Kind() != ast.LiteralKind {
			return
		}
		pat, ok := args[1].AsLiteral().(types.String)
		if !ok {
			return
		}
		re, err := regexp.Compile(string(pat))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: pattern %q: %w", fn, string(pat), err))
			return
		}
		if p.dnsPatterns == nil {
			p.dnsPatterns = map[string]*regexp.Regexp{}
		}
		p.dnsPatterns[string(pat)] = re
	}))
	return errors.Join(errs...)
}

// parsePrefix reads a CIDR prefix or a single address.
func parsePrefix(s string) (netip.Prefix, error) {
	pfx, err := netip.ParsePrefix(s)
	if err != nil {
		addr, err2 := netip.ParseAddr(s)
		if err2 != nil {
			return netip.Prefix{}, err
		}
		pfx = netip.PrefixFrom(addr, addr.BitLen())
	}
	return pfx.Masked(), nil
}

// Challenge difficulty. A policy file writes Anubis's difficulty: the
// number of leading hexadecimal zeros its proof of work asks for, 0 to 64
// (github.com/TecharoHQ/anubis lib/config ChallengeRules). Maat's proof of
// work counts leading zero bits, so difficulty N is 4·N bits, derived and
// never the other way round; bits: N (Maat's) says the bits directly.
const (
	// maxDifficulty is Anubis's upper bound of difficulty.
	maxDifficulty = 64
	// bitsPerDifficulty: one hexadecimal zero is four zero bits.
	bitsPerDifficulty = 4
	// defaultDifficulty is Anubis's (anubis.DefaultDifficulty): the
	// difficulty of a CHALLENGE rule without a challenge: block and of the
	// default threshold.
	defaultDifficulty = 4
)

// challenge reads a challenge block as Anubis reads it: algorithm fast,
// slow (proof of work; Maat's pow is the same), metarefresh or preact,
// and difficulty 0 to 64, read as 4·difficulty bits (or Maat's bits). A
// block without difficulty asks for difficulty 0, as in Anubis; a rule
// without a block asks for Anubis's default, difficulty 4.
func (p *Policy) challenge(fc *fileChallenge, src string) (Challenge, error) {
	c := Challenge{Algorithm: "pow", Bits: bitsPerDifficulty * defaultDifficulty}
	if fc == nil {
		return c, nil
	}
	var errs []error
	switch fc.Algorithm {
	case "fast", "slow", "pow":
	case "metarefresh":
		c.Algorithm = "metarefresh"
	case "preact":
		p.warnings = append(p.warnings, src+": challenge algorithm preact (Anubis's \"proof of React\") is served as proof of work")
	case "":
		if fc.Bits == 0 { // Maat's bits: implies the proof of work
			errs = append(errs, errors.New("challenge: algorithm: is required (fast, slow, metarefresh, preact), as in Anubis"))
		}
	default:
		errs = append(errs, fmt.Errorf("unknown challenge algorithm %q (fast, slow, pow, metarefresh, preact)", fc.Algorithm))
	}
	switch {
	case fc.Bits != 0 && fc.Difficulty != 0:
		errs = append(errs, errors.New("challenge: set bits or difficulty, not both"))
	case fc.Bits < 0 || fc.Bits > maxDifficulty:
		errs = append(errs, fmt.Errorf("challenge: bits: %d is out of range 0..%d", fc.Bits, maxDifficulty))
	case fc.Bits != 0:
		c.Bits = fc.Bits
	case fc.Difficulty < 0 || fc.Difficulty > maxDifficulty:
		errs = append(errs, fmt.Errorf("challenge: difficulty: %d is out of range 0..%d (leading hexadecimal zeros, as in Anubis)", fc.Difficulty, maxDifficulty))
	default:
		c.Bits = bitsPerDifficulty * fc.Difficulty
	}
	return c, errors.Join(errs...)
}

func (r *rule) setRate(fr *fileRate) error {
	if fr == nil {
		return errors.New("action RATE needs rate: {key, per_second, burst}")
	}
	k, ok := parseRateKey(fr.Key)
	if !ok {
		return fmt.Errorf("rate key %q: want one of %s (a key whose value a request lacks counts by ip)", fr.Key, strings.Join(rateKeyNames[:], ", "))
	}
	r.rateKey = k
	if !(fr.PerSecond > 0 && fr.PerSecond <= 1e6) { // NaN fails too
		return fmt.Errorf("rate per_second %v: want more than 0 and at most 1e6", fr.PerSecond)
	}
	r.perSecond = fr.PerSecond
	r.burst = fr.Burst
	if r.burst < 1 {
		r.burst = 1
	}
	r.rateKeyPrefix = r.id + ":"
	return nil
}

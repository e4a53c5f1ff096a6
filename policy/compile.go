package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"cel.dev/cel-go/cel"
)

// Policy is a compiled policy. It is immutable and safe for concurrent use.
type Policy struct {
	rules      []rule
	thresholds []threshold
	weights    [numSignals]int
	off        Signals
	ua, path   *prefilter
	warnings   []string
	version    string
}

type rateKey uint8

const (
	rateByIP rateKey = iota
	rateByJA4
	rateByPass
)

type rule struct {
	name, id, src string
	action        Action
	adjust        int
	challenge     Challenge
	rateKey       rateKey
	rateKeyPrefix string // "<id>:ip:" and so on
	perSecond     float64
	burst         int

	ua, path      *regexMatcher
	headers       []headerRegex
	addrs         addrSet
	ja4, hfp, h2f fpList
	families      []string
	signals       Signals // any of them
	expr          cel.Program
}

type headerRegex struct {
	name string // canonical
	re   *regexp.Regexp
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

type threshold struct {
	name, id, src string
	pred          *weightPred // nil: use prg
	prg           cel.Program
	action        Action
	challenge     Challenge
}

// Parse compiles a policy file (YAML or JSON) named name. Errors name
// name:line; they wrap ErrSyntax, ErrInvalid, ErrImport or ErrExpression.
func Parse(name string, data []byte, opts Options) (*Policy, error) {
	pf, err := parseFile(name, data, opts)
	if err != nil {
		return nil, err
	}
	return compile(pf)
}

// Load reads and compiles the policy file at path; imports are read
// relative to its directory.
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
}

// Rules lists the compiled rules in evaluation order.
func (p *Policy) Rules() []RuleInfo {
	out := make([]RuleInfo, len(p.rules))
	for i, r := range p.rules {
		out[i] = RuleInfo{Name: r.name, ID: r.id, Source: r.src, Action: r.action}
	}
	return out
}

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

func compile(pf *parsed) (*Policy, error) {
	p := &Policy{weights: pf.signals, off: pf.signalOff, ua: newPrefilter(), path: newPrefilter(), warnings: pf.warnings}
	var env *cel.Env
	var errs []error
	for _, fr := range pf.rules {
		if fr.Expression != nil && env == nil {
			var err error
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
	}
	fts := pf.thresholds
	if !pf.hasThresh {
		// Anubis's legacy behaviour: any weight above zero is challenged.
		fts = []*fileThreshold{{Name: "legacy-anubis-behaviour", Expression: &exprOrList{Expr: "weight > 0"},
			Action: "CHALLENGE", Challenge: &fileChallenge{Algorithm: "fast", Difficulty: 4}, src: "(default)"}}
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
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, errors.Join(errs...))
	}
	h := sha256.New()
	for _, r := range p.rules {
		h.Write([]byte(r.id))
	}
	for _, t := range p.thresholds {
		h.Write([]byte(t.id))
	}
	fmt.Fprint(h, p.weights, p.off)
	p.version = hex.EncodeToString(h.Sum(nil)[:8])
	return p, nil
}

func (p *Policy) compileRule(fr *fileRule, env *cel.Env) (rule, error) {
	r := rule{name: fr.Name, src: fr.src, id: hashJSON(fr)}
	var errs []error
	if fr.Name == "" {
		errs = append(errs, errors.New("name: is required"))
	}
	a, ok := parseAction(fr.Action)
	if !ok {
		errs = append(errs, fmt.Errorf("unknown action %q (ALLOW, DENY, CHALLENGE, WEIGH, RATE)", fr.Action))
	}
	r.action = a
	n, err := p.compileMatchers(&r, fr, env)
	if err != nil {
		errs = append(errs, err)
	}
	if n == 0 {
		errs = append(errs, errors.New("no matcher: set user_agent_regex, path_regex, headers_regex, remote_addresses, expression, ja4, hfp, h2fp, client_family or signal"))
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

// compileMatchers compiles the matchers of fr into r and returns how many
// there are.
func (p *Policy) compileMatchers(r *rule, fr *fileRule, env *cel.Env) (int, error) {
	var errs []error
	n := 0
	if fr.UserAgentRegex != nil {
		n++
		m, err := p.ua.compile(trimRegex(*fr.UserAgentRegex))
		if err != nil {
			errs = append(errs, fmt.Errorf("user_agent_regex: %w", err))
		}
		r.ua = m
	}
	if fr.PathRegex != nil {
		n++
		m, err := p.path.compile(trimRegex(*fr.PathRegex))
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
		re, err := regexp.Compile(trimRegex(fr.HeadersRegex[k]))
		if err != nil {
			errs = append(errs, fmt.Errorf("headers_regex %s: %w", k, err))
			continue
		}
		r.headers = append(r.headers, headerRegex{name: canonicalHeader(k), re: re})
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
	if fr.Expression != nil {
		n++
		src, err := fr.Expression.source()
		if err == nil {
			r.expr, err = compileBool(env, src)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("expression: %w", err))
		}
	}
	return n, errors.Join(errs...)
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

// trimRegex drops the trailing newline a YAML ">" block leaves, which
// Anubis rejects with advice; here it is simply removed.
func trimRegex(s string) string { return strings.TrimRight(s, "\n") }

// challenge reads a challenge block: algorithm fast, slow or pow (proof of
// work) or metarefresh; bits, or Anubis's difficulty read as 4·difficulty
// bits. The default is Anubis's: fast, difficulty 4.
func (p *Policy) challenge(fc *fileChallenge, src string) (Challenge, error) {
	c := Challenge{Algorithm: "pow", Bits: 16}
	if fc == nil {
		return c, nil
	}
	switch fc.Algorithm {
	case "", "fast", "slow", "pow":
	case "metarefresh":
		c.Algorithm = "metarefresh"
	case "preact":
		p.warnings = append(p.warnings, src+": challenge algorithm preact is served as proof of work")
	default:
		return c, fmt.Errorf("unknown challenge algorithm %q (fast, slow, pow, metarefresh, preact)", fc.Algorithm)
	}
	switch {
	case fc.Bits != 0 && fc.Difficulty != 0:
		return c, errors.New("challenge: set bits or difficulty, not both")
	case fc.Bits != 0:
		c.Bits = fc.Bits
	case fc.Difficulty != 0:
		c.Bits = 4 * fc.Difficulty
	}
	if c.Bits < 1 || c.Bits > 64 {
		return c, fmt.Errorf("challenge: %d bits is out of range 1..64 (difficulty 1..16)", c.Bits)
	}
	return c, nil
}

func (r *rule) setRate(fr *fileRate) error {
	if fr == nil {
		return errors.New("action RATE needs rate: {key, per_second, burst}")
	}
	switch fr.Key {
	case "", "ip":
		r.rateKey = rateByIP
	case "ja4":
		r.rateKey = rateByJA4
	case "pass":
		r.rateKey = rateByPass
	default:
		return fmt.Errorf("rate key %q: want ip, ja4 or pass", fr.Key)
	}
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

func (p *Policy) compileThreshold(ft *fileThreshold, env *cel.Env) (threshold, error) {
	t := threshold{name: ft.Name, src: ft.src, id: hashJSON(ft)}
	var errs []error
	if ft.Name == "" {
		errs = append(errs, errors.New("name: is required"))
	}
	a, ok := parseAction(ft.Action)
	if !ok || a == WEIGH || a == RATE {
		errs = append(errs, fmt.Errorf("action %q: want ALLOW, DENY or CHALLENGE", ft.Action))
	}
	t.action = a
	if a == CHALLENGE {
		c, err := p.challenge(ft.Challenge, ft.src)
		if err != nil {
			errs = append(errs, err)
		}
		t.challenge = c
	}
	switch {
	case ft.Expression != nil && (ft.Min != nil || ft.Max != nil):
		errs = append(errs, errors.New("set expression or min/max, not both"))
	case ft.Expression != nil:
		src, err := ft.Expression.source()
		if err != nil {
			errs = append(errs, err)
			break
		}
		a, prg, err := compileBoolAST(env, src)
		if err != nil {
			errs = append(errs, err)
			break
		}
		if pred, ok := reduceWeight(a.NativeRep().Expr()); ok {
			t.pred = pred
		} else {
			t.prg = prg
		}
	default:
		t.pred = &weightPred{op: "true"}
		if ft.Min != nil {
			t.pred = &weightPred{op: "_>=_", k: int64(*ft.Min)}
		}
		if ft.Max != nil {
			lt := &weightPred{op: "_<_", k: int64(*ft.Max)}
			t.pred = &weightPred{op: "_&&_", l: t.pred, r: lt}
		}
	}
	return t, errors.Join(errs...)
}

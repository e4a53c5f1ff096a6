package policy

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The file format. Every struct mirrors a YAML mapping; positions are kept
// so that errors name file:line.

type fileRule struct {
	Name            string            `yaml:"name" json:"name"`
	Action          string            `yaml:"action" json:"action"`
	UserAgentRegex  *string           `yaml:"user_agent_regex,omitempty" json:"user_agent_regex,omitempty"`
	PathRegex       *string           `yaml:"path_regex,omitempty" json:"path_regex,omitempty"`
	HeadersRegex    map[string]string `yaml:"headers_regex,omitempty" json:"headers_regex,omitempty"`
	RemoteAddresses []string          `yaml:"remote_addresses,omitempty" json:"remote_addresses,omitempty"`
	Expression      *exprOrList       `yaml:"expression,omitempty" json:"expression,omitempty"`
	JA4             stringList        `yaml:"ja4,omitempty" json:"ja4,omitempty"`
	HFP             stringList        `yaml:"hfp,omitempty" json:"hfp,omitempty"`
	H2FP            stringList        `yaml:"h2fp,omitempty" json:"h2fp,omitempty"`
	ClientFamily    stringList        `yaml:"client_family,omitempty" json:"client_family,omitempty"`
	Signal          stringList        `yaml:"signal,omitempty" json:"signal,omitempty"`
	Challenge       *fileChallenge    `yaml:"challenge,omitempty" json:"challenge,omitempty"`
	Weight          *fileWeight       `yaml:"weight,omitempty" json:"weight,omitempty"`
	Rate            *fileRate         `yaml:"rate,omitempty" json:"rate,omitempty"`
	ASNs            *fileASNs         `yaml:"asns,omitempty" json:"asns,omitempty"`
	GeoIP           *fileGeoIP        `yaml:"geoip,omitempty" json:"geoip,omitempty"`
	RerouteTo       *string           `yaml:"reroute_to,omitempty" json:"reroute_to,omitempty"`
	DivertTo        string            `yaml:"divert_to,omitempty" json:"divert_to,omitempty"`

	src string // file:line
}

type fileChallenge struct {
	Algorithm  string `yaml:"algorithm,omitempty" json:"algorithm,omitempty"`
	Difficulty int    `yaml:"difficulty,omitempty" json:"difficulty,omitempty"`
	Bits       int    `yaml:"bits,omitempty" json:"bits,omitempty"`
	ReportAs   int    `yaml:"report_as,omitempty" json:"-"`
}

type fileWeight struct {
	Adjust int `yaml:"adjust" json:"adjust"`
}

type fileRate struct {
	Key       string  `yaml:"key,omitempty" json:"key"`
	PerSecond float64 `yaml:"per_second,omitempty" json:"per_second"`
	Burst     int     `yaml:"burst,omitempty" json:"burst"`
}

type fileThreshold struct {
	Name       string         `yaml:"name" json:"name"`
	Expression *exprOrList    `yaml:"expression" json:"expression,omitempty"`
	Min        *int           `yaml:"min" json:"min,omitempty"`
	Max        *int           `yaml:"max" json:"max,omitempty"`
	Action     string         `yaml:"action" json:"action"`
	Challenge  *fileChallenge `yaml:"challenge" json:"challenge,omitempty"`
	DivertTo   string         `yaml:"divert_to,omitempty" json:"divert_to,omitempty"`

	src string
}

// exprOrList is a CEL expression, or all: / any: lists of them, as Anubis
// writes them.
type exprOrList struct {
	Expr string   `json:"expr,omitempty"`
	All  []string `json:"all,omitempty"`
	Any  []string `json:"any,omitempty"`
}

func (e *exprOrList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		return n.Decode(&e.Expr)
	}
	var v struct {
		All []string `yaml:"all"`
		Any []string `yaml:"any"`
	}
	if err := n.Decode(&v); err != nil {
		return err
	}
	e.All, e.Any = v.All, v.Any
	return nil
}

// MarshalYAML writes the expression as it is read: a string, or all: /
// any: lists.
func (e exprOrList) MarshalYAML() (any, error) {
	if e.Expr != "" {
		return e.Expr, nil
	}
	return struct {
		All []string `yaml:"all,omitempty"`
		Any []string `yaml:"any,omitempty"`
	}{e.All, e.Any}, nil
}

// source returns the expression as one CEL expression.
func (e *exprOrList) source() (string, error) {
	switch {
	case e.Expr != "" && len(e.All)+len(e.Any) == 0:
		return e.Expr, nil
	case len(e.All) > 0 && len(e.Any) == 0 && e.Expr == "":
		return joinExprs(e.All, " && "), nil
	case len(e.Any) > 0 && len(e.All) == 0 && e.Expr == "":
		return joinExprs(e.Any, " || "), nil
	case e.Expr == "" && len(e.All)+len(e.Any) == 0:
		return "", errors.New("expression is empty")
	}
	return "", errors.New("expression has more than one of all:, any: and a string")
}

func joinExprs(es []string, op string) string {
	var b strings.Builder
	for i, e := range es {
		if i > 0 {
			b.WriteString(op)
		}
		b.WriteString("(" + e + ")")
	}
	return b.String()
}

// stringList is a string or a list of strings.
type stringList []string

func (s *stringList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		var v string
		if err := n.Decode(&v); err != nil {
			return err
		}
		*s = stringList{v}
		return nil
	}
	var v []string
	if err := n.Decode(&v); err != nil {
		return err
	}
	*s = v
	return nil
}

// parsed is a policy file after reading and imports, before compiling.
type parsed struct {
	rules    []*fileRule
	root     settings   // the policy file's own sections
	imported []settings // those of imported policy files, in import order
	warnings []string
}

// settings are the sections of a policy file besides bots:. The root
// file's settings win over those of the policies it imports (import:
// (builtin)/default.yaml to extend the default policy).
type settings struct {
	thresholds []*fileThreshold // empty: not set (Anubis: the default thresholds)
	signals    [numSignals]signalSetting
	signalsAt  string  // file:line of a signals: section; "" when there is none
	status     [2]*int // CHALLENGE, DENY; nil: not set
	hosting    *hostingEdit
}

type signalSetting struct {
	set, off bool
	weight   int
}

var ruleKeys = map[string]bool{
	"name": true, "action": true, "user_agent_regex": true, "path_regex": true,
	"headers_regex": true, "remote_addresses": true, "expression": true,
	"ja4": true, "hfp": true, "h2fp": true, "client_family": true, "signal": true,
	"challenge": true, "weight": true, "rate": true, "import": true,
	"asns": true, "geoip": true, "reroute_to": true, "divert_to": true,
}

// maxImportDepth bounds nested imports.
const maxImportDepth = 8

// maxRules bounds the rules of one policy (Decision keeps 16-bit indexes).
const maxRules = 1 << 16

type loader struct {
	opts     Options
	p        *parsed
	visiting map[string]bool
	unknown  []error // the unknown keys, with Options.Strict
}

func parseFile(name string, data []byte, opts Options) (*parsed, error) {
	l := &loader{opts: opts, p: &parsed{}, visiting: map[string]bool{name: true}}
	root, err := decodeRoot(name, data)
	if err != nil {
		return nil, err
	}
	if err := errors.Join(append([]error{l.top(name, root)}, l.unknown...)...); err != nil {
		return nil, err
	}
	return l.p, nil
}

func decodeRoot(name string, data []byte) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrSyntax, yamlErrorAt(name, err, data))
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, fmt.Errorf("%w: %s: empty file", ErrInvalid, name)
	}
	return doc.Content[0], nil
}

var yamlLine = regexp.MustCompile(`^yaml: (?:unmarshal errors:\n\s*)?line (\d+): (.*)`)

// yamlErrorAt rewrites yaml's "yaml: line N: msg" as "name:N: msg". yaml's
// syntax errors name the line of the enclosing construct, or none; when data
// is given, the line is found by bisecting for the shortest prefix of lines
// that fails the same way.
func yamlErrorAt(name string, err error, data []byte) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := ""
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, msg = m[1], m[2]
	}
	if data != nil {
		if n := failingLine(data, msg); n > 0 {
			line = strconv.Itoa(n)
		}
	}
	if line == "" {
		return name + ": " + msg
	}
	return name + ":" + line + ": " + msg
}

// failingLine returns the first line at which a prefix of data fails to
// parse with the message msg, or 0.
func failingLine(data []byte, msg string) int {
	lines := strings.SplitAfter(string(data), "\n")
	fails := func(n int) bool {
		var v yaml.Node
		err := yaml.Unmarshal([]byte(strings.Join(lines[:n], "")), &v)
		if err == nil {
			return false
		}
		m := strings.TrimPrefix(err.Error(), "yaml: ")
		if sub := yamlLine.FindStringSubmatch(err.Error()); sub != nil {
			m = sub[2]
		}
		return m == msg
	}
	lo, hi := 1, len(lines)
	if !fails(hi) {
		return 0
	}
	for lo < hi {
		mid := (lo + hi) / 2
		if fails(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

func at(name string, n *yaml.Node) string { return name + ":" + strconv.Itoa(n.Line) }

func (l *loader) warn(format string, args ...any) {
	l.p.warnings = append(l.p.warnings, fmt.Sprintf(format, args...))
}

// unknownKey reports a key the format does not know, where it stands: a
// warning that it is ignored, or with Options.Strict an error. hint, if
// not empty, lists the known keys.
func (l *loader) unknownKey(where, what, hint string) {
	if l.opts.Strict {
		l.unknown = append(l.unknown, fmt.Errorf("%w: %s: %s%s", ErrInvalid, where, what, hint))
		return
	}
	l.warn("%s: %s ignored%s", where, what, hint)
}

// top reads the policy file itself. Its bots: list must not be empty, as
// Anubis requires ("must define at least one (1) bot rule"); the rules its
// imports bring may be none (an import of an empty list), as in Anubis.
func (l *loader) top(name string, root *yaml.Node) error {
	if root.Kind == yaml.SequenceNode {
		return l.rootBots(name, root)
	}
	if root.Kind != yaml.MappingNode {
		return fmt.Errorf("%w: %s: a policy is a mapping with a bots: key", ErrInvalid, at(name, root))
	}
	var errs []error
	haveBots := false
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Value == "bots" {
			haveBots = true
			errs = append(errs, l.rootBots(name, v))
			continue
		}
		errs = append(errs, l.section(name, k, v, &l.p.root))
	}
	if !haveBots {
		errs = append(errs, fmt.Errorf("%w: %s: no bots: section", ErrInvalid, at(name, root)))
	}
	return errors.Join(errs...)
}

// rootBots reads the policy file's own list of rules, which must not be
// empty.
func (l *loader) rootBots(name string, seq *yaml.Node) error {
	if seq.Kind == yaml.SequenceNode && len(seq.Content) == 0 || seq.Kind == yaml.ScalarNode && seq.Tag == "!!null" {
		return fmt.Errorf("%w: %s: bots: has no rules; a policy needs at least one (as in Anubis)", ErrInvalid, at(name, seq))
	}
	return l.bots(name, seq, 0)
}

// section reads one top-level section other than bots: into s.
func (l *loader) section(name string, k, v *yaml.Node, s *settings) error {
	switch k.Value {
	case "thresholds":
		return l.thresholds(name, v, s)
	case "signals":
		s.signalsAt = at(name, k)
		return l.signals(name, v, s)
	case "status_codes":
		return l.statusCodes(name, v, s)
	case "hosting_asns":
		return l.hostingASNs(name, v, s)
	}
	if why, ok := anubisOnly[k.Value]; ok {
		if err := anubisSection(name, k.Value, v); err != nil {
			return err
		}
		if !anubisSectionInert(k.Value, v) {
			l.warn("%s: %s: Anubis-only section ignored: %s", at(name, k), k.Value, why)
		}
		return nil
	}
	l.unknownKey(at(name, k), fmt.Sprintf("unknown section %q", k.Value), "")
	return nil
}

func (l *loader) bots(name string, seq *yaml.Node, depth int) error {
	if seq.Kind != yaml.SequenceNode {
		return fmt.Errorf("%w: %s: bots: must be a list of rules", ErrInvalid, at(name, seq))
	}
	var errs []error
	for _, n := range seq.Content {
		if err := l.rule(name, n, depth); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (l *loader) rule(name string, n *yaml.Node, depth int) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("%w: %s: a rule must be a mapping", ErrInvalid, at(name, n))
	}
	var imp *yaml.Node
	ruleName := ""
	haveAddrs, dynamic := false, false
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i].Value
		switch {
		case k == "import":
			imp = n.Content[i+1]
		case k == "name":
			ruleName = n.Content[i+1].Value
		case k == "remote_addresses":
			haveAddrs = true
		case k == "dynamic_remote_addresses":
			dynamic = true
		case !ruleKeys[k]:
			l.unknownKey(at(name, n.Content[i]), fmt.Sprintf("rule %q: unknown key %q", ruleName, k), "")
		}
	}
	if imp != nil {
		if len(n.Content) > 2 {
			return fmt.Errorf("%w: %s: a rule either imports or defines, not both", ErrInvalid, at(name, n))
		}
		return l.importFiles(name, imp, depth)
	}
	if dynamic {
		// Anubis fetches these lists at run time; Maat reads none.
		if haveAddrs {
			return fmt.Errorf("%w: %s: rule %q: set remote_addresses or dynamic_remote_addresses, not both", ErrInvalid, at(name, n), ruleName)
		}
		l.warn("%s: rule %q: dynamic_remote_addresses (address lists fetched at run time) not supported; write the ranges in remote_addresses; rule skipped", at(name, n), ruleName)
		return nil
	}
	if err := newlineRegexes(name, ruleName, n); err != nil {
		return err
	}
	r := &fileRule{src: at(name, n)}
	if err := n.Decode(r); err != nil {
		return decodeError(name, n, err)
	}
	if r.Action == "DEBUG_BENCHMARK" {
		return fmt.Errorf("%w: %s: rule %q: action DEBUG_BENCHMARK (Anubis's hash-rate benchmark page, a debugging aid of Anubis v1.16.0) is not supported", ErrInvalid, r.src, r.Name)
	}
	if r.RerouteTo != nil && r.Action != actionDenyAndReroute {
		l.warn("%s: rule %q: reroute_to is used only with action DENY_AND_REROUTE; ignored", r.src, r.Name)
	}
	if len(l.p.rules) >= maxRules {
		return fmt.Errorf("%w: %s: more than %d rules", ErrInvalid, r.src, maxRules)
	}
	l.p.rules = append(l.p.rules, r)
	return nil
}

// newlineRegexes refuses regular expressions that end in a newline, as
// Anubis does: YAML's ">" block keeps the final line break, so the rule
// would only match values that end in one.
func newlineRegexes(name, ruleName string, n *yaml.Node) error {
	var errs []error
	check := func(key string, v *yaml.Node) {
		if v.Kind == yaml.ScalarNode && strings.HasSuffix(v.Value, "\n") {
			errs = append(errs, fmt.Errorf("%w: %s: rule %q: %s ends with a newline (YAML \">\" keeps the final line break): write \">-\" or quote the expression", ErrInvalid, at(name, v), ruleName, key))
		}
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i].Value, n.Content[i+1]
		switch k {
		case "user_agent_regex", "path_regex":
			check(k, v)
		case "headers_regex":
			if v.Kind == yaml.MappingNode {
				for j := 0; j+1 < len(v.Content); j += 2 {
					check("headers_regex "+v.Content[j].Value, v.Content[j+1])
				}
			}
		}
	}
	return errors.Join(errs...)
}

func (l *loader) thresholds(name string, seq *yaml.Node, s *settings) error {
	if seq.Kind != yaml.SequenceNode {
		return fmt.Errorf("%w: %s: thresholds: must be a list", ErrInvalid, at(name, seq))
	}
	for _, n := range seq.Content {
		t := &fileThreshold{src: at(name, n)}
		if err := n.Decode(t); err != nil {
			return decodeError(name, n, err)
		}
		s.thresholds = append(s.thresholds, t)
	}
	return nil
}

// signals reads signals: {name: weight | off}.
func (l *loader) signals(name string, m *yaml.Node, s *settings) error {
	if m.Kind != yaml.MappingNode {
		return fmt.Errorf("%w: %s: signals: maps signal names to weights", ErrInvalid, at(name, m))
	}
	var errs []error
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		sig, ok := parseSignal(k.Value)
		if !ok {
			errs = append(errs, fmt.Errorf("%w: %s: unknown signal %q (known: %s)", ErrInvalid, at(name, k), k.Value, strings.Join(signalNames[:], ", ")))
			continue
		}
		if v.Value == "off" || v.Value == "false" {
			s.signals[sig] = signalSetting{set: true, off: true}
			continue
		}
		w, err := strconv.Atoi(v.Value)
		if err != nil || v.Kind != yaml.ScalarNode {
			errs = append(errs, fmt.Errorf("%w: %s: signal %s: weight must be an integer or off", ErrInvalid, at(name, v), k.Value))
			continue
		}
		s.signals[sig] = signalSetting{set: true, weight: w}
	}
	return errors.Join(errs...)
}

// statusCodes reads Anubis's status_codes: {CHALLENGE: N, DENY: M}: the
// HTTP status of challenge and deny pages, each 100 to 599.
func (l *loader) statusCodes(name string, m *yaml.Node, s *settings) error {
	if m.Kind != yaml.MappingNode {
		return fmt.Errorf("%w: %s: status_codes: maps CHALLENGE and DENY to HTTP status codes", ErrInvalid, at(name, m))
	}
	var errs []error
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		idx := -1
		switch k.Value {
		case "CHALLENGE":
			idx = 0
		case "DENY":
			idx = 1
		default:
			l.unknownKey(at(name, k), fmt.Sprintf("status_codes: unknown key %q", k.Value), " (CHALLENGE, DENY)")
			continue
		}
		code, err := strconv.Atoi(v.Value)
		if err != nil || v.Kind != yaml.ScalarNode || code < 100 || code > 599 {
			errs = append(errs, fmt.Errorf("%w: %s: status_codes: %s: %q is not an HTTP status code (100 to 599)", ErrInvalid, at(name, v), k.Value, v.Value))
			continue
		}
		s.status[idx] = &code
	}
	return errors.Join(errs...)
}

// hostingASNs reads hosting_asns: a list of AS numbers replaces the
// built-in list of hosting networks; {add: [...], remove: [...]} edits it.
func (l *loader) hostingASNs(name string, v *yaml.Node, s *settings) error {
	list := func(n *yaml.Node) ([]uint32, error) {
		if n.Kind != yaml.SequenceNode {
			return nil, fmt.Errorf("%w: %s: hosting_asns: want a list of AS numbers", ErrInvalid, at(name, n))
		}
		out := make([]uint32, 0, len(n.Content))
		for _, e := range n.Content {
			a, err := parseASN(e.Value)
			if err != nil || e.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("%w: %s: hosting_asns: %v", ErrInvalid, at(name, e), err)
			}
			out = append(out, a)
		}
		return out, nil
	}
	e := &hostingEdit{}
	switch v.Kind {
	case yaml.SequenceNode:
		got, err := list(v)
		if err != nil {
			return err
		}
		e.replace, e.list = true, got
	case yaml.MappingNode:
		for i := 0; i+1 < len(v.Content); i += 2 {
			k, val := v.Content[i], v.Content[i+1]
			got, err := list(val)
			if err != nil {
				return err
			}
			switch k.Value {
			case "add":
				e.add = got
			case "remove":
				e.remove = got
			default:
				return fmt.Errorf("%w: %s: hosting_asns: unknown key %q (add, remove)", ErrInvalid, at(name, k), k.Value)
			}
		}
	default:
		return fmt.Errorf("%w: %s: hosting_asns: a list of AS numbers, or {add: [...], remove: [...]}", ErrInvalid, at(name, v))
	}
	s.hosting = e
	return nil
}

// decodeError names the line of a node that does not decode.
func decodeError(name string, n *yaml.Node, err error) error {
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		return fmt.Errorf("%w: %s:%s: %s", ErrInvalid, name, m[1], m[2])
	}
	return fmt.Errorf("%w: %s: %s", ErrInvalid, at(name, n), strings.TrimPrefix(err.Error(), "yaml: "))
}

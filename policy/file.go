package policy

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"
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
	return "", errors.New("expression can hold one of a string, all: or any:")
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
	rules      []*fileRule
	thresholds []*fileThreshold
	hasThresh  bool
	signals    [numSignals]int
	signalOff  Signals
	warnings   []string
}

// anubisOnly are top-level sections of Anubis policy files that Maat does
// not use; each gives one warning.
var anubisOnly = map[string]string{
	"openGraph":    "Open Graph passthrough is not supported",
	"honeypot":     "honeypots are not supported",
	"impressum":    "the imprint is not supported",
	"logging":      "logging is configured in edge.yaml (log:)",
	"metrics":      "metrics are configured in edge.yaml (listen.admin)",
	"store":        "the store is configured in edge.yaml (store:)",
	"dnsbl":        "DNSBL lookups are not supported",
	"status_codes": "status codes are fixed (challenge 200 or 401/429, deny 403)",
}

// anubisRuleOnly are rule keys of Anubis (Thoth) that Maat cannot evaluate:
// a rule using them is skipped with a warning.
var anubisRuleOnly = map[string]bool{"geoip": true, "asns": true}

var ruleKeys = map[string]bool{
	"name": true, "action": true, "user_agent_regex": true, "path_regex": true,
	"headers_regex": true, "remote_addresses": true, "expression": true,
	"ja4": true, "hfp": true, "h2fp": true, "client_family": true, "signal": true,
	"challenge": true, "weight": true, "rate": true, "import": true,
	"reroute_to": true, // Anubis's DENY_AND_REROUTE
}

// maxImportDepth bounds nested imports.
const maxImportDepth = 8

// maxRules bounds the rules of one policy (Decision keeps 16-bit indexes).
const maxRules = 1 << 16

type loader struct {
	opts     Options
	p        *parsed
	visiting map[string]bool
}

func parseFile(name string, data []byte, opts Options) (*parsed, error) {
	l := &loader{opts: opts, p: &parsed{signals: defaultSignalWeights}, visiting: map[string]bool{name: true}}
	root, err := decodeRoot(name, data)
	if err != nil {
		return nil, err
	}
	if err := l.top(name, root); err != nil {
		return nil, err
	}
	if len(l.p.rules) == 0 {
		return nil, fmt.Errorf("%w: %s: no rules (an empty bots: list, or only skipped rules)", ErrInvalid, at(name, root))
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

func (l *loader) top(name string, root *yaml.Node) error {
	if root.Kind == yaml.SequenceNode {
		return l.bots(name, root, 0)
	}
	if root.Kind != yaml.MappingNode {
		return fmt.Errorf("%w: %s: a policy is a mapping with bots:", ErrInvalid, at(name, root))
	}
	var errs []error
	haveBots := false
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		switch k.Value {
		case "bots":
			haveBots = true
			if err := l.bots(name, v, 0); err != nil {
				errs = append(errs, err)
			}
		case "thresholds":
			l.p.hasThresh = true
			if err := l.thresholds(name, v); err != nil {
				errs = append(errs, err)
			}
		case "signals":
			if err := l.signals(name, v); err != nil {
				errs = append(errs, err)
			}
		default:
			if why, ok := anubisOnly[k.Value]; ok {
				l.warn("%s: %s: Anubis-only section ignored: %s", at(name, k), k.Value, why)
			} else {
				l.warn("%s: unknown section %q ignored", at(name, k), k.Value)
			}
		}
	}
	if !haveBots {
		errs = append(errs, fmt.Errorf("%w: %s: no bots: section", ErrInvalid, at(name, root)))
	}
	return errors.Join(errs...)
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
	var skip []string
	ruleName := ""
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i].Value
		switch {
		case k == "import":
			imp = n.Content[i+1]
		case k == "name":
			ruleName = n.Content[i+1].Value
		case anubisRuleOnly[k]:
			skip = append(skip, k)
		case !ruleKeys[k]:
			l.warn("%s: rule %q: unknown key %q ignored", at(name, n.Content[i]), ruleName, k)
		}
	}
	if imp != nil {
		if len(n.Content) > 2 {
			return fmt.Errorf("%w: %s: a rule either imports or defines, not both", ErrInvalid, at(name, n))
		}
		return l.importFiles(name, imp, depth)
	}
	if len(skip) > 0 {
		l.warn("%s: rule %q: Anubis-only matcher %s (Thoth) not supported; rule skipped", at(name, n), ruleName, strings.Join(skip, ", "))
		return nil
	}
	r := &fileRule{src: at(name, n)}
	if err := n.Decode(r); err != nil {
		return decodeError(name, n, err)
	}
	if r.Action == "DENY_AND_REROUTE" {
		l.warn("%s: rule %q: DENY_AND_REROUTE is served as DENY (no reroute)", r.src, r.Name)
		r.Action = "DENY"
	}
	if r.Action == "DEBUG_BENCHMARK" {
		l.warn("%s: rule %q: action DEBUG_BENCHMARK not supported; rule skipped", r.src, r.Name)
		return nil
	}
	if len(l.p.rules) >= maxRules {
		return fmt.Errorf("%w: %s: more than %d rules", ErrInvalid, r.src, maxRules)
	}
	l.p.rules = append(l.p.rules, r)
	return nil
}

// builtinPrefix names Maat's embedded lists in imports.
const builtinPrefix = "(builtin)/"

func (l *loader) importFiles(from string, v *yaml.Node, depth int) error {
	pattern := v.Value
	if v.Kind != yaml.ScalarNode || pattern == "" {
		return fmt.Errorf("%w: %s: import: needs a file name", ErrImport, at(from, v))
	}
	if depth >= maxImportDepth {
		return fmt.Errorf("%w: %s: imports nested deeper than %d", ErrImport, at(from, v), maxImportDepth)
	}
	if strings.HasPrefix(pattern, "(data)/") {
		return fmt.Errorf("%w: %s: %s is one of Anubis's embedded files, which Maat does not ship; use Maat's built-in lists instead: %s",
			ErrImport, at(from, v), pattern, strings.Join(BuiltinLists(), ", "))
	}
	var names []string
	var read func(string) ([]byte, error)
	if strings.HasPrefix(pattern, builtinPrefix) {
		read = readBuiltin
		names = []string{pattern}
	} else {
		read = l.opts.readFile
		if !filepath.IsAbs(pattern) {
			pattern = filepath.Join(filepath.Dir(from), pattern)
		}
		if strings.ContainsAny(pattern, "*?[") {
			glob := l.opts.Glob
			if glob == nil {
				glob = filepath.Glob
			}
			m, err := glob(pattern)
			if err != nil {
				return fmt.Errorf("%w: %s: %s: %v", ErrImport, at(from, v), pattern, err)
			}
			if len(m) == 0 {
				return fmt.Errorf("%w: %s: %s matches no file", ErrImport, at(from, v), pattern)
			}
			names = m
		} else {
			names = []string{pattern}
		}
	}
	var errs []error
	for _, file := range names {
		if l.visiting[file] {
			errs = append(errs, fmt.Errorf("%w: %s: import cycle through %s", ErrImport, at(from, v), file))
			continue
		}
		data, err := read(file)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: %s: %w", ErrImport, at(from, v), err))
			continue
		}
		root, err := decodeRoot(file, data)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		l.visiting[file] = true
		errs = append(errs, l.imported(file, root, depth+1))
		delete(l.visiting, file)
	}
	return errors.Join(errs...)
}

// imported reads an imported file: a list of rules (Anubis's snippets) or a
// policy whose bots: are taken.
func (l *loader) imported(name string, root *yaml.Node, depth int) error {
	if root.Kind == yaml.SequenceNode {
		return l.bots(name, root, depth)
	}
	if root.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(root.Content); i += 2 {
			switch k := root.Content[i]; k.Value {
			case "bots":
				return l.bots(name, root.Content[i+1], depth)
			}
		}
	}
	return fmt.Errorf("%w: %s: an imported file is a list of rules or has bots:", ErrImport, at(name, root))
}

func (l *loader) thresholds(name string, seq *yaml.Node) error {
	if seq.Kind != yaml.SequenceNode {
		return fmt.Errorf("%w: %s: thresholds: must be a list", ErrInvalid, at(name, seq))
	}
	for _, n := range seq.Content {
		t := &fileThreshold{src: at(name, n)}
		if err := n.Decode(t); err != nil {
			return decodeError(name, n, err)
		}
		l.p.thresholds = append(l.p.thresholds, t)
	}
	return nil
}

// signals reads signals: {name: weight | off}.
func (l *loader) signals(name string, m *yaml.Node) error {
	if m.Kind != yaml.MappingNode {
		return fmt.Errorf("%w: %s: signals: maps signal names to weights", ErrInvalid, at(name, m))
	}
	var errs []error
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		s, ok := parseSignal(k.Value)
		if !ok {
			errs = append(errs, fmt.Errorf("%w: %s: unknown signal %q (known: %s)", ErrInvalid, at(name, k), k.Value, strings.Join(signalNames[:], ", ")))
			continue
		}
		if v.Value == "off" || v.Value == "false" {
			l.p.signalOff |= 1 << s
			continue
		}
		w, err := strconv.Atoi(v.Value)
		if err != nil || v.Kind != yaml.ScalarNode {
			errs = append(errs, fmt.Errorf("%w: %s: signal %s: weight must be an integer or off", ErrInvalid, at(name, v), k.Value))
			continue
		}
		l.p.signals[s] = w
	}
	return errors.Join(errs...)
}

// builtinName turns "(builtin)/x.yaml" into the embedded path.
func builtinName(p string) string { return path.Join("lists", strings.TrimPrefix(p, builtinPrefix)) }

// decodeError names the line of a node that does not decode.
func decodeError(name string, n *yaml.Node, err error) error {
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		return fmt.Errorf("%w: %s:%s: %s", ErrInvalid, name, m[1], m[2])
	}
	return fmt.Errorf("%w: %s: %s", ErrInvalid, at(name, n), strings.TrimPrefix(err.Error(), "yaml: "))
}

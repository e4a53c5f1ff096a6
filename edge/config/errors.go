package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// This file turns what the YAML library says about a configuration file
// into errors an operator can act on: each names the file, the line and the
// key (sites[1].hosts[0]), in words rather than in the library's types.

// keyLines maps a key path as Validate spells it (listen.https,
// sites[1].hosts[0], divert.tarpit.upstream) to the line it was written
// on. Keys that were not written have no entry.
type keyLines map[string]int

// line returns the line of key, or of its nearest written parent (a
// problem of sites[0].tls is shown at sites[0] when tls was not written);
// 0 when none was written.
func (k keyLines) line(key string) int {
	for key != "" {
		if n, ok := k[key]; ok {
			return n
		}
		i := strings.LastIndexAny(key, ".[")
		if i < 0 {
			return 0
		}
		key = key[:i]
	}
	return 0
}

// keyAt returns the deepest key written on line n, or "".
func (k keyLines) keyAt(n int) string {
	best := ""
	for key, l := range k {
		if l == n && (len(key) > len(best) || len(key) == len(best) && key < best) {
			best = key
		}
	}
	return best
}

// decodeConfig reads YAML into cfg (which holds the defaults): it records
// where each key was written, refuses unknown keys with a suggestion, and
// rewrites the library's type errors. It does not validate.
func decodeConfig(name string, data []byte, cfg *Config) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		cfg.lines = nil
		return syntaxError(name, data, err)
	}
	cfg.lines = keyLines{}
	if len(doc.Content) == 0 { // an empty file: all defaults
		return nil
	}
	root := doc.Content[0]
	w := walker{file: name, lines: cfg.lines}
	w.errs = expandValues(name, root)
	w.walk(root, reflect.TypeFor[Config](), "")
	if err := root.Decode(cfg); err != nil {
		w.errs = append(w.errs, Problems(decodeError(name, err, cfg.lines))...)
	}
	if cfg.Log.Fingerprints == FingerprintsOff {
		cfg.Log.Fingerprints = ""
	}
	return SortByLine(w.errs)
}

// errorLine is the line of an Error, or 0.
func errorLine(err error) int {
	var ce *Error
	if errors.As(err, &ce) {
		return ce.Line
	}
	return 0
}

// walker visits a YAML tree along the Go type it decodes into. It does
// not follow aliases but for merge keys (<<), and visits at most
// maxWalkNodes nodes: a file of aliases of aliases must not cost more
// than the decoder allows it.
type walker struct {
	file   string
	lines  keyLines
	errs   []error
	visits int
	merges []*yaml.Node // the merge chain being walked, against cycles
}

const maxWalkNodes = 100_000

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

func (w *walker) walk(n *yaml.Node, t reflect.Type, path string) {
	if w.visits++; w.visits > maxWalkNodes || n.Kind == yaml.AliasNode {
		return // an alias's keys were recorded where its anchor stands
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		// Duration, Prefix, Upstreams read their own node; the items of
		// a list of upstreams get their lines.
		if n.Kind == yaml.SequenceNode {
			for i, item := range n.Content {
				w.lines[fmt.Sprintf("%s[%d]", path, i)] = item.Line
			}
		}
		return
	}
	switch {
	case n.Kind == yaml.MappingNode && t.Kind() == reflect.Struct:
		w.mapping(n, path, func(k *yaml.Node) (reflect.Type, bool) {
			f, ok := fieldByKey(t, k.Value)
			if !ok {
				w.unknown(k, t, join(path, k.Value))
			}
			return f.Type, ok
		})
	case n.Kind == yaml.MappingNode && t.Kind() == reflect.Map:
		w.mapping(n, path, func(*yaml.Node) (reflect.Type, bool) { return t.Elem(), true })
	case n.Kind == yaml.SequenceNode && t.Kind() == reflect.Slice:
		for i, item := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			w.lines[p] = item.Line
			w.walk(item, t.Elem(), p)
		}
	}
}

// mapping records each key of n and walks its value with the type field
// gives; merge keys (<<) bring another mapping's keys in.
func (w *walker) mapping(n *yaml.Node, path string, field func(k *yaml.Node) (reflect.Type, bool)) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Tag == "!!merge" {
			if v.Kind == yaml.AliasNode && v.Alias != nil {
				v = v.Alias
			}
			merged := []*yaml.Node{v}
			if v.Kind == yaml.SequenceNode {
				merged = v.Content
			}
			for _, m := range merged {
				if m.Kind == yaml.AliasNode && m.Alias != nil {
					m = m.Alias
				}
				if m.Kind == yaml.MappingNode && !slices.Contains(w.merges, m) && w.visits < maxWalkNodes {
					w.merges = append(w.merges, m)
					w.mapping(m, path, field)
					w.merges = w.merges[:len(w.merges)-1]
				}
			}
			continue
		}
		t, ok := field(k)
		if !ok {
			continue
		}
		p := join(path, k.Value)
		w.lines[p] = k.Line
		w.walk(v, t, p)
	}
}

// unknown reports a key the struct t does not have, with the nearest
// known key when one is close.
func (w *walker) unknown(k *yaml.Node, t reflect.Type, path string) {
	known := yamlKeys(t)
	w.errs = append(w.errs, &Error{File: w.file, Line: k.Line, Key: path,
		Err: &unknownKeyError{known: known, suggestion: suggest(k.Value, known)}})
}

// unknownKeyError is a key its mapping does not have.
type unknownKeyError struct {
	known      []string // the keys of the mapping
	suggestion string   // the one meant, probably; "" if none is close
}

func (e *unknownKeyError) Error() string {
	if e.suggestion != "" {
		return "unknown key; did you mean " + e.suggestion + "?"
	}
	return "unknown key (known here: " + strings.Join(e.known, ", ") + ")"
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// fieldByKey finds the field of struct t written as key in YAML.
func fieldByKey(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); name == key && name != "-" {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// yamlKeys lists the YAML keys of struct t, in declaration order.
func yamlKeys(t reflect.Type) []string {
	var keys []string
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); name != "" && name != "-" {
			keys = append(keys, name)
		}
	}
	return keys
}

// suggest returns the known key closest to key, if it is close enough to
// be a typo: an edit distance of at most a third of the key's letters (at
// least 1), or a difference only in case and - for _.
func suggest(key string, known []string) string {
	norm := func(s string) string { return strings.ReplaceAll(strings.ToLower(s), "-", "_") }
	best, bestD := "", max(1, len(key)/3)+1
	for _, k := range known {
		if norm(k) == norm(key) {
			return k
		}
		if d := editDistance(key, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, counting a swap of
// two neighbouring letters as one edit (Damerau's restricted form).
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// typeErrorRE matches one of yaml.v3's type errors.
var typeErrorRE = regexp.MustCompile("^line (\\d+): cannot unmarshal (!!\\w+)(?: `(.*)`)? into (.+)$")

// decodeError turns the errors of Node.Decode into Errors: the
// library's type errors are rewritten into words and placed at their key.
func decodeError(name string, err error, lines keyLines) error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		errs := make([]error, 0, len(te.Errors))
		for _, e := range te.Errors {
			errs = append(errs, typeError(name, e, lines))
		}
		return errors.Join(errs...)
	}
	return lineError(name, err.Error())
}

// typeError rewrites "line 3: cannot unmarshal !!str `x` into []string".
func typeError(name, msg string, lines keyLines) error {
	m := typeErrorRE.FindStringSubmatch(msg)
	if m == nil { // from an UnmarshalYAML of ours (nodeError)
		ce := lineError(name, msg).(*Error)
		ce.Key = lines.keyAt(ce.Line)
		return ce
	}
	line, _ := strconv.Atoi(m[1])
	got := yamlKind(m[2])
	if m[3] != "" && (m[2] == "!!str" || m[2] == "!!int" || m[2] == "!!float" || m[2] == "!!bool") {
		got += " " + strconv.Quote(m[3])
	}
	return &Error{File: name, Line: line, Key: lines.keyAt(line),
		Err: fmt.Errorf("want %s, got %s", goKind(m[4]), got)}
}

// yamlKind names a YAML tag in words.
func yamlKind(tag string) string {
	switch tag {
	case "!!str":
		return "the text"
	case "!!int":
		return "the number"
	case "!!float":
		return "the number"
	case "!!bool":
		return "the boolean"
	case "!!seq":
		return "a list"
	case "!!map":
		return "a mapping (key: value)"
	case "!!null":
		return "nothing"
	}
	return "a " + strings.TrimPrefix(tag, "!!")
}

// goKind names, in words, the Go type the library wanted to decode into.
func goKind(t string) string {
	switch {
	case strings.HasPrefix(t, "[]"):
		return "a list ([a, b], or one \"- item\" per line)"
	case strings.HasPrefix(t, "map["), strings.HasPrefix(t, "config."):
		return "a mapping (key: value lines)"
	case t == "bool":
		return "true or false"
	case t == "float64", t == "float32":
		return "a number"
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"):
		return "a whole number"
	case t == "string":
		return "a single value (not a list or mapping)"
	}
	return t
}

// nodeError reports a value of the wrong form, written as "want …". As a
// yaml.TypeError it lets the decoder go on, so that every problem of a
// file is reported at once; decodeError places it at its key.
func nodeError(n *yaml.Node, format string, args ...any) error {
	return nodeProblem(n, fmt.Errorf("want "+format, args...))
}

// nodeProblem reports err about the value n.
func nodeProblem(n *yaml.Node, err error) error {
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %v", n.Line, err)}}
}

// lineError is an Error from a message of the YAML library that
// starts "line N:".
func lineError(name, msg string) error {
	msg = strings.TrimPrefix(msg, "yaml: ")
	line := 0
	if n, _ := fmt.Sscanf(msg, "line %d:", &line); n == 1 {
		msg = strings.TrimSpace(msg[strings.IndexByte(msg, ':')+1:])
	}
	return &Error{File: name, Line: line, Err: errors.New(msg)}
}

// syntaxError places a YAML syntax error on the line that causes it. The
// library reports where the enclosing block began (often a blank line or
// the parent key), so the first prefix of the file, in whole lines, that
// fails with the same error ends on the culprit. Longer prefixes fail the
// same way (the parser stops at the first error), so a binary search finds
// it; a line-by-line search checks the rare file where it does not.
func syntaxError(name string, data []byte, err error) error {
	ce := lineError(name, err.Error()).(*Error)
	what := ce.Err.Error()
	lines := strings.SplitAfter(string(data), "\n")
	fails := func(k int) bool {
		var n yaml.Node
		e := yaml.Unmarshal([]byte(strings.Join(lines[:k], "")), &n)
		return e != nil && lineError(name, e.Error()).(*Error).Err.Error() == what
	}
	utf16 := bytes.HasPrefix(data, []byte{0xff, 0xfe}) || bytes.HasPrefix(data, []byte{0xfe, 0xff})
	if len(lines) <= maxReparseLines && !utf16 { // lines of UTF-16 are not split at byte 0x0a
		lo := max(ce.Line, 1)
		k := lo + sort.Search(len(lines)-lo+1, func(i int) bool { return fails(lo + i) })
		if k > len(lines) || k > lo && fails(k-1) || !fails(k) {
			for k = lo; k <= len(lines) && !fails(k); k++ {
			}
		}
		if k <= len(lines) {
			ce.Line = k
		}
	}
	text := ""
	if ce.Line >= 1 && ce.Line <= len(lines) && !utf16 {
		text = strings.TrimRight(lines[ce.Line-1], "\r\n")
	}
	ce.Err = errors.New(syntaxWords(what, text))
	return ce
}

// maxReparseLines bounds the files syntaxError searches for the line.
const maxReparseLines = 5000

// syntaxWords explains the YAML library's syntax errors.
func syntaxWords(what, text string) string {
	trimmed := strings.TrimSpace(text)
	switch {
	case strings.Contains(text, "\t") && strings.Contains(what, "cannot start any token"):
		return "a tab indents this line; YAML indents with spaces only"
	case strings.HasPrefix(what, "did not find expected key"),
		strings.HasPrefix(what, "did not find expected '-' indicator"):
		return fmt.Sprintf("%q is not indented like the lines above it: line it up with the keys it belongs to (YAML nests by spaces) [%s]", trimmed, what)
	case strings.HasPrefix(what, "mapping values are not allowed"):
		return fmt.Sprintf("%q: a \"key: value\" where a plain value was expected: check this line's indentation, or quote a value that holds \": \" [%s]", trimmed, what)
	case strings.HasPrefix(what, "found unknown escape character"), strings.HasPrefix(what, "found unexpected end of stream"):
		return fmt.Sprintf("a quoted value is not closed or holds a bad \\ escape: use single quotes for regular expressions and Windows paths [%s]", what)
	}
	return what
}

// Check returns every problem of a configuration Read returned: the values
// that could not be decoded and Validate's, leaving out what Validate says
// of keys whose values could not be decoded, sorted by line and located.
// It is what Load adds to Read.
func (c *Config) Check() error {
	decodeErr := c.decodeErr
	if decodeErr != nil && c.lines == nil { // not YAML: nothing to validate
		return decodeErr
	}
	errs := Problems(decodeErr)
	bad, decodeFailed := errorKeys(errs), len(errs) > 0
	for _, e := range Problems(c.Validate()) {
		// After values that could not be decoded, Validate's problems
		// at keys they left unset, or at keys not written at all, are
		// consequences, not news.
		var ce *Error
		if errors.As(e, &ce) && decodeFailed &&
			(c.lines.line(ce.Key) == 0 || slices.ContainsFunc(bad, func(k string) bool { return KeysOverlap(k, ce.Key) })) {
			continue
		}
		errs = append(errs, e)
	}
	if decodeFailed {
		c.valid = false
	}
	return SortByLine(Problems(c.Locate(errors.Join(errs...))))
}

// errorKeys lists the keys of the Errors among errs, and for a
// misspelt key the key it probably meant (left unset by the typo).
func errorKeys(errs []error) []string {
	var keys []string
	for _, e := range errs {
		var ce *Error
		if !errors.As(e, &ce) || ce.Key == "" {
			continue
		}
		keys = append(keys, ce.Key)
		var uk *unknownKeyError
		if errors.As(ce.Err, &uk) && uk.suggestion != "" {
			parent := ce.Key[:max(strings.LastIndexByte(ce.Key, '.'), 0)]
			keys = append(keys, join(parent, uk.suggestion))
		}
	}
	return keys
}

// KeysOverlap reports whether a and b are one key, or one holds the other
// (sites[0] holds sites[0].hosts[1]).
func KeysOverlap(a, b string) bool {
	under := func(x, y string) bool { return strings.HasPrefix(x, y+".") || strings.HasPrefix(x, y+"[") }
	return a == b || under(a, b) || under(b, a)
}

// SortByLine joins errs in the order of their lines, those without a
// line last (the order of errs otherwise kept); nil when there are none.
// It sorts errs in place.
func SortByLine(errs []error) error {
	slices.SortStableFunc(errs, func(a, b error) int {
		la, lb := errorLine(a), errorLine(b)
		if (la == 0) != (lb == 0) {
			return cmp.Compare(lb, la) // 0 last
		}
		return cmp.Compare(la, lb)
	})
	return errors.Join(errs...)
}

// Locate fills in the line of each Error in err (from Load, Validate, or
// New or NewHandler of package edge) from where its key was written in the
// file c was read from, and the file name where it is missing. It returns
// err.
func (c *Config) Locate(err error) error {
	for _, e := range Problems(err) {
		var ce *Error
		if !errors.As(e, &ce) {
			continue
		}
		if ce.File == "" {
			ce.File = c.File
		}
		if ce.Line == 0 && ce.Key != "" {
			ce.Line = c.lines.line(ce.Key)
		}
	}
	return err
}

// Problems lists the problems joined in err (by errors.Join, as Validate,
// Load and `edge config check` join them), one per element, for printing
// one a line: the errors joined in err (nested joins too), or err alone.
// Other errors with several causes (an Error, fmt.Errorf with two %w) are
// one problem each.
func Problems(err error) []error {
	if err == nil {
		return nil
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	parts := j.Unwrap()
	texts := make([]string, len(parts))
	for i, e := range parts {
		texts[i] = e.Error()
	}
	if len(parts) == 0 || strings.Join(texts, "\n") != err.Error() {
		return []error{err}
	}
	var out []error
	for _, e := range parts {
		out = append(out, Problems(e)...)
	}
	return out
}

package config_test

// The example configuration (edge.example.yaml, installed by the Debian
// package as /etc/edge/edge.yaml) and docs/configuration.md must name every
// key of config.Config. These tests walk the Config type by reflection, so a
// key added to the code without its line in the example or the
// documentation fails here.

import (
	"bytes"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/maatproxy/maat/edge/config"
)

const (
	examplePath = "../../edge.example.yaml"
	configDoc   = "../../docs/configuration.md"
)

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// keyPaths lists the YAML key paths of t in the notation of
// docs/configuration.md: "listen.https", "sites[].routes[].path" for list
// elements, "divert.<name>.upstream" for the values of a map keyed by
// names the operator chooses.
func keyPaths(t reflect.Type) []string {
	var out []string
	walkKeys(t, "", func(path string, _ reflect.Type) { out = append(out, path) })
	return out
}

// walkKeys calls visit for every yaml-tagged field under t, depth first.
func walkKeys(t reflect.Type, prefix string, visit func(path string, t reflect.Type)) {
	t = deref(t)
	if t.Kind() != reflect.Struct || reflect.PointerTo(t).Implements(unmarshalerType) {
		return
	}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		visit(path, f.Type)
		if child, sub, ok := descend(f.Type); ok {
			walkKeys(child, path+sub, visit)
		}
	}
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// descend says whether keys go on below a field of type t: into a struct,
// the struct elements of a list ("[]") or the struct values of a map
// (".<name>"). Types that read themselves (Duration, Upstreams) are leaves.
func descend(t reflect.Type) (reflect.Type, string, bool) {
	t = deref(t)
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil, "", false
	}
	switch t.Kind() {
	case reflect.Struct:
		return t, "", true
	case reflect.Slice:
		if e := deref(t.Elem()); e.Kind() == reflect.Struct {
			return e, "[]", true
		}
	case reflect.Map:
		if e := deref(t.Elem()); e.Kind() == reflect.Struct {
			return e, ".<name>", true
		}
	}
	return nil, "", false
}

// nodeKeys records the key paths a YAML document sets, read along type t,
// and reports keys that t does not have.
func nodeKeys(t reflect.Type, n *yaml.Node, prefix string, seen map[string]bool) []string {
	t = deref(t)
	if n.Kind != yaml.MappingNode || t.Kind() != reflect.Struct {
		return nil
	}
	var unknown []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		f, ok := fieldByTag(t, k.Value)
		path := k.Value
		if prefix != "" {
			path = prefix + "." + k.Value
		}
		if !ok {
			unknown = append(unknown, fmt.Sprintf("line %d: %s", k.Line, path))
			continue
		}
		seen[path] = true
		child, sub, ok := descend(f.Type)
		switch {
		case !ok:
		case sub == "":
			unknown = append(unknown, nodeKeys(child, v, path, seen)...)
		case sub == "[]" && v.Kind == yaml.SequenceNode:
			for _, item := range v.Content {
				unknown = append(unknown, nodeKeys(child, item, path+sub, seen)...)
			}
		case sub == ".<name>" && v.Kind == yaml.MappingNode:
			for j := 1; j < len(v.Content); j += 2 {
				unknown = append(unknown, nodeKeys(child, v.Content[j], path+sub, seen)...)
			}
		}
	}
	return unknown
}

func fieldByTag(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); tag == name && f.IsExported() {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// uncomment turns the example into the document of every setting: lines
// "# key: …" (optional settings, commented out) lose their "# ", lines
// "## …" (prose) become empty, so that line numbers stay.
func uncomment(data []byte) []byte {
	var b bytes.Buffer
	for line := range strings.Lines(string(data)) {
		body := strings.TrimLeft(line, " ")
		indent := line[:len(line)-len(body)]
		switch {
		case strings.HasPrefix(body, "##") || strings.TrimSpace(body) == "#":
			b.WriteString("\n")
		case strings.HasPrefix(body, "# "):
			b.WriteString(indent + body[2:])
		default:
			b.WriteString(line)
		}
	}
	return b.Bytes()
}

// missingKeys returns the key paths of config.Config that the example (with
// its commented-out settings) does not set, and the keys it sets that
// Config does not have.
func missingKeys(example []byte) (missing, unknown []string, err error) {
	all := uncomment(example)
	var doc yaml.Node
	if err := yaml.Unmarshal(all, &doc); err != nil {
		return nil, nil, fmt.Errorf("the example with its \"# \" lines uncommented is not YAML (prose lines start with \"##\"): %w", err)
	}
	if len(doc.Content) == 0 {
		return keyPaths(reflect.TypeFor[config.Config]()), nil, nil
	}
	seen := map[string]bool{}
	unknown = nodeKeys(reflect.TypeFor[config.Config](), doc.Content[0], "", seen)
	for _, p := range keyPaths(reflect.TypeFor[config.Config]()) {
		if !seen[p] {
			missing = append(missing, p)
		}
	}
	return missing, unknown, nil
}

func TestExampleConfigParses(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("edge.example.yaml", data)
	if err != nil {
		t.Fatalf("the example (installed as /etc/edge/edge.yaml) must pass config check:\n%v", err)
	}

	// Every value the example writes is the default, except what its
	// header names: the placeholder site and the two files under the
	// service's directories. http3 and fingerprints.ticket_ja4 are
	// written out; absent means true.
	want := config.Default()
	want.Challenge.SecretFile = "/var/lib/edge/secret"
	want.Log.Fingerprints = "/var/log/edge/fp.jsonl"
	on := true
	want.Listen.HTTP3 = &on
	want.Fingerprints.TicketJA4 = &on
	ct := reflect.TypeFor[config.Config]()
	got, def := reflect.ValueOf(cfg), reflect.ValueOf(want)
	for i := range ct.NumField() {
		f := ct.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" || name == "sites" {
			continue
		}
		if g, w := marshal(t, got.Field(i).Interface()), marshal(t, def.Field(i).Interface()); g != w {
			t.Errorf("%s in the example differs from Default: the example must show the default\nexample:\n%s\ndefault:\n%s", name, g, w)
		}
	}

	if len(cfg.Sites) != 1 {
		t.Fatalf("the example has %d live sites, want the one placeholder", len(cfg.Sites))
	}
	s := cfg.Sites[0]
	if !slices.Equal(s.Hosts, []string{"example.org", "www.example.org"}) || len(s.Upstream) != 1 || s.Upstream[0].String() != "http://127.0.0.1:3000" {
		t.Errorf("placeholder site = %v → %v, want [example.org www.example.org] → http://127.0.0.1:3000", s.Hosts, s.Upstream)
	}
	if s.Compress == nil || !*s.Compress {
		t.Errorf("sites[0].compress = %v, want true (the default, written out)", s.Compress)
	}
	s.Hosts, s.Upstream, s.Compress = nil, nil, nil
	if g, w := marshal(t, s), marshal(t, config.Site{}); g != w {
		t.Errorf("the placeholder site sets more than hosts and upstream:\n%s\nwant the defaults:\n%s", g, w)
	}
}

func marshal(t *testing.T, v any) string {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestExampleConfigHasEveryKey(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	missing, unknown, err := missingKeys(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range missing {
		t.Errorf("edge.example.yaml lacks %s: add it with its default and a comment (commented out with \"# \" if it must not be live)", p)
	}
	for _, u := range unknown {
		t.Errorf("edge.example.yaml sets a key config.Config does not have: %s", u)
	}

	// The commented-out settings must decode too: right types, known keys.
	var all config.Config
	dec := yaml.NewDecoder(bytes.NewReader(uncomment(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&all); err != nil {
		t.Errorf("edge.example.yaml with its optional settings uncommented does not decode: %v", err)
	}

	// Every key written with a value carries its one-line comment.
	keyLine := regexp.MustCompile(`^\s*(?:- )?[a-z0-9_]+: [^{\[#\s]`)
	for i, line := range strings.Split(string(uncomment(data)), "\n") {
		if keyLine.MatchString(line) && !strings.Contains(line, " # ") {
			t.Errorf("edge.example.yaml:%d: %q has no comment", i+1, strings.TrimSpace(line))
		}
	}
}

// TestMissingKeysCatches proves the completeness check can fail: it must
// name a key whose line is taken out, a key under a list and a map, and a
// key the example invents.
func TestMissingKeysCatches(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	drop := func(substr string) []byte {
		var b bytes.Buffer
		found := false
		for line := range strings.Lines(string(data)) {
			if strings.Contains(line, substr) {
				found = true
				continue
			}
			b.WriteString(line)
		}
		if !found {
			t.Fatalf("the example has no line with %q", substr)
		}
		return b.Bytes()
	}
	for _, tt := range []struct {
		name        string
		data        []byte
		wantMissing string
		wantUnknown string
	}{
		{"top-level section key", drop("  ranges: "), "limits.ranges", ""},
		{"commented key under a list", drop("strip_prefix: "), "sites[].routes[].strip_prefix", ""},
		{"commented key under a map", drop("max_duration: "), "divert.<name>.max_duration", ""},
		{"invented key", append(bytes.Clone(data), "limits_extra: 1\n"...), "", "limits_extra"},
		{"empty file", nil, "listen.https", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			missing, unknown, err := missingKeys(tt.data)
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantMissing != "" && !slices.Contains(missing, tt.wantMissing) {
				t.Errorf("missing = %v, want it to name %s", missing, tt.wantMissing)
			}
			if tt.wantMissing == "" && len(missing) > 0 {
				t.Errorf("missing = %v, want none", missing)
			}
			if tt.wantUnknown != "" && !slices.ContainsFunc(unknown, func(u string) bool { return strings.HasSuffix(u, tt.wantUnknown) }) {
				t.Errorf("unknown = %v, want it to name %s", unknown, tt.wantUnknown)
			}
		})
	}
}

// TestConfigurationDocHasEveryKey checks docs/configuration.md: every key
// path of config.Config appears in backquotes, and every key its tables list
// exists.
func TestConfigurationDocHasEveryKey(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(configDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	known := map[string]bool{}
	for _, p := range keyPaths(reflect.TypeFor[config.Config]()) {
		known[p] = true
		if !strings.Contains(doc, "`"+p+"`") {
			t.Errorf("docs/configuration.md does not document `%s`", p)
		}
	}
	// A table row names its key in its first cell: | `listen.https` | …
	row := regexp.MustCompile("^\\| `([^`]+)` \\|")
	rows := 0
	for i, line := range strings.Split(doc, "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		rows++
		if !known[m[1]] {
			t.Errorf("docs/configuration.md:%d documents `%s`, which config.Config does not have", i+1, m[1])
		}
	}
	if rows < len(known) {
		t.Errorf("docs/configuration.md has %d key rows for %d keys", rows, len(known))
	}
}

func TestKeyPaths(t *testing.T) {
	t.Parallel()
	paths := keyPaths(reflect.TypeFor[config.Config]())
	for _, want := range []string{
		"listen.https", "tls.acme.eab_hmac_key", "sites[].upstream", "sites[].routes[].basic_auth.users",
		"sites[].routes[].headers.request.remove", "sites[].hsts.max_age", "divert.<name>.upstream",
		"challenge.wait.duration", "limits.quic_handshakes", "trusted_proxies",
	} {
		if !slices.Contains(paths, want) {
			t.Errorf("keyPaths lacks %s", want)
		}
	}
	for _, bad := range []string{"sites[].upstream.Scheme", "timeouts.drain.", "demo", "path"} {
		if slices.ContainsFunc(paths, func(p string) bool { return strings.HasPrefix(p, bad) }) {
			t.Errorf("keyPaths descends where it should not: %s", bad)
		}
	}
}

package ops

// The documentation's YAML examples pass `edge config check` (CheckConfig)
// and the policy examples load. The rest of the documentation's tests are
// the module root's docs_test.go.

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	"golang.org/x/crypto/bcrypt"

	"github.com/maatproxy/maat/edge/config"
	"github.com/maatproxy/maat/policy"
)

// repoRoot is the module root, from this package's directory.
const repoRoot = "../../../.."

// yamlBlock is a fenced YAML block of a Markdown file.
type yamlBlock struct {
	file string
	line int
	text string
}

var yamlFence = regexp.MustCompile("(?ms)^```yaml\\n(.*?)^```")

// yamlBlocks returns the fenced YAML blocks of files, named relative to
// root.
func yamlBlocks(t *testing.T, root string, files ...string) []yamlBlock {
	t.Helper()
	var out []yamlBlock
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		for _, m := range yamlFence.FindAllStringSubmatchIndex(text, -1) {
			out = append(out, yamlBlock{file: f, line: strings.Count(text[:m[2]], "\n") + 1, text: text[m[2]:m[3]]})
		}
	}
	return out
}

// topKeys returns the top-level keys of a YAML block, or nil when it is a
// fragment (a list item, an indented piece of a larger file).
func topKeys(text string) []string {
	var keys []string
	for line := range strings.Lines(text) {
		if line == "" || line[0] == ' ' || line[0] == '#' || line[0] == '\n' {
			continue
		}
		if line[0] == '-' {
			return nil
		}
		k, _, ok := strings.Cut(line, ":")
		if !ok {
			return nil
		}
		keys = append(keys, k)
	}
	return keys
}

// TestDocExamplesLoad loads every complete YAML example of the README and
// docs/ as the edge would: configuration examples with CheckConfig,
// which does all that `edge run` does short of listening, after concrete
// has made them real under a scratch directory (a fragment without sites
// gets a placeholder site); policy examples with policy.Parse (a fragment
// without bots imports the default policy). Blocks that are pieces of a
// larger file (list items) are left out. Every configuration example of
// the documentation can be made concrete so; one that names a file concrete
// cannot make (a geo database, a certificate) fails here until concrete
// learns to.
func TestDocExamplesLoad(t *testing.T) {
	t.Parallel()
	configKeys := map[string]bool{}
	ct := reflect.TypeFor[config.Config]()
	for i := range ct.NumField() {
		if name, _, _ := strings.Cut(ct.Field(i).Tag.Get("yaml"), ","); name != "" && name != "-" {
			configKeys[name] = true
		}
	}
	policyKeys := map[string]bool{"bots": true, "thresholds": true, "signals": true, "hosting_asns": true, "status_codes": true}
	hash, err := bcrypt.GenerateFromPassword([]byte("example"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	all := func(keys []string, set map[string]bool) bool {
		return !slices.ContainsFunc(keys, func(k string) bool { return !set[k] })
	}
	checked := 0
	for _, b := range yamlBlocks(t, repoRoot, "README.md", "docs/configuration.md", "docs/faq.md", "docs/operations.md", "docs/policy.md") {
		keys := topKeys(b.text)
		name := fmt.Sprintf("%s:%d", b.file, b.line)
		switch {
		case len(keys) == 0:
		case all(keys, configKeys):
			dir := t.TempDir()
			file := filepath.Join(dir, "edge.yaml")
			if err := os.WriteFile(file, concrete(t, dir, b.text, string(hash)), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := CheckConfig(t.Context(), file, CheckOptions{Offline: true}); err != nil {
				t.Errorf("the configuration example at %s does not pass edge config check:\n%v\n%s", name, err, b.text)
			}
			checked++
		case all(keys, policyKeys):
			text := b.text
			if !slices.Contains(keys, "bots") {
				text = "bots:\n  - import: (builtin)/default.yaml\n" + text
			}
			if _, err := policy.Parse(name, []byte(text), policy.Options{}); err != nil {
				t.Errorf("the policy example at %s does not load:\n%v\n%s", name, err, b.text)
			}
			checked++
		}
	}
	if checked < 15 {
		t.Errorf("only %d examples were checked: is the block detection broken?", checked)
	}
}

// systemDirs are where the examples put what the edge reads and writes.
var systemDirs = []string{"/etc/", "/run/", "/srv/", "/var/"}

// concrete rewrites a configuration example so that it can be checked on
// this machine, as the user running the test: every absolute path under
// systemDirs moves under dir, and what it names is made there (a static
// root with the error pages its errors: names, a template directory, a
// policy file importing the default policy, or the directory of a file
// the edge makes itself: a log, the secret, the ACME cache); tls.cache and
// log.fingerprints, whose defaults are under /var, are set when the example
// leaves them out; a bcrypt placeholder ("$2y$10$…") becomes hash; an
// example without sites gets a placeholder site.
func concrete(t *testing.T, dir, text, hash string) []byte {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		t.Fatalf("not a YAML mapping (%v):\n%s", err, text)
	}
	top := doc.Content[0]
	if mapValue(top, "sites") == nil {
		addKey(t, top, "sites", `[{hosts: [example.org], upstream: "http://127.0.0.1:3000"}]`)
	}
	for _, d := range []struct{ section, key, value string }{
		{"tls", "cache", "/var/lib/edge"},
		{"log", "fingerprints", "/var/log/edge/fp.jsonl"},
	} {
		sec := mapValue(top, d.section)
		if sec == nil {
			sec = addKey(t, top, d.section, "{}")
		}
		if mapValue(sec, d.key) == nil {
			addKey(t, sec, d.key, d.value)
		}
	}
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				makePath(t, dir, n, n.Content[i].Value, n.Content[i+1], hash)
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(top)
	out, err := yaml.Marshal(&doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// makePath rewrites the value v of key in the mapping m, when it is a path
// under systemDirs or a bcrypt placeholder, and makes what it names.
func makePath(t *testing.T, dir string, m *yaml.Node, key string, v *yaml.Node, hash string) {
	t.Helper()
	if v.Kind != yaml.ScalarNode {
		return
	}
	if strings.HasPrefix(v.Value, "$2y$") && strings.Contains(v.Value, "…") {
		v.Value = hash
		return
	}
	if ref, ok := strings.CutPrefix(v.Value, "${file:"); ok {
		// A secret from a file (systemd's credentials): the file is made,
		// with a value the key takes, and the reference points to it.
		p := filepath.Join(dir, filepath.FromSlash(strings.TrimSuffix(ref, "}")))
		content := hash // a basic-auth user's, the secret the docs show most
		if key == "url" {
			content = "redis://127.0.0.1:6379/0"
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		v.Value = "${file:" + p + "}"
		return
	}
	if !slices.ContainsFunc(systemDirs, func(d string) bool { return strings.HasPrefix(v.Value, d) }) {
		return
	}
	p := filepath.Join(dir, filepath.FromSlash(v.Value))
	v.Value, v.Style = p, 0
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	switch key {
	case "root":
		must(os.MkdirAll(p, 0o755))
		if pages := mapValue(m, "errors"); pages != nil {
			for i := 1; i < len(pages.Content); i += 2 {
				page := filepath.Join(p, filepath.FromSlash(pages.Content[i].Value))
				must(os.MkdirAll(filepath.Dir(page), 0o755))
				must(os.WriteFile(page, []byte("<h1>not here</h1>"), 0o644))
			}
		}
	case "template_dir":
		must(os.MkdirAll(p, 0o755))
		must(os.WriteFile(filepath.Join(p, "brand.html"), []byte(`{{define "brand"}}<p>Example</p>{{end}}`), 0o644))
	case "policy":
		must(os.MkdirAll(filepath.Dir(p), 0o755))
		must(os.WriteFile(p, []byte("bots:\n  - import: (builtin)/default.yaml\n"), 0o644))
	default: // a file the edge makes, in a directory that must exist
		must(os.MkdirAll(filepath.Dir(p), 0o755))
	}
}

// mapValue returns the value of key in the mapping m, or nil.
func mapValue(m *yaml.Node, key string) *yaml.Node {
	if m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// addKey adds key with the YAML value to the mapping m and returns the
// value's node.
func addKey(t *testing.T, m *yaml.Node, key, value string) *yaml.Node {
	t.Helper()
	var v yaml.Node
	if err := yaml.Unmarshal([]byte(value), &v); err != nil {
		t.Fatal(err)
	}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, v.Content[0])
	return v.Content[0]
}

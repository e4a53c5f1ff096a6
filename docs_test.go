package maat_test

// The documentation is part of the product: the README names every
// command, and no relative link in any Markdown file of the repository is
// dead or points outside it. (docs/configuration.md against the
// configuration's keys: edge/config/examplefile_test.go.)

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	"golang.org/x/crypto/bcrypt"

	"github.com/maatproxy/maat/edge"
	"github.com/maatproxy/maat/policy"
)

// commands are the commands of DESIGN.md's "Command line" and issue 17.
var commands = []string{
	"demo", "run", "config check", "policy check", "policy explain", "robots2policy", "fp top",
	"version", "hash-password", "trust", "completion", "help",
}

func TestReadmeNamesEveryCommand(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range commands {
		re := regexp.MustCompile(`\bedge ` + regexp.QuoteMeta(c) + `\b`)
		if !re.Match(readme) {
			t.Errorf("README.md does not show `edge %s`", c)
		}
	}
}

// markdownFiles lists the .md files of the repository, skipping hidden
// directories and what is not ours (testdata copied from elsewhere keeps
// its links as they were).
func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			out = append(out, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var (
	fence      = regexp.MustCompile("(?ms)^\\s*```.*?^\\s*```[^\\n]*$")
	codeSpan   = regexp.MustCompile("`[^`\\n]*`")
	inlineLink = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	refLink    = regexp.MustCompile(`(?m)^\s*\[[^\]]+\]:\s*(\S+)`)
	heading    = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*#*\s*$`)
	slugDrop   = regexp.MustCompile(`[^\p{L}\p{N}\s_-]`)
)

// links returns the link targets of a Markdown text, outside code.
func links(text string) []string {
	text = fence.ReplaceAllString(text, "")
	text = codeSpan.ReplaceAllString(text, "")
	var out []string
	for _, m := range inlineLink.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	for _, m := range refLink.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	return out
}

// anchors returns the anchors GitHub makes for a Markdown text's headings:
// lower case, punctuation dropped, spaces as hyphens, repeats numbered.
func anchors(text string) map[string]bool {
	text = fence.ReplaceAllString(text, "")
	out := map[string]bool{}
	seen := map[string]int{}
	for _, m := range heading.FindAllStringSubmatch(text, -1) {
		s := strings.ToLower(strings.TrimSpace(m[1]))
		s = slugDrop.ReplaceAllString(s, "")
		s = strings.ReplaceAll(s, " ", "-")
		if n := seen[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// deadLinks checks the relative links of the file at path (relative to
// root) and returns what is wrong with them.
func deadLinks(root, path string, read func(string) (string, error)) []string {
	text, err := read(path)
	if err != nil {
		return []string{err.Error()}
	}
	var bad []string
	for _, l := range links(text) {
		if strings.Contains(l, "://") || strings.HasPrefix(l, "mailto:") {
			continue
		}
		target, frag, _ := strings.Cut(l, "#")
		file := path
		if target != "" {
			file = filepath.Join(filepath.Dir(path), filepath.FromSlash(target))
			rel, err := filepath.Rel(root, file)
			if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
				bad = append(bad, fmt.Sprintf("%s: %s points outside the repository", path, l))
				continue
			}
			if _, err := os.Stat(file); err != nil {
				bad = append(bad, fmt.Sprintf("%s: %s: no such file", path, l))
				continue
			}
		}
		if frag != "" && strings.HasSuffix(file, ".md") {
			t, err := read(file)
			if err != nil {
				bad = append(bad, err.Error())
				continue
			}
			if !anchors(t)[frag] {
				bad = append(bad, fmt.Sprintf("%s: %s: no heading makes the anchor #%s", path, l, frag))
			}
		}
	}
	return bad
}

func readText(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}

func TestNoDeadLinks(t *testing.T) {
	t.Parallel()
	files := markdownFiles(t, ".")
	for _, want := range []string{"README.md", "docs/configuration.md", "docs/policy.md", "docs/fingerprints.md", "docs/faq.md", "docs/operations.md"} {
		if !slices.Contains(files, filepath.FromSlash(want)) {
			t.Errorf("%s is missing", want)
		}
	}
	for _, f := range files {
		for _, b := range deadLinks(".", f, readText) {
			t.Error(b)
		}
	}
}

// TestDeadLinksCatches proves the link check can fail.
func TestDeadLinksCatches(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	write := func(name, text string) {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("docs/faq.md", "# Questions\n\n## A visitor is looping?\n\n## Setup\n\n## Setup\n")
	for _, tt := range []struct {
		name, text string
		wantBad    string // "" = no problem
	}{
		{"good file and anchor", "[faq](docs/faq.md#a-visitor-is-looping)", ""},
		{"repeated heading", "[again](docs/faq.md#setup-1)", ""},
		{"external and mail", "[x](https://example.org/nope) [m](mailto:a@example.org)", ""},
		{"inside code", "`[x](missing.md)`\n\n```\n[y](missing.md)\n```\n", ""},
		{"missing file", "see [design](docs/design.md)", "no such file"},
		{"outside the repository", "[shared](../shared/DESIGN.md)", "points outside"},
		{"missing anchor", "[faq](docs/faq.md#cookies)", "no heading makes the anchor #cookies"},
		{"reference link", "[faq]: docs/missing.md\n", "no such file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			read := func(p string) (string, error) {
				if p == filepath.Join(root, "README.md") {
					return tt.text, nil
				}
				return readText(p)
			}
			bad := deadLinks(root, filepath.Join(root, "README.md"), read)
			switch {
			case tt.wantBad == "" && len(bad) > 0:
				t.Errorf("deadLinks = %q, want none", bad)
			case tt.wantBad != "" && !slices.ContainsFunc(bad, func(b string) bool { return strings.Contains(b, tt.wantBad) }):
				t.Errorf("deadLinks = %q, want one saying %q", bad, tt.wantBad)
			}
		})
	}
}

// yamlBlock is a fenced YAML block of a Markdown file.
type yamlBlock struct {
	file string
	line int
	text string
}

var yamlFence = regexp.MustCompile("(?ms)^```yaml\\n(.*?)^```")

func yamlBlocks(t *testing.T, files ...string) []yamlBlock {
	t.Helper()
	var out []yamlBlock
	for _, f := range files {
		b, err := os.ReadFile(f)
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
// docs/ as the edge would: configuration examples with edge.CheckConfig,
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
	ct := reflect.TypeFor[edge.Config]()
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
	for _, b := range yamlBlocks(t, "README.md", "docs/configuration.md", "docs/faq.md", "docs/operations.md", "docs/policy.md") {
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
			if _, err := edge.CheckConfig(file); err != nil {
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

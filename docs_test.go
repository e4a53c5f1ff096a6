package maat_test

// The documentation is part of the product: the README names every
// command, and no relative link in any Markdown file of the repository is
// dead or points outside it. (docs/configuration.md against the
// configuration's keys: edge/config/examplefile_test.go; every YAML example
// of the documentation through `edge config check`:
// cmd/edge/internal/ops/docs_test.go.)

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
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

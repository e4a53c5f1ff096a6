package policy

import (
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// memFiles is an Options whose files live in a map.
func memFiles(files map[string]string) Options {
	return Options{
		ReadFile: func(name string) ([]byte, error) {
			if s, ok := files[filepath.ToSlash(name)]; ok {
				return []byte(s), nil
			}
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		},
		Glob: func(pattern string) ([]string, error) {
			var out []string
			for name := range files {
				if ok, _ := filepath.Match(filepath.ToSlash(pattern), name); ok {
					out = append(out, name)
				}
			}
			slices.Sort(out)
			return out, nil
		},
	}
}

// TestImportPaths: a relative import is read next to the importing file,
// else from the working directory, as Anubis reads it; the error names
// both.
func TestImportPaths(t *testing.T) {
	t.Parallel()
	opts := memFiles(map[string]string{
		"etc/near.yaml":          "bots:\n  - import: ./rules/a.yaml\n",
		"etc/rules/a.yaml":       "- {name: near, user_agent_regex: AAA, action: DENY}\n",
		"rules/a.yaml":           "- {name: cwd, user_agent_regex: AAA, action: DENY}\n",
		"etc/cwd.yaml":           "bots:\n  - import: ./testdata/b.yaml\n",
		"testdata/b.yaml":        "- {name: from-cwd, user_agent_regex: BBB, action: DENY}\n",
		"etc/missing.yaml":       "bots:\n  - import: ./nowhere/c.yaml\n",
		"etc/glob.yaml":          "bots:\n  - import: ./globbed/*.yaml\n",
		"globbed/one.yaml":       "- {name: g1, user_agent_regex: G1, action: DENY}\n",
		"globbed/two.yaml":       "- {name: g2, user_agent_regex: G2, action: DENY}\n",
		"etc/noglob.yaml":        "bots:\n  - import: ./none/*.yaml\n",
		"etc/builtin-notes.yaml": "bots:\n  - import: (builtin)/hosting-asns.txt\n",
	})
	tests := []struct {
		file  string
		rules []string
		err   []string
	}{
		{"etc/near.yaml", []string{"near"}, nil},
		{"etc/cwd.yaml", []string{"from-cwd"}, nil},
		{"etc/glob.yaml", []string{"g1", "g2"}, nil},
		{"etc/missing.yaml", nil, []string{"etc/missing.yaml:2: ./nowhere/c.yaml not found; tried etc/nowhere/c.yaml (next to etc/missing.yaml) and nowhere/c.yaml (the working directory)", "file does not exist"}},
		{"etc/noglob.yaml", nil, []string{"./none/*.yaml matches no file; tried etc/none/*.yaml (next to etc/noglob.yaml) and none/*.yaml (the working directory)"}},
		{"etc/builtin-notes.yaml", nil, []string{"(builtin)/hosting-asns.txt", "built in: (builtin)/default.yaml, (builtin)/ai-crawlers.yaml"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			p, err := Load(tt.file, opts)
			if tt.err != nil {
				if err == nil {
					t.Fatal("loaded")
				}
				for _, want := range tt.err {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error lacks %q:\n%v", want, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range p.Rules() {
				got = append(got, r.Name)
			}
			if !slices.Equal(got, tt.rules) {
				t.Errorf("rules %q, want %q", got, tt.rules)
			}
		})
	}
}

// TestImportDefaultPolicy: a policy extends the default policy with one
// import: its own rules first, the default's rules, signals and
// thresholds after, its own sections winning.
func TestImportDefaultPolicy(t *testing.T) {
	t.Parallel()
	def := mustDefault(t)
	tests := []struct {
		name  string
		src   string
		check func(t *testing.T, p *Policy)
	}{
		{"extend", "bots:\n  - {name: no-ccbot, user_agent_regex: CCBot, action: DENY}\n  - import: (builtin)/default.yaml\n", func(t *testing.T, p *Policy) {
			if got, want := len(p.Rules()), len(def.Rules())+1; got != want {
				t.Errorf("%d rules, want %d", got, want)
			}
			if p.Rules()[0].Name != "no-ccbot" {
				t.Errorf("first rule %q", p.Rules()[0].Name)
			}
			if p.WaitMaxWeight() != 20 || p.weights != def.weights {
				t.Errorf("thresholds or signals not the default's: wait %d, weights %v", p.WaitMaxWeight(), p.weights)
			}
			r := curlRequest("CCBot/2.0 (https://commoncrawl.org/faq/)")
			r.CrawlerVerified = CrawlerVerified
			if d := p.Evaluate(r); d.Action != DENY || d.Rule != "no-ccbot" {
				t.Errorf("verified CCBot: %s %q, want DENY no-ccbot", d.Action, d.Rule)
			}
			if d := p.Evaluate(chromeRequest()); d.Action != CHALLENGE || d.Rule != "browser" {
				t.Errorf("chrome: %s %q, want the default's CHALLENGE browser", d.Action, d.Rule)
			}
		}},
		{"own signals and thresholds win", "bots:\n  - import: (builtin)/default.yaml\nsignals: {headless: 45, hosting_asn: off}\nstatus_codes: {CHALLENGE: 401}\nthresholds: [{name: mine, expression: weight < 5, action: ALLOW}, {name: rest, expression: 'true', action: CHALLENGE, challenge: {bits: 16}}]\n", func(t *testing.T, p *Policy) {
			if p.weights[SignalHeadless] != 45 || p.weights[SignalUATLSMismatch] != 30 || p.off != 1<<SignalHostingASN {
				t.Errorf("weights %v off %b", p.weights, p.off)
			}
			if len(p.thresholds) != 2 || p.thresholds[0].name != "mine" {
				t.Errorf("thresholds not the file's own")
			}
			if c, d := p.StatusCodes(); c != 401 || d != 0 {
				t.Errorf("StatusCodes %d %d", c, d)
			}
		}},
		{"a list import brings rules only", "bots:\n  - import: (builtin)/ai-crawlers.yaml\n", func(t *testing.T, p *Policy) {
			if p.thresholds[0].name != "legacy-anubis-behaviour" {
				t.Errorf("thresholds %q, want Anubis's default", p.thresholds[0].name)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := mustParse(t, tt.src)
			tt.check(t, p)
		})
	}
}

func TestImportTwoPolicies(t *testing.T) {
	t.Parallel()
	opts := memFiles(map[string]string{
		"a.yaml": "bots: [{name: a, path_regex: ^/a, action: DENY}]\nthresholds: [{name: from-a, expression: 'true', action: DENY}]\nsignals: {headless: 1}\n",
		"b.yaml": "bots: [{name: b, path_regex: ^/b, action: DENY}]\nthresholds: [{name: from-b, expression: 'true', action: ALLOW}]\nsignals: {headless: 2}\n",
		"p.yaml": "bots:\n  - import: a.yaml\n  - import: b.yaml\n",
	})
	p, err := Load("p.yaml", opts)
	if err != nil {
		t.Fatal(err)
	}
	if p.thresholds[0].name != "from-a" {
		t.Errorf("threshold %q, want the first import's", p.thresholds[0].name)
	}
	if p.weights[SignalHeadless] != 2 {
		t.Errorf("headless weight %d, want the later import's 2", p.weights[SignalHeadless])
	}
	if !slices.ContainsFunc(p.Warnings(), func(w string) bool {
		return strings.Contains(w, "b.yaml:2: thresholds of a second imported policy ignored")
	}) {
		t.Errorf("no warning about b.yaml's thresholds: %v", p.Warnings())
	}
}

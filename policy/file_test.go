package policy

import (
	"bufio"
	"bytes"
	"errors"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestGoodFiles(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/good/*.*")
	if err != nil || len(files) == 0 {
		t.Fatal(files, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			p, err := Load(f, Options{})
			if err != nil {
				t.Fatal(err)
			}
			q, err := Load(f, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if p.Version() != q.Version() || len(p.Version()) != 16 {
				t.Errorf("Version not stable: %q, %q", p.Version(), q.Version())
			}
			if !slices.Equal(p.Rules(), q.Rules()) {
				t.Errorf("rule identities differ between loads")
			}
		})
	}
}

func TestBadFiles(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/bad/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatal(files, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			first, _, _ := bytes.Cut(data, []byte("\n"))
			line, want, ok := strings.Cut(strings.TrimPrefix(string(first), "# want: "), " ")
			if !ok {
				t.Fatalf("first line %q is not # want: LINE text", first)
			}
			_, err = Load(f, Options{})
			if err == nil {
				t.Fatal("Load succeeded, want an error")
			}
			if !errors.Is(err, ErrSyntax) && !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrImport) {
				t.Errorf("error %v wraps none of the package's errors", err)
			}
			if at := f + ":" + line + ":"; !strings.Contains(err.Error(), at) {
				t.Errorf("error does not name %s:\n%v", at, err)
			}
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error lacks %q:\n%v", want, err)
			}
		})
	}
}

// TestAnubisExamples loads the examples of Anubis's documentation and
// checks that they decide as the documentation says.
func TestAnubisExamples(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file   string
		edit   func(r *Request)
		want   Action
		rule   string
		chal   Challenge
		weight int
	}{
		{"anubis-minimal.yaml", func(r *Request) { r.Header.Set("CF-Worker", "evil.workers.dev") }, DENY, "cloudflare-workers", Challenge{}, 0},
		{"anubis-minimal.yaml", func(r *Request) { r.Path = "/.well-known/openid-configuration" }, ALLOW, "well-known", Challenge{}, 0},
		{"anubis-minimal.yaml", func(r *Request) { r.Path = "/favicon.ico" }, ALLOW, "favicon", Challenge{}, 0},
		{"anubis-minimal.yaml", func(r *Request) { r.Path = "/robots.txt" }, ALLOW, "robots-txt", Challenge{}, 0},
		{"anubis-minimal.yaml", nil, CHALLENGE, "generic-browser", Challenge{"pow", 16}, 0},
		{"anubis-minimal.yaml", func(r *Request) { r.Header.Set("User-Agent", "curl/8.5.0") }, ALLOW, "", Challenge{}, 0},
		{"anubis-minimal.json", func(r *Request) { r.Header.Set("User-Agent", "Mozilla/5.0 (compatible; Amazonbot/0.1)") }, DENY, "amazonbot", Challenge{}, 0},
		{"anubis-minimal.json", nil, CHALLENGE, "generic-browser", Challenge{"pow", 16}, 0},
		{"anubis-rules.yaml", func(r *Request) {
			r.Header.Set("User-Agent", "Mozilla/5.0 (compatible; Qwantbot/1.0_1234567; +https://help.qwant.com/bot/)")
			r.RemoteAddr = netip.MustParseAddr("91.242.162.10")
		}, ALLOW, "qwantbot", Challenge{}, 0},
		{"anubis-rules.yaml", func(r *Request) {
			r.Header.Set("User-Agent", "Mozilla/5.0 (compatible; Qwantbot/1.0_1234567; +https://help.qwant.com/bot/)")
		}, CHALLENGE, "generic-bot-catchall", Challenge{"pow", 64}, 0},
		{"anubis-rules.yaml", func(r *Request) { r.RemoteAddr = netip.MustParseAddr("100.100.1.1") }, ALLOW, "internal-network", Challenge{}, 0},
		{"anubis-rules.yaml", func(r *Request) { r.Path = "/api/v1/x"; r.Header.Set("Accept", "application/json") }, ALLOW, "allow-api-requests", Challenge{}, 0},
		{"anubis-rules.yaml", func(r *Request) { r.Header.Del("User-Agent") }, DENY, "no-user-agent-string", Challenge{}, 0},
		{"anubis-rules.yaml", func(r *Request) { r.RemoteAddr = netip.MustParseAddr("1.1.1.1") }, DENY, "known-banned-user", Challenge{}, 0},
		{"anubis-rules.yaml", func(r *Request) {
			r.Header.Set("User-Agent", "Go-http-client/1.1")
			r.RawQuery = "go-get=1"
		}, ALLOW, "go-get", Challenge{}, 0},
		{"anubis-rules.yaml", func(r *Request) { r.Path = "/about" }, ALLOW, "two-path-segments-no-query", Challenge{}, 0},
		// Mozilla: +10; moderate-suspicion is fast, difficulty 2.
		{"anubis-rules.yaml", nil, CHALLENGE, "moderate-suspicion", Challenge{"pow", 8}, 10},
		// The gitea cookie takes 5 off.
		{"anubis-rules.yaml", func(r *Request) { r.Header.Set("Cookie", "i_love_gitea=1") }, CHALLENGE, "mild-suspicion", Challenge{"metarefresh", 4}, 5},
		// An old Chrome without client hints weighs 10 more.
		{"anubis-rules.yaml", func(r *Request) {
			r.Header.Set("User-Agent", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/58.0.0.0 Safari/537.36")
			r.Header.Del("Sec-Ch-Ua")
		}, CHALLENGE, "extreme-suspicion", Challenge{"pow", 16}, 20},
		{"anubis-default-local.yaml", nil, CHALLENGE, "moderate-suspicion", Challenge{"pow", 4}, 10},
		{"anubis-deny-and-reroute.yaml", func(r *Request) { r.Header.Set("User-Agent", uaGPTBot) }, DENY, "ai-scrapers-tarpit", Challenge{}, 0},
		{"anubis-deny-and-reroute.yaml", nil, CHALLENGE, "legacy-anubis-behaviour", Challenge{"pow", 20}, 0},
		{"anubis-default-local.yaml", func(r *Request) { r.Header.Set("User-Agent", uaGPTBot) }, DENY, "ai-crawlers", Challenge{}, 0},
		{"anubis-default-local.yaml", func(r *Request) { r.Header.Set("User-Agent", "curl/8.5.0") }, ALLOW, "minimal-suspicion", Challenge{}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.file+"/"+tt.rule, func(t *testing.T) {
			t.Parallel()
			p, err := Load("testdata/good/"+tt.file, Options{})
			if err != nil {
				t.Fatal(err)
			}
			r := chromeRequest()
			if tt.edit != nil {
				tt.edit(r)
			}
			d := p.Evaluate(r)
			if d.Action != tt.want || d.Rule != tt.rule || d.Challenge != tt.chal || d.Weight != tt.weight {
				t.Errorf("got %s %q %+v weight %d, want %s %q %+v weight %d\n%s",
					d.Action, d.Rule, d.Challenge, d.Weight, tt.want, tt.rule, tt.chal, tt.weight, p.Explain(r))
			}
		})
	}
}

func TestAnubisWarnings(t *testing.T) {
	t.Parallel()
	p, err := Load("testdata/good/anubis-default-local.yaml", Options{})
	if err != nil {
		t.Fatal(err)
	}
	ws := p.Warnings()
	// dnsbl: false and a disabled openGraph ask for nothing Maat leaves
	// out, and give no warning.
	for _, quiet := range []string{"dnsbl", "openGraph"} {
		for _, w := range ws {
			if strings.Contains(w, quiet) {
				t.Errorf("warning names %q, which asks for nothing: %s", quiet, w)
			}
		}
	}
	for _, want := range []string{"logging", "store",
		`"countries-with-aggressive-scrapers": geoip: needs a country database (geo.country_db`,
		`"aggressive-asns-without-functional-abuse-contact": asns: needs an ASN database (geo.asn_db`, "preact"} {
		n := 0
		for _, w := range ws {
			if strings.Contains(w, want) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d warnings name %q, want 1:\n%s", n, want, strings.Join(ws, "\n"))
		}
	}
	for _, w := range ws {
		if !strings.HasPrefix(w, "testdata/good/anubis-default-local.yaml:") {
			t.Errorf("warning %q does not name file:line", w)
		}
	}
	if c, d := p.StatusCodes(); c != 200 || d != 200 {
		t.Errorf("StatusCodes = %d, %d; want Anubis's 200, 200", c, d)
	}
	// Without geo databases the geo rules load and never match; with them
	// they weigh.
	r := chromeRequest()
	r.ASN, r.Country = 13335, "BR"
	if d := p.Evaluate(r); slices.Contains(names(&d), "countries-with-aggressive-scrapers") {
		t.Errorf("a geoip rule matched without a country database: %v", names(&d))
	}
	g, err := Load("testdata/good/anubis-default-local.yaml", Options{Geo: Geo{ASN: true, Country: true}})
	if err != nil {
		t.Fatal(err)
	}
	d := g.Evaluate(r)
	if got := names(&d); !slices.Contains(got, "countries-with-aggressive-scrapers") || !slices.Contains(got, "aggressive-asns-without-functional-abuse-contact") {
		t.Errorf("geo rules did not weigh with databases: %v", got)
	}
	for _, w := range g.Warnings() {
		if strings.Contains(w, "geo.") {
			t.Errorf("warning with databases: %s", w)
		}
	}
}

func TestImports(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"etc/policy.yaml":   "bots:\n  - import: rules/*.yaml\n  - import: /abs/one.yaml\n  - {name: tail, path_regex: ^/, action: ALLOW}\n",
		"etc/rules/a.yaml":  "- {name: a, user_agent_regex: AAA, action: DENY}\n",
		"etc/rules/b.yaml":  "bots:\n  - {name: b, user_agent_regex: BBB, action: DENY}\n  - import: ../nested.yaml\n",
		"etc/nested.yaml":   "- {name: nested, user_agent_regex: NNN, action: DENY}\n",
		"/abs/one.yaml":     "- {name: abs, user_agent_regex: ONE, action: DENY}\n",
		"etc/loop.yaml":     "bots:\n  - import: loop2.yaml\n",
		"etc/loop2.yaml":    "- import: loop.yaml\n",
		"etc/builtin.yaml":  "bots:\n  - import: (builtin)/ai-crawlers.yaml\n",
		"etc/nobuilt.yaml":  "bots:\n  - import: (builtin)/nope.yaml\n",
		"etc/noglob.yaml":   "bots:\n  - import: none/*.yaml\n",
		"etc/badchild.yaml": "bots:\n  - import: rules/bad.yml\n",
		"etc/rules/bad.yml": "- {name: bad, action: DENY}\n",
	}
	opts := Options{
		ReadFile: func(name string) ([]byte, error) {
			if s, ok := files[filepath.ToSlash(name)]; ok {
				return []byte(s), nil
			}
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		},
		Glob: func(pattern string) ([]string, error) {
			var out []string
			for name := range files {
				if ok, _ := filepath.Match(pattern, name); ok {
					out = append(out, name)
				}
			}
			slices.Sort(out)
			return out, nil
		},
	}
	tests := []struct {
		file  string
		rules []string
		err   string
	}{
		{"etc/policy.yaml", []string{"a", "b", "nested", "abs", "tail"}, ""},
		{"etc/builtin.yaml", []string{"ai-crawlers"}, ""},
		{"etc/loop.yaml", nil, "etc/loop2.yaml:1: import cycle through etc/loop.yaml"},
		{"etc/nobuilt.yaml", nil, "etc/nobuilt.yaml:2: import"},
		{"etc/noglob.yaml", nil, "matches no file"},
		{"etc/badchild.yaml", nil, `etc/rules/bad.yml:1: rule "bad": no matcher`},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			p, err := Load(tt.file, opts)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
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
				t.Errorf("rules = %q, want %q", got, tt.rules)
			}
		})
	}
}

func TestRuleIdentity(t *testing.T) {
	t.Parallel()
	a := mustParse(t, "bots:\n- {name: x, path_regex: ^/a, action: DENY}\n- {name: y, path_regex: ^/b, action: DENY}")
	b := mustParse(t, "# a comment moves lines\nbots:\n\n- name: x\n  action: DENY\n  path_regex: ^/a\n- {name: y, path_regex: ^/b, action: DENY}")
	c := mustParse(t, "bots:\n- {name: x, path_regex: ^/a, action: DENY}\n- {name: y, path_regex: ^/c, action: DENY}")
	ra, rb, rc := a.Rules(), b.Rules(), c.Rules()
	if ra[0].ID != rb[0].ID || ra[1].ID != rb[1].ID || a.Version() != b.Version() {
		t.Errorf("same content, different identity: %v %v", ra, rb)
	}
	if ra[1].ID == rc[1].ID || a.Version() == c.Version() {
		t.Errorf("different content, same identity: %v %v", ra, rc)
	}
	if ra[0].ID != rc[0].ID {
		t.Errorf("an unchanged rule changed identity")
	}
}

func TestUnknownKeysWarn(t *testing.T) {
	t.Parallel()
	p := mustParse(t, "bots:\n- {name: x, path_regex: ^/a, action: DENY, colour: red}\nfrobnicate: 1\n")
	ws := strings.Join(p.Warnings(), "\n")
	for _, want := range []string{`test.yaml:2: rule "x": unknown key "colour"`, `test.yaml:3: unknown section "frobnicate"`} {
		if !strings.Contains(ws, want) {
			t.Errorf("warnings lack %q:\n%s", want, ws)
		}
	}
}

// TestStrictUnknownKeys: with Options.Strict every unknown key is an
// error naming its file:line, all at once, and no warning; an Anubis-only
// section stays a warning (it is known, and ignored).
func TestStrictUnknownKeys(t *testing.T) {
	t.Parallel()
	src := "bots:\n- {name: x, path_regex: ^/a, action: DENY, colour: red}\nfrobnicate: 1\nstatus_codes: {CHALENGE: 200}\n"
	_, err := Parse("test.yaml", []byte(src), Options{Strict: true})
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("strict: err = %v, want ErrInvalid", err)
	}
	for _, want := range []string{`test.yaml:2: rule "x": unknown key "colour"`, `test.yaml:3: unknown section "frobnicate"`,
		`test.yaml:4: status_codes: unknown key "CHALENGE" (CHALLENGE, DENY)`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "ignored") {
		t.Errorf("a strict error says the key is ignored: %v", err)
	}
	p, err := Parse("test.yaml", []byte(src), Options{})
	if err != nil {
		t.Fatalf("lenient: %v", err)
	}
	if len(p.Warnings()) != 3 {
		t.Errorf("lenient: warnings %q; want 3", p.Warnings())
	}
	p, err = Parse("test.yaml", []byte("bots:\n- {name: x, path_regex: ^/a, action: DENY}\nlogging: {level: info}\n"), Options{Strict: true})
	if err != nil {
		t.Fatalf("strict, Anubis-only section: %v", err)
	}
	if len(p.Warnings()) != 1 {
		t.Errorf("strict, Anubis-only section: warnings %q; want one", p.Warnings())
	}
}

func TestDefaultPolicyYAML(t *testing.T) {
	t.Parallel()
	sc := bufio.NewScanner(bytes.NewReader(DefaultPolicyYAML()))
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), "#") {
		t.Error("default policy does not start with its comment")
	}
	if len(BuiltinLists()) < 5 {
		t.Errorf("BuiltinLists = %v", BuiltinLists())
	}
	if w := mustDefault(t).Warnings(); len(w) != 0 {
		t.Errorf("default policy warns: %v", w)
	}
}

// TestDocExample parses the policy the package documentation shows.
func TestDocExample(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var yml strings.Builder
	for _, line := range strings.Split(string(src), "\n") {
		if s, ok := strings.CutPrefix(line, "//\t"); ok {
			yml.WriteString(s + "\n")
		}
	}
	opts := Options{
		ReadFile:      func(string) ([]byte, error) { return []byte("- {name: x, path_regex: ^/x, action: DENY}"), nil },
		Glob:          func(string) ([]string, error) { return []string{"rules/x.yaml"}, nil },
		Geo:           Geo{ASN: true, Country: true},
		DivertTargets: []string{"tarpit"},
	}
	p, err := Parse("doc.yaml", []byte(yml.String()), opts)
	if err != nil {
		t.Fatalf("%v\n%s", err, yml.String())
	}
	if len(p.Rules()) != 4 || len(p.thresholds) != 3 || len(p.Warnings()) != 0 {
		t.Errorf("rules %v thresholds %d warnings %v", p.Rules(), len(p.thresholds), p.Warnings())
	}
}

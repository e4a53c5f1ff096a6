package policy

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestAnubisTestdata loads Anubis's own policy test files
// (testdata/anubis, see its README) as Anubis's tests do, from the
// package directory: the good ones load (Anubis-only sections warn), the
// bad ones are refused with an error that names file and line and says why.
func TestAnubisTestdata(t *testing.T) {
	t.Parallel()
	good, err := filepath.Glob("testdata/anubis/good/*")
	if err != nil || len(good) < 30 {
		t.Fatalf("good files: %v %v", good, err)
	}
	for _, f := range good {
		t.Run("good/"+filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			p, err := Load(f, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Rules()) == 0 {
				t.Error("no rules")
			}
			for _, w := range p.Warnings() {
				if !strings.HasPrefix(w, f+":") {
					t.Errorf("warning does not name the file: %s", w)
				}
			}
		})
	}
	// Why Anubis refuses each bad file, as Maat says it; every error must
	// also name file:line.
	bad := map[string]string{
		"badregexes.json":                            "path_regex: error parsing regexp",
		"badregexes.yaml":                            "user_agent_regex: error parsing regexp",
		"deny_and_reroute_invalid_url.json":          `reroute_to: "not-a-valid-url" is not an absolute`,
		"deny_and_reroute_missing_url.yaml":          "DENY_AND_REROUTE needs reroute_to",
		"dns-ttl-custom.yaml":                        `dns_ttl: forward: "60.0" is not a whole number`,
		"import_and_bot.json":                        "either imports or defines",
		"import_and_bot.yaml":                        "either imports or defines",
		"honeypot-empty-implementation.yaml":         `honeypot: implementation: "" is not one of Anubis's (naive)`,
		"honeypot-invalid-implementation.json":       `honeypot: implementation: "sophisticated" is not one of Anubis's`,
		"honeypot-invalid-implementation.yaml":       `honeypot: implementation: "sophisticated" is not one of Anubis's`,
		"import-invalid-pattern.yaml":                "matches none of the files of Anubis v1.27.0's policy tree",
		"import-no-match.yaml":                       "(data)/bots/never-matches/*.yaml matches none of the files",
		"import_invalid_file.json":                   "(data)/does-not-exist-fake-file.yaml is not a file of Anubis v1.27.0's policy tree",
		"import_invalid_file.yaml":                   "(data)/does-not-exist-fake-file.yaml is not a file of Anubis v1.27.0's policy tree",
		"impressum-no-footer.yaml":                   "impressum: footer: missing",
		"impressum-no-page-contents.yaml":            "impressum: page: title: missing",
		"invalid.json":                               "name: is required",
		"invalid.yaml":                               "bots: has no rules",
		"nobots.json":                                "no bots: section",
		"nobots.yaml":                                "no bots: section",
		"opengraph_bad_ttl.yaml":                     `openGraph: ttl: "taco" is not a duration`,
		"regex_ends_newline.json":                    "user_agent_regex ends with a newline",
		"status-codes-0.json":                        `CHALLENGE: "0" is not an HTTP status code`,
		"threshold-challenge-without-challenge.yaml": `action "WEIGH": want ALLOW, DENY, CHALLENGE or DIVERT`,
		"thresholds.yaml":                            `action "WEIGH": want ALLOW, DENY, CHALLENGE or DIVERT`,
		"unparseable.json":                           "did not find expected node content",
		"unparseable.yaml":                           "did not find expected node content",
		"logging-invalid-sink.yaml":                  `unknown sink "nope"`,
		"logging-no-parameters.yaml":                 "sink file needs parameters",
		"metrics-invalid-net.yaml":                   `unknown network "taco"`,
		"multiple_expression_types.json":             "more than one of all:, any: and a string",
		"multiple_expression_types.yaml":             "more than one of all:, any: and a string",
		"opengraph_no_ogtitle.yaml":                  "lacks og:title",
		"regex_ends_newline.yaml":                    `user_agent_regex ends with a newline`,
		"remote-and-dynamic.yaml":                    "remote_addresses or dynamic_remote_addresses, not both",
		"status-codes-0.yaml":                        `CHALLENGE: "0" is not an HTTP status code`,
	}
	files, err := filepath.Glob("testdata/anubis/bad/*")
	if err != nil || len(files) != len(bad) {
		t.Fatalf("bad files %v, want the %d of the table", files, len(bad))
	}
	fileLine := regexp.MustCompile(`testdata/anubis/bad/[^:]+:[0-9]+: `)
	for _, f := range files {
		t.Run("bad/"+filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			why, ok := bad[filepath.Base(f)]
			if !ok {
				t.Fatal("not in the table")
			}
			_, err := Load(f, Options{})
			if err == nil {
				t.Fatal("loaded; Anubis refuses it")
			}
			if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrImport) && !errors.Is(err, ErrSyntax) {
				t.Errorf("error wraps none of the package's errors: %v", err)
			}
			if !strings.Contains(err.Error(), f+":") || !fileLine.MatchString(err.Error()) {
				t.Errorf("error does not name file:line:\n%v", err)
			}
			if !strings.Contains(err.Error(), why) {
				t.Errorf("error lacks %q:\n%v", why, err)
			}
		})
	}
}

// TestAnubisNewlineRegexes checks every regex of Anubis's
// regex_ends_newline.yaml is refused at its own line, with the fix.
func TestAnubisNewlineRegexes(t *testing.T) {
	t.Parallel()
	const f = "testdata/anubis/bad/regex_ends_newline.yaml"
	_, err := Load(f, Options{})
	if err == nil {
		t.Fatal("loaded")
	}
	for _, want := range []string{
		f + `:4: rule "user-agent-ends-newline": user_agent_regex ends with a newline`,
		f + `:9: rule "path-ends-newline": path_regex ends with a newline`,
		f + `:15: rule "headers-ends-newline": headers_regex CF-Worker ends with a newline`,
		`write ">-" or quote the expression`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// TestAnubisBehaviour checks that Anubis's test files decide as Anubis
// does where Maat can do the same.
func TestAnubisBehaviour(t *testing.T) {
	t.Parallel()
	geo := Options{Geo: Geo{ASN: true, Country: true}}
	tests := []struct {
		name      string
		file      string
		opts      Options
		edit      func(r *Request)
		want      Action
		rule      string
		rerouteTo string
	}{
		{"reroute", "deny_and_reroute_test.yaml", Options{}, func(r *Request) { r.Header.Set("User-Agent", "REROUTE_ME") }, DENY, "reroute-bot", "https://example.com/tarpit"},
		{"plain deny", "deny_and_reroute_test.yaml", Options{}, func(r *Request) { r.Header.Set("User-Agent", "DENY_ME") }, DENY, "deny-bot", ""},
		{"allow", "deny_and_reroute_test.yaml", Options{}, func(r *Request) { r.Header.Set("User-Agent", "ALLOW_ME") }, ALLOW, "allow-bot", ""},
		{"reroute GPTBot", "deny_and_reroute_basic.yaml", Options{}, func(r *Request) { r.Header.Set("User-Agent", uaGPTBot) }, DENY, "ai-scrapers-tarpit", "https://example.com/tarpit"},
		{"reroute json", "deny_and_reroute_basic.json", Options{}, func(r *Request) { r.Header.Set("User-Agent", "ChatGPT-User/1.0") }, DENY, "ai-scrapers-tarpit", "https://example.com/tarpit"},
		{"reroute to localhost", "deny_and_reroute_mixed.yaml", Options{}, func(r *Request) { r.Header.Set("User-Agent", "ScrapingBot/1") }, DENY, "reroute-scrapers", "http://localhost:8080/poison"},
		{"asns with a database", "challenge_cloudflare.yaml", geo, func(r *Request) { r.ASN = 13335 }, CHALLENGE, "challenge-cloudflare", ""},
		{"asns, another AS", "challenge_cloudflare.yaml", geo, func(r *Request) { r.ASN = 3320 }, ALLOW, "", ""},
		{"asns without a database", "challenge_cloudflare.yaml", Options{}, func(r *Request) { r.ASN = 13335 }, ALLOW, "", ""},
		{"geoip with a database", "geoip_us.yaml", geo, func(r *Request) { r.Country = "US" }, CHALLENGE, "compute-tarrif-us", ""},
		{"geoip, another country", "geoip_us.yaml", geo, func(r *Request) { r.Country = "DE" }, ALLOW, "", ""},
		{"import from the working directory", "import_filesystem.yaml", Options{}, func(r *Request) { r.Path = "/.well-known/security.txt" }, ALLOW, "well-known", ""},
		{"import json from the working directory", "import_filesystem.json", Options{}, func(r *Request) { r.RemoteAddr = mustAddr("fd00::1") }, ALLOW, "ipv6-ula", ""},
		{"(data) keep-internet-working", "import_keep_internet_working.yaml", Options{}, func(r *Request) { r.Path = "/robots.txt" }, ALLOW, "robots-txt", ""},
		{"(data)/bots/*", "import-all-bots.yaml", Options{}, func(r *Request) { r.Header.Set("User-Agent", uaGPTBot) }, DENY, "ai-robots-txt", ""},
		// thresholds: [] is Anubis's default thresholds: weight above zero
		// is challenged.
		{"no thresholds", "no-thresholds.yaml", Options{}, nil, CHALLENGE, "legacy-anubis-behaviour", ""},
		{"thresholds", "thresholds.yaml", Options{}, nil, CHALLENGE, "mild-suspicion", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := Load("testdata/anubis/good/"+tt.file, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			r := chromeRequest()
			if tt.edit != nil {
				tt.edit(r)
			}
			d := p.Evaluate(r)
			if d.Action != tt.want || d.Rule != tt.rule || d.RerouteTo != tt.rerouteTo {
				t.Errorf("got %s %q reroute %q, want %s %q reroute %q\n%s", d.Action, d.Rule, d.RerouteTo, tt.want, tt.rule, tt.rerouteTo, p.Explain(r))
			}
		})
	}
}

func TestAnubisStatusCodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file            string
		challenge, deny int
	}{
		{"status-codes-paranoid.yaml", 200, 200},
		{"status-codes-paranoid.json", 200, 200},
		{"status-codes-rfc.yaml", 403, 403},
		{"status-codes-rfc.json", 403, 403},
		{"deny_and_reroute_basic.yaml", 200, 403},
		{"challengemozilla.yaml", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			p, err := Load("testdata/anubis/good/"+tt.file, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if c, d := p.StatusCodes(); c != tt.challenge || d != tt.deny {
				t.Errorf("StatusCodes = %d, %d, want %d, %d", c, d, tt.challenge, tt.deny)
			}
		})
	}
}

// TestAnubisDataImports: a (data)/ import reads Anubis's own file from the
// copy Maat ships, with its rules and names, and says nothing about it.
func TestAnubisDataImports(t *testing.T) {
	t.Parallel()
	const f = "testdata/anubis/good/import_keep_internet_working.yaml"
	p, err := Load(f, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range p.Rules() {
		got = append(got, r.Name+" "+r.Source)
	}
	want := []string{
		"well-known (data)/common/keep-internet-working.yaml:2",
		"favicon (data)/common/keep-internet-working.yaml:5",
		"robots-txt (data)/common/keep-internet-working.yaml:8",
		"sitemap (data)/common/keep-internet-working.yaml:11",
	}
	if !slices.Equal(got, want) {
		t.Errorf("rules\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, w := range p.Warnings() {
		if strings.Contains(w, "(data)") {
			t.Errorf("warning about the import: %s", w)
		}
	}
}

// TestAnubisReadmeNamesEveryFile keeps testdata/anubis/README.md honest
// about where each file comes from.
func TestAnubisReadmeNamesEveryFile(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("testdata/anubis/README.md")
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("testdata/anubis/*/*")
	for _, f := range files {
		if !strings.Contains(string(readme), filepath.ToSlash(strings.TrimPrefix(f, "testdata/anubis/"))) {
			t.Errorf("README.md does not name %s", f)
		}
	}
}

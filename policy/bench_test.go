package policy

import (
	"fmt"
	"strings"
	"testing"
)

func BenchmarkEvaluateDefaultBrowser(b *testing.B) {
	p := mustDefault(b)
	r := chromeRequest()
	b.ReportAllocs()
	for b.Loop() {
		p.Evaluate(r)
	}
}

func BenchmarkEvaluateDefaultCurl(b *testing.B) {
	p := mustDefault(b)
	r := curlRequest("curl/8.5.0")
	b.ReportAllocs()
	for b.Loop() {
		p.Evaluate(r)
	}
}

// BenchmarkEvaluateAnubisDefault evaluates a browser's request under
// Anubis's own default policy, botPolicies.yaml (its CEL rules run for
// every request that reaches them).
func BenchmarkEvaluateAnubisDefault(b *testing.B) {
	data, err := readAnubisData("botPolicies.yaml")
	if err != nil {
		b.Fatal(err)
	}
	p, err := Parse("(data)/botPolicies.yaml", data, Options{})
	if err != nil {
		b.Fatal(err)
	}
	r := chromeRequest()
	b.ReportAllocs()
	for b.Loop() {
		p.Evaluate(r)
	}
}

// generatedPolicy writes a policy of n rules of the kinds real policies
// hold: case-insensitive User-Agent alternations (bot lists), anchored
// User-Agent prefixes, path rules, header rules, address ranges and
// fingerprints, with WEIGH rules among them so that a browser request has
// to go through all of them.
func generatedPolicy(n int) string {
	var b strings.Builder
	b.WriteString("bots:\n")
	for i := range n {
		switch i % 8 {
		case 0:
			fmt.Fprintf(&b, "- {name: bots-%d, user_agent_regex: '(?i)scraperbot%dz|crawler%dx|fetchy%dq', action: DENY}\n", i, i, i, i)
		case 1:
			fmt.Fprintf(&b, "- {name: tool-%d, user_agent_regex: '^tool%d/[0-9]+', action: DENY}\n", i, i)
		case 2:
			fmt.Fprintf(&b, "- {name: path-%d, path_regex: '^/private%d/', action: CHALLENGE}\n", i, i)
		case 3:
			fmt.Fprintf(&b, "- {name: weigh-%d, user_agent_regex: 'Agent%d \\(compatible', action: WEIGH, weight: {adjust: 1}}\n", i, i)
		case 4:
			fmt.Fprintf(&b, "- {name: hdr-%d, headers_regex: {X-Client-%d: '.*'}, action: DENY}\n", i, i)
		case 5:
			fmt.Fprintf(&b, "- {name: net-%d, remote_addresses: [10.%d.%d.0/24], action: DENY}\n", i, i/256%256, i%256)
		case 6:
			fmt.Fprintf(&b, "- {name: ja4-%d, ja4: [t13d%04dh2_*], action: DENY}\n", i, i)
		case 7:
			fmt.Fprintf(&b, "- {name: ext-%d, path_regex: '\\.ext%d$', action: DENY}\n", i, i)
		}
	}
	b.WriteString("thresholds: [{name: t, expression: weight > 0, action: CHALLENGE, challenge: {bits: 16}}]\n")
	return b.String()
}

func TestGeneratedPolicy(t *testing.T) {
	t.Parallel()
	p := mustParse(t, generatedPolicy(1000))
	tests := []struct {
		ua, path string
		want     Action
		rule     string
	}{
		{uaChrome, "/wiki/Main_Page", ALLOW, ""},
		{"Mozilla/5.0 ScraperBot808Z/1.0", "/", DENY, "bots-808"},
		{"tool9/12", "/", DENY, "tool-9"},
		{"tool9/x", "/", ALLOW, ""},
		{uaChrome, "/private10/x", CHALLENGE, "path-10"},
		{uaChrome, "/a.ext999", DENY, "ext-999"},
		{"Agent11 (compatible)", "/", CHALLENGE, "t"},
	}
	for _, tt := range tests {
		r := chromeRequest()
		r.Header.Set("User-Agent", tt.ua)
		r.Path = tt.path
		d := p.Evaluate(r)
		if d.Action != tt.want || d.Rule != tt.rule {
			t.Errorf("%s %s: got %s %q, want %s %q", tt.ua, tt.path, d.Action, d.Rule, tt.want, tt.rule)
		}
	}
}

func BenchmarkEvaluate1000Rules(b *testing.B) {
	p := mustParse(b, generatedPolicy(1000))
	r := chromeRequest()
	b.ReportAllocs()
	for b.Loop() {
		p.Evaluate(r)
	}
}

func BenchmarkParseDefault(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Default(); err != nil {
			b.Fatal(err)
		}
	}
}

package policy

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestRerouteAndDivert(t *testing.T) {
	t.Parallel()
	src := `bots:
  - name: tarpit-ai
    user_agent_regex: GPTBot
    action: DIVERT
    divert_to: tarpit
  - name: anubis-reroute
    user_agent_regex: ClaudeBot
    action: DENY_AND_REROUTE
    reroute_to: https://example.org/poison
  - name: browsers
    user_agent_regex: Mozilla
    action: WEIGH
    weight: { adjust: 90 }
thresholds:
  - { name: ok, expression: weight <= 0, action: ALLOW }
  - { name: heavy, expression: weight >= 80, action: DIVERT, divert_to: maze }
  - { name: rest, expression: "true", action: CHALLENGE, challenge: { algorithm: fast, difficulty: 4 } }
`
	p := mustParse(t, src)
	tests := []struct {
		ua                 string
		action             Action
		rule, divert, dest string
	}{
		{"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)", DIVERT, "tarpit-ai", "tarpit", ""},
		{"ClaudeBot/1.0", DENY, "anubis-reroute", "", "https://example.org/poison"},
		{uaChrome, DIVERT, "heavy", "maze", ""},
		{"curl/8.5.0", ALLOW, "ok", "", ""},
	}
	for _, tt := range tests {
		r := curlRequest(tt.ua)
		d := p.Evaluate(r)
		if d.Action != tt.action || d.Rule != tt.rule || d.DivertTo != tt.divert || d.RerouteTo != tt.dest {
			t.Errorf("%s: got %s %q divert %q reroute %q, want %s %q %q %q", tt.ua, d.Action, d.Rule, d.DivertTo, d.RerouteTo, tt.action, tt.rule, tt.divert, tt.dest)
		}
		ex := p.Explain(r)
		if tt.divert != "" && !strings.Contains(ex, "decision: DIVERT weight=") || tt.divert != "" && !strings.Contains(ex, "divert_to="+tt.divert) {
			t.Errorf("Explain does not show the divert:\n%s", ex)
		}
		if tt.dest != "" && !strings.Contains(ex, "decision: DENY weight=0 reroute_to="+tt.dest) {
			t.Errorf("Explain does not show the reroute:\n%s", ex)
		}
	}
	want := []DivertTarget{{"tarpit", "test.yaml:2"}, {"maze", "test.yaml:16"}}
	if got := p.DivertTargets(); !slices.Equal(got, want) {
		t.Errorf("DivertTargets = %v, want %v", got, want)
	}
	var rules []RuleInfo
	for _, r := range p.Rules() {
		if r.DivertTo != "" || r.RerouteTo != "" {
			rules = append(rules, r)
		}
	}
	if len(rules) != 2 || rules[0].DivertTo != "tarpit" || rules[1].RerouteTo != "https://example.org/poison" || rules[1].Action != DENY {
		t.Errorf("Rules() = %+v", rules)
	}
	// The edge's targets are checked at load, with the rule's file:line.
	if _, err := Parse("test.yaml", []byte(src), Options{DivertTargets: []string{"tarpit", "maze"}}); err != nil {
		t.Errorf("with both targets: %v", err)
	}
	_, err := Parse("test.yaml", []byte(src), Options{DivertTargets: []string{"tarpit"}})
	if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `test.yaml:16: divert_to: "maze" is not a divert: target of the configuration (targets: tarpit)`) {
		t.Errorf("err = %v", err)
	}
}

func TestActionErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ rule, want string }{
		{"{name: r, path_regex: x, action: DIVERT}", "action DIVERT needs divert_to"},
		{"{name: r, path_regex: x, action: DENY, divert_to: tarpit}", "divert_to: is used only with action DIVERT, not DENY"},
		{"{name: r, path_regex: x, action: DIVERT, divert_to: 'a b'}", `divert_to: "a b" is not a target name`},
		{"{name: r, path_regex: x, action: DENY_AND_REROUTE}", "needs reroute_to"},
		{"{name: r, path_regex: x, action: DENY_AND_REROUTE, reroute_to: /relative}", `reroute_to: "/relative" is not an absolute http:// or https:// URL`},
		{"{name: r, path_regex: x, action: DENY_AND_REROUTE, reroute_to: 'javascript:alert(1)'}", "is not an absolute http:// or https:// URL"},
		{"{name: r, path_regex: x, action: NOPE}", `unknown action "NOPE"`},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			t.Parallel()
			_, err := Parse("test.yaml", []byte("bots: ["+tt.rule+"]"), Options{})
			if err == nil || !strings.Contains(err.Error(), "test.yaml:1: rule \"r\": ") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
	p := mustParse(t, "bots: [{name: r, path_regex: x, action: DENY, reroute_to: 'https://example.org/'}]")
	if !strings.Contains(strings.Join(p.Warnings(), "\n"), "reroute_to is used only with action DENY_AND_REROUTE") {
		t.Errorf("no warning for reroute_to on DENY: %v", p.Warnings())
	}
}

func TestStatusCodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		src             string
		challenge, deny int
		err             string
	}{
		{"", 0, 0, ""},
		{"status_codes: {CHALLENGE: 401, DENY: 451}", 401, 451, ""},
		{"status_codes: {DENY: 404}", 0, 404, ""},
		{"status_codes: {CHALLENGE: 99}", 0, 0, `test.yaml:2: status_codes: CHALLENGE: "99" is not an HTTP status code (100 to 599)`},
		{"status_codes: {DENY: 600}", 0, 0, `test.yaml:2: status_codes: DENY: "600"`},
		{"status_codes: {DENY: forbidden}", 0, 0, `"forbidden" is not an HTTP status code`},
		{"status_codes: 403", 0, 0, "status_codes: maps CHALLENGE and DENY"},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			t.Parallel()
			p, err := Parse("test.yaml", []byte("bots: [{name: r, path_regex: x, action: DENY}]\n"+tt.src), Options{})
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Errorf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c, d := p.StatusCodes(); c != tt.challenge || d != tt.deny {
				t.Errorf("StatusCodes = %d, %d, want %d, %d", c, d, tt.challenge, tt.deny)
			}
		})
	}
}

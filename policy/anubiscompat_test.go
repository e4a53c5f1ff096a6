package policy

import (
	"net/http"
	"strings"
	"testing"
)

// TestVerifyFCrDNS: Anubis's verifyFCrDNS(remoteAddress[, pattern]) as
// Anubis answers it (internal/dns VerifyFCrDNS), from Request.FCrDNS. An
// evaluation that reaches it before the lookup says so (NeedFCrDNS) and
// counts the call false; one that does not reach it asks for nothing.
func TestVerifyFCrDNS(t *testing.T) {
	t.Parallel()
	p := mustParse(t, `bots:
  - import: (data)/crawlers/yandexbot.yaml
  - name: any-ptr
    action: DENY
    expression:
      all:
        - userAgent == "any-ptr"
        - verifyFCrDNS(remoteAddress)
  - name: names
    action: DENY
    expression: 'userAgent == "names" && "spider.yandex.com" in reverseDNS(remoteAddress)'
`)
	const yandex = "Mozilla/5.0 (compatible; YandexBot/3.0; +http://yandex.com/bots)"
	confirmed := FCrDNS{Checked: true, Names: []string{"spider.yandex.com"}, Confirmed: true}
	tests := []struct {
		name     string
		ua       string
		fcrdns   FCrDNS
		needDNS  bool
		want     Action
		wantRule string
	}{
		{"not looked up yet", yandex, FCrDNS{}, true, ALLOW, ""},
		{"confirmed", yandex, confirmed, false, ALLOW, "yandexbot"},
		{"name of another domain", yandex, FCrDNS{Checked: true, Names: []string{"host.example.net"}, Confirmed: true}, false, ALLOW, ""},
		{"not confirmed", yandex, FCrDNS{Checked: true, Names: []string{"spider.yandex.com"}}, false, ALLOW, ""},
		{"no PTR record, with a pattern", yandex, FCrDNS{Checked: true}, false, ALLOW, ""},
		{"lookup failed", yandex, FCrDNS{Checked: true, Failed: true}, false, ALLOW, ""},
		{"no PTR record, without a pattern", "any-ptr", FCrDNS{Checked: true}, false, DENY, "any-ptr"},
		{"any confirmed name, without a pattern", "any-ptr", confirmed, false, DENY, "any-ptr"},
		{"unconfirmed, without a pattern", "any-ptr", FCrDNS{Checked: true, Names: []string{"x.example"}}, false, ALLOW, ""},
		{"reverseDNS", "names", confirmed, false, DENY, "names"},
		{"reverseDNS not looked up yet", "names", FCrDNS{}, true, ALLOW, ""},
		{"no DNS function reached", "curl/8.5.0", FCrDNS{}, false, ALLOW, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := curlRequest(tt.ua)
			r.FCrDNS = tt.fcrdns
			d := p.Evaluate(r)
			if d.NeedFCrDNS != tt.needDNS || d.Action != tt.want || d.Rule != tt.wantRule {
				t.Errorf("NeedFCrDNS %v %s %q, want %v %s %q\n%s", d.NeedFCrDNS, d.Action, d.Rule, tt.needDNS, tt.want, tt.wantRule, p.Explain(r))
			}
		})
	}
	for _, bad := range []struct{ expr, want string }{
		{`verifyFCrDNS("192.0.2.1")`, "verifyFCrDNS: the first argument must be remoteAddress"},
		{`size(reverseDNS(headers["X-Real-Ip"])) > 0`, "reverseDNS: the first argument must be remoteAddress"},
		{`verifyFCrDNS(remoteAddress, "(")`, `verifyFCrDNS: pattern "(": error parsing regexp`},
		{`lookupHost("example.org").size() > 0`, "lookupHost (Anubis v1.24.0)"},
	} {
		_, err := Parse("p.yaml", []byte("bots:\n  - name: x\n    action: DENY\n    expression: '"+bad.expr+"'\n"), Options{})
		if err == nil || !strings.Contains(err.Error(), bad.want) || !strings.Contains(err.Error(), `p.yaml:2: rule "x"`) {
			t.Errorf("%s: error %v, want p.yaml:2, the rule and %q", bad.expr, err, bad.want)
		}
	}
}

// TestAnubisCEL: Anubis's CEL environment, value for value: headers as
// net/http holds them (no Host; repeated values joined by ","), query
// likewise, missingHeader with the name as written, segments, regexSafe's
// escapes, arpaReverseIP, and the strings extension.
func TestAnubisCEL(t *testing.T) {
	t.Parallel()
	r := curlRequest("curl/8.5.0")
	r.Host = "example.org"
	r.Path = "/a/b/"
	r.RawQuery = "x=1&x=2&y="
	r.RemoteAddr = mustAddr("2001:db8::1")
	r.Header.Add("Accept", "text/html")
	r.Header.Set("X-Forwarded-For", "192.0.2.1")
	for _, tt := range []struct {
		expr string
		want bool
	}{
		{`headers["Accept"] == "*/*,text/html"`, true},
		{`"Host" in headers`, false},
		{`host == "example.org"`, true},
		{`query["x"] == "1,2" && query["y"] == ""`, true},
		{`missingHeader(headers, "Accept")`, false},
		{`missingHeader(headers, "accept")`, true},
		{`missingHeader(headers, "Cookie")`, true},
		{`segments(path) == ["a", "b", ""]`, true},
		{`regexSafe("a.b:c-d/e") == "a\\.b\\:c\\-d/e"`, true},
		{`arpaReverseIP("192.0.2.1") == "1.2.0.192"`, true},
		{`arpaReverseIP(remoteAddress).startsWith("1.0.0.0.0.0.0.0") && arpaReverseIP(remoteAddress).endsWith("8.b.d.0.1.0.0.2")`, true},
		{`userAgent.lowerAscii().split("/")[0] == "curl"`, true},
		{`"%s-%d".format(["a", 1]) == "a-1"`, true},
		{`headers["Missing"] == "x"`, false}, // a run-time error counts as false
	} {
		p := mustParse(t, "bots:\n  - name: x\n    action: DENY\n    expression: '"+strings.ReplaceAll(tt.expr, "'", "''")+"'\n")
		if got := p.Evaluate(r).Action == DENY; got != tt.want {
			t.Errorf("%s: %v, want %v", tt.expr, got, tt.want)
		}
	}
}

// TestAnubisHeadersRegex: headers_regex as Anubis matches it: the first
// value of the header, "" when it is missing, so that an expression that
// matches the empty string matches a missing header; ".*" alone asks for a
// present, non-empty header.
func TestAnubisHeadersRegex(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, re string
		header   http.Header
		want     bool
	}{
		{"missing, matches empty", "^$", nil, true},
		{"missing, optional", "^(json)?$", nil, true},
		{"missing, needs text", "json", nil, false},
		{"present", "json", http.Header{"X-Api": {"application/json"}}, true},
		{"exists: missing", ".*", nil, false},
		{"exists: empty", ".*", http.Header{"X-Api": {""}}, false},
		{"exists: present", ".*", http.Header{"X-Api": {"1"}}, true},
		{"spaces trimmed, as Anubis", " ^1$ ", http.Header{"X-Api": {"1"}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := mustParse(t, "bots:\n  - name: h\n    action: DENY\n    headers_regex: {x-api: '"+tt.re+"'}\n")
			r := curlRequest("curl/8.5.0")
			for k, v := range tt.header {
				r.Header[k] = v
			}
			if got := p.Evaluate(r).Action == DENY; got != tt.want {
				t.Errorf("matched %v, want %v", got, tt.want)
			}
		})
	}
}

// TestAnubisDifficulty: difficulty is Anubis's, 0 to 64 leading hexadecimal
// zeros, and Maat's bits are derived from it (4 each); 0 is 0; a block
// without difficulty asks for 0, as in Anubis; a rule without a block asks
// for Anubis's default, 4.
func TestAnubisDifficulty(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, challenge string
		want            Challenge
		err             string
	}{
		{"no block", "", Challenge{"pow", 16}, ""},
		{"zero", "{algorithm: fast, difficulty: 0}", Challenge{"pow", 0}, ""},
		{"no difficulty", "{algorithm: fast}", Challenge{"pow", 0}, ""},
		{"twenty", "{algorithm: fast, difficulty: 20}", Challenge{"pow", 80}, ""},
		{"sixty-four", "{algorithm: slow, difficulty: 64}", Challenge{"pow", 256}, ""},
		{"metarefresh", "{algorithm: metarefresh, difficulty: 1}", Challenge{"metarefresh", 4}, ""},
		{"bits", "{bits: 13}", Challenge{"pow", 13}, ""},
		{"too high", "{algorithm: fast, difficulty: 65}", Challenge{}, "difficulty: 65 is out of range 0..64"},
		{"negative", "{algorithm: fast, difficulty: -1}", Challenge{}, "difficulty: -1 is out of range 0..64"},
		{"no algorithm", "{difficulty: 2}", Challenge{}, "algorithm: is required"},
		{"unknown algorithm", "{algorithm: hunter2, difficulty: 2}", Challenge{}, `unknown challenge algorithm "hunter2"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			src := "bots:\n  - name: c\n    path_regex: .\n    action: CHALLENGE\n"
			if tt.challenge != "" {
				src += "    challenge: " + tt.challenge + "\n"
			}
			p, err := Parse("p.yaml", []byte(src), Options{})
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), `p.yaml:2: rule "c"`) {
					t.Fatalf("error %v, want p.yaml:2, the rule and %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := p.Evaluate(curlRequest("x")); d.Challenge != tt.want {
				t.Errorf("challenge %+v, want %+v", d.Challenge, tt.want)
			}
		})
	}
}

// TestAnubisFiles: what Anubis accepts and refuses of a policy file's
// shape, with Anubis's meaning: an empty bots: list is refused, a policy
// whose imports bring no rules is served by its thresholds; DEBUG_BENCHMARK
// and dnsbl: true are refused naming the key and Anubis's version.
func TestAnubisFiles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, src string
		err       string
	}{
		{"empty bots", "bots: []\n", "bots: has no rules; a policy needs at least one (as in Anubis)"},
		{"null bots", "bots:\n", "bots: has no rules"},
		{"imports of nothing", "bots:\n  - import: ./empty.yaml\n", ""},
		{"benchmark", "bots:\n  - {name: b, path_regex: ., action: DEBUG_BENCHMARK}\n", "DEBUG_BENCHMARK (Anubis's hash-rate benchmark page, a debugging aid of Anubis v1.16.0) is not supported"},
		{"dnsbl", "bots:\n  - {name: a, path_regex: ., action: ALLOW}\ndnsbl: true\n", "dnsbl: true: Anubis's DroneBL lookup"},
		{"dnsbl off", "bots:\n  - {name: a, path_regex: ., action: ALLOW}\ndnsbl: false\n", ""},
		{"honeypot", "bots:\n  - {name: a, path_regex: ., action: ALLOW}\nhoneypot: {implementation: fancy}\n", `honeypot: implementation: "fancy" is not one of Anubis's (naive)`},
		{"store", "bots:\n  - {name: a, path_regex: ., action: ALLOW}\nstore: {backend: bbolt}\n", "bbolt needs parameters: {path: FILE}"},
		{"threshold challenge without challenge", "bots:\n  - {name: a, path_regex: ., action: WEIGH}\nthresholds: [{name: t, expression: weight > 0, action: CHALLENGE}]\n", `threshold "t": action CHALLENGE needs challenge:`},
		{"threshold without expression", "bots:\n  - {name: a, path_regex: ., action: WEIGH}\nthresholds: [{name: t, action: DENY}]\n", `threshold "t": expression: is required`},
		{"threshold challenge checked on any action", "bots:\n  - {name: a, path_regex: ., action: WEIGH}\nthresholds: [{name: t, expression: weight > 0, action: DENY, challenge: {difficulty: 99}}]\n", "difficulty: 99 is out of range"},
	}
	opts := memFiles(map[string]string{"empty.yaml": "[]\n"})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := Parse("p.yaml", []byte(tt.src), opts)
			if tt.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				if d := p.Evaluate(curlRequest("curl/8.5.0")); d.Rule == "" && len(p.Rules()) == 0 && d.Action != ALLOW {
					t.Errorf("empty policy decided %s", d.Action)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), "p.yaml:") {
				t.Errorf("error %v, want p.yaml:LINE and %q", err, tt.err)
			}
		})
	}
}

// TestExplainFCrDNS: explain says when an expression needed reverse DNS
// that was not looked up, and what the lookup found when it was.
func TestExplainFCrDNS(t *testing.T) {
	t.Parallel()
	p := mustParse(t, "bots:\n  - import: (data)/crawlers/yandexbot.yaml\n")
	r := curlRequest("Mozilla/5.0 (compatible; YandexBot/3.0; +http://yandex.com/bots)")
	if got := p.Explain(r); !strings.Contains(got, "check reverse DNS: SKIPPED: an expression reads verifyFCrDNS") {
		t.Errorf("not looked up:\n%s", got)
	}
	r.FCrDNS = FCrDNS{Checked: true, Names: []string{"spider.yandex.com"}, Confirmed: true}
	got := p.Explain(r)
	for _, want := range []string{"check reverse DNS: ran: spider.yandex.com; one resolves back to the address", "decision: ALLOW weight=0 rule=yandexbot"} {
		if !strings.Contains(got, want) {
			t.Errorf("explain lacks %q:\n%s", want, got)
		}
	}
}

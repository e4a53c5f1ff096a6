package policy

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
)

// noop is a bots: section that changes no decision (a policy needs one).
const noop = "bots: [{name: noop, path_regex: ^/nope, action: WEIGH, weight: {adjust: 0}}]\n"

// Connections the early-refusal tests look at.
var (
	connCurl = ConnInfo{RemoteAddr: mustAddr("198.51.100.7"), JA4: "t13d3112h2_e8f1e7e78f70_6bebaf5329ac",
		ClientFamily: "curl", ASN: 64500, Country: "BR"}
	connChrome = ConnInfo{RemoteAddr: mustAddr("203.0.113.7"), JA4: "t13d1516h2_8daaf6152771_02713d6af862",
		ClientFamily: "chrome", ASN: 64501, Country: "DE"}
	connChromeQUIC = ConnInfo{RemoteAddr: mustAddr("2001:db8::7"), JA4: "q13d0312h3_55b375c5d22e_06cda9e17597",
		ClientFamily: "chrome"}
	connGoUnknown = ConnInfo{RemoteAddr: mustAddr("192.0.2.1"), JA4: "t13d1312h1_f57a46bbacb6_e7c285222651"}
	connNone      = ConnInfo{RemoteAddr: mustAddr("192.0.2.2")}
	connPython    = ConnInfo{RemoteAddr: mustAddr("198.51.100.9"), JA4: "t13d1812h1_85036bcba153_b26ce05bbdd6",
		ClientFamily: "python", ASN: 64500, Country: "DE"}
	earlyConns = []ConnInfo{connCurl, connChrome, connChromeQUIC, connGoUnknown, connNone, connPython}
)

// requestShapes returns requests of many kinds on connection c: browsers,
// tools, crawlers, empty User-Agents; paths that policies treat apart;
// HTTP/1.1, 2 and 3 with full or bare headers; crawler verification and
// reverse DNS in each state.
func requestShapes(c *ConnInfo) []*Request {
	uas := []string{uaChrome, uaFirefox, uaHeadless, uaGooglebot, uaGPTBot, uaMiniflux, "curl/8.5.0",
		"python-requests/2.32.3", "Go-http-client/2.0", ""}
	paths := []string{"/", "/robots.txt", "/api/v1/x", "/feed.xml", "/.well-known/security.txt", "/favicon.ico"}
	type variant struct {
		proto, hfp, h2fp string
		header           http.Header
	}
	variants := []variant{
		{"HTTP/2.0", "h213_aaaaaaaaaaaa", h2fpChromium, http.Header{
			"Accept": {"text/html"}, "Accept-Language": {"en"}, "Accept-Encoding": {"gzip, br"},
			"Sec-Fetch-Mode": {"navigate"}, "Sec-Fetch-Dest": {"document"}, "Sec-Ch-Ua": {`"Chromium";v="131"`}}},
		{"HTTP/1.1", "h102_bbbbbbbbbbbb", "", http.Header{"Accept": {"*/*"}}},
		{"HTTP/3.0", "h305_cccccccccccc", "", http.Header{"Accept-Language": {"de"}, "Cf-Worker": {"x"}}},
		{"HTTP/2.0", "h202_dddddddddddd", h2fpGo, http.Header{}},
	}
	var out []*Request
	for _, ua := range uas {
		for _, path := range paths {
			for vi, v := range variants {
				for _, cv := range []CrawlerCheck{CrawlerUnchecked, CrawlerVerified, CrawlerFailed} {
					h := v.header.Clone()
					if ua != "" {
						h.Set("User-Agent", ua)
					}
					r := &Request{
						RemoteAddr: c.RemoteAddr, Host: "example.org", Method: "GET", Path: path,
						Proto: v.proto, TLS: true, Header: h, HFP: v.hfp, H2FP: v.h2fp,
						JA4: c.JA4, ClientFamily: c.ClientFamily, ASN: c.ASN, ASOrg: c.ASOrg, Country: c.Country,
						CrawlerVerified: cv,
					}
					if vi%2 == 1 {
						r.Method, r.RawQuery = "POST", "q=1"
						r.FCrDNS = FCrDNS{Checked: true, Names: []string{"crawl-1.googlebot.com"}, Confirmed: true}
					}
					if v.h2fp == h2fpGo {
						r.H2Family = "go"
					}
					if cv != CrawlerVerified { // the site's state, not the client's
						r.Storm, r.Pressure = cv == CrawlerFailed, 0.9
						r.Upstream = UpstreamLoad{InUse: 8, Capacity: 8, Queue: 20}
					}
					out = append(out, r)
				}
			}
		}
	}
	return out
}

// checkDenied fails t unless every request of shapes on c is denied with
// a deny page (DENY without reroute), as DenyConn promised.
func checkDenied(t *testing.T, p *Policy, c *ConnInfo, shapes []*Request) {
	t.Helper()
	if msg := denyFailure(p, c, shapes); msg != "" {
		t.Fatal(msg)
	}
}

// denyFailure says which request of shapes on c is not denied with a deny
// page; "" if all are.
func denyFailure(p *Policy, c *ConnInfo, shapes []*Request) string {
	for _, r := range shapes {
		d := p.Evaluate(r)
		if d.NeedFCrDNS {
			r2 := *r
			r2.FCrDNS = FCrDNS{Checked: true}
			d = p.Evaluate(&r2)
		}
		if d.Action != DENY || d.RerouteTo != "" {
			return fmt.Sprintf("DenyConn(%+v) = true, but %s %s %s UA %q (crawler %s) is %s (rule %q, reroute %q, weight %d)",
				*c, r.Method, r.Proto, r.Path, r.Header.Get("User-Agent"), r.CrawlerVerified, d.Action, d.Rule, d.RerouteTo, d.Weight)
		}
	}
	return ""
}

func TestDenyConn(t *testing.T) {
	t.Parallel()
	const (
		allowRest = "\nthresholds: [{name: rest, expression: 'true', action: ALLOW}]"
		denyHeavy = "\nthresholds:\n- {name: ok, expression: weight < 50, action: ALLOW}\n- {name: heavy, expression: weight >= 50, action: DENY}"
	)
	tests := []struct {
		name   string
		policy string
		conn   ConnInfo
		want   bool
	}{
		{"ja4 deny", `bots: [{name: j, ja4: [t13d3112h2_e8f1e7e78f70_6bebaf5329ac], action: DENY}]`, connCurl, true},
		{"ja4 prefix deny", `bots: [{name: j, ja4: ["t13d31*"], action: DENY}]`, connCurl, true},
		{"ja4 other", `bots: [{name: j, ja4: [t13d3112h2_e8f1e7e78f70_6bebaf5329ac], action: DENY}]`, connChrome, false},
		{"family deny", `bots: [{name: f, client_family: [curl, go], action: DENY}]`, connCurl, true},
		{"unknown family deny", `bots: [{name: f, client_family: [""], action: DENY}]`, connGoUnknown, true},
		{"no fingerprint, ja4 prefix *", `bots: [{name: j, ja4: ["*"], action: DENY}]`, connNone, false},
		{"address deny", `bots: [{name: a, remote_addresses: [198.51.100.0/24], action: DENY}]`, connCurl, true},
		{"asn deny", `bots: [{name: g, asns: {match: [64500]}, action: DENY}]`, connPython, true},
		{"country deny", `bots: [{name: g, geoip: {countries: [BR]}, action: DENY}]`, connCurl, true},
		{"country and family both", `bots: [{name: g, geoip: {countries: [DE]}, client_family: [python], action: DENY}]`, connPython, true},
		{"country and family one", `bots: [{name: g, geoip: {countries: [DE]}, client_family: [python], action: DENY}]`, connChrome, false},
		{"reroute is not a deny page", `bots: [{name: j, client_family: [curl], action: DENY_AND_REROUTE, reroute_to: "https://example.org/x"}]`, connCurl, false},
		{"an allow before", "bots:\n- {name: robots, path_regex: ^/robots, action: ALLOW}\n- {name: f, client_family: [curl], action: DENY}", connCurl, false},
		{"an allow before that the connection rules out", "bots:\n- {name: robots, path_regex: ^/robots, client_family: [chrome], action: ALLOW}\n- {name: f, client_family: [curl], action: DENY}", connCurl, true},
		{"a request deny before", "bots:\n- {name: ua, user_agent_regex: curl, action: DENY}\n- {name: f, client_family: [curl], action: DENY}", connCurl, true},
		{"a challenge after", "bots:\n- {name: f, client_family: [curl], action: DENY}\n- {name: c, path_regex: ., action: CHALLENGE, challenge: {algorithm: fast, difficulty: 1}}", connCurl, true},
		{"a conn allow first", "bots:\n- {name: a, remote_addresses: [198.51.100.7], action: ALLOW}\n- {name: f, client_family: [curl], action: DENY}", connCurl, false},
		{"a signal rule before", "bots:\n- {name: s, signal: fake_crawler, action: ALLOW}\n- {name: f, client_family: [curl], action: DENY}", connCurl, false},
		{"an expression allow before", "bots:\n- {name: e, expression: 'remoteAddress == \"192.0.2.200\"', action: ALLOW}\n- {name: f, client_family: [curl], action: DENY}", connCurl, false},
		{"weight over a deny threshold", "bots: [{name: w, client_family: [python], action: WEIGH, weight: {adjust: 60}}]" + denyHeavy, connPython, true},
		{"weight under a deny threshold", "bots: [{name: w, client_family: [python], action: WEIGH, weight: {adjust: 40}}]" + denyHeavy, connPython, false},
		{"a request weight may lower it", "bots:\n- {name: w, client_family: [python], action: WEIGH, weight: {adjust: 60}}\n- {name: l, headers_regex: {Accept-Language: .*}, action: WEIGH, weight: {adjust: -20}}" + denyHeavy, connPython, false},
		{"a request weight that only raises it", "bots:\n- {name: w, client_family: [python], action: WEIGH, weight: {adjust: 60}}\n- {name: l, path_regex: ., action: WEIGH, weight: {adjust: 20}}" + denyHeavy, connPython, true},
		{"signals may lower it", "bots: [{name: w, client_family: [python], action: WEIGH, weight: {adjust: 60}}]\nsignals: {verified_crawler: -30}" + denyHeavy, connPython, false},
		{"signals only raise it", "bots: [{name: w, client_family: [python], action: WEIGH, weight: {adjust: 60}}]\nsignals: {ua_tls_mismatch: 30}" + denyHeavy, connPython, true},
		{"deny everything", noop + "thresholds: [{name: all, expression: 'true', action: DENY}]", connChrome, true},
		{"deny everything but a band", noop + "thresholds:\n- {name: mid, expression: weight == 7, action: CHALLENGE, challenge: {algorithm: fast, difficulty: 1}}\n- {name: all, expression: 'true', action: DENY}\nsignals: {browser_headers_missing: 7}", connChrome, false},
		{"a CEL threshold", noop + "thresholds: [{name: even, expression: weight % 2 == 0, action: DENY}]", connChrome, false},
		{"a CEL threshold, a conn rule first", "bots: [{name: f, client_family: [chrome], action: DENY}]\nthresholds: [{name: even, expression: weight % 2 == 0, action: DENY}]", connChrome, true},
		{"allowed otherwise", `bots: [{name: f, client_family: [curl], action: DENY}]` + allowRest, connPython, false},
		{"a storm threshold before", "bots: [{name: w, client_family: [python], action: WEIGH, weight: {adjust: 60}}]\nthresholds:\n- {name: s, expression: storm, action: CHALLENGE, challenge: {algorithm: fast, difficulty: 1}}\n- {name: d, expression: 'true', action: DENY}", connPython, false},
		{"deny in a storm and out of it", "bots: [{name: w, client_family: [python], action: WEIGH, weight: {adjust: 60}}]\nthresholds:\n- {name: s, expression: storm && weight >= 50, action: DENY}\n- {name: c, expression: weight >= 50, action: DENY}", connPython, true},
		{"a pressure threshold", "bots: [{name: w, client_family: [python], action: WEIGH, weight: {adjust: 60}}]\nthresholds:\n- {name: s, expression: pressure > 0.5, action: CHALLENGE, challenge: {algorithm: fast, difficulty: 1}}\n- {name: d, expression: 'true', action: DENY}", connPython, false},
		{"quic chrome", `bots: [{name: q, ja4: ["q13*"], action: DENY}]`, connChromeQUIC, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := Parse("test.yaml", []byte(tt.policy), Options{Geo: Geo{ASN: true, Country: true}})
			if err != nil {
				t.Fatal(err)
			}
			if got := p.DenyConn(&tt.conn); got != tt.want {
				t.Fatalf("DenyConn = %v; want %v", got, tt.want)
			}
			if tt.want {
				if !p.DeniesConns() {
					t.Error("DeniesConns = false where DenyConn is true")
				}
				checkDenied(t, p, &tt.conn, requestShapes(&tt.conn))
			}
		})
	}
}

// TestDeniesConns: policies that cannot deny a connection say so, so that
// the edge skips the check; the default policy is one (it denies by
// User-Agent, never by fingerprint alone).
func TestDeniesConns(t *testing.T) {
	t.Parallel()
	if mustDefault(t).DeniesConns() {
		t.Error("the default policy DeniesConns")
	}
	for _, src := range []string{
		`bots: [{name: ua, user_agent_regex: curl, action: DENY}]`,
		`bots: [{name: f, client_family: [curl], action: DENY_AND_REROUTE, reroute_to: "https://example.org/"}]`,
		noop + `thresholds: [{name: even, expression: weight % 2 == 0, action: DENY}]`,
	} {
		p := mustParse(t, src)
		if p.DeniesConns() {
			t.Errorf("%s: DeniesConns = true", src)
		}
		for _, c := range earlyConns {
			if p.DenyConn(&c) {
				t.Errorf("%s: DenyConn(%+v) = true", src, c)
			}
		}
	}
	for _, src := range []string{
		`bots: [{name: f, client_family: [curl], action: DENY}]`,
		noop + `thresholds: [{name: heavy, expression: weight > 100, action: DENY}]`,
	} {
		if !mustParse(t, src).DeniesConns() {
			t.Errorf("%s: DeniesConns = false", src)
		}
	}
}

// Rules and thresholds the differential test draws policies from: rules
// on connection facts, on request facts, on both; every action.
var (
	earlyRulePool = []string{
		`{name: c-ja4, ja4: [t13d3112h2_e8f1e7e78f70_6bebaf5329ac], action: DENY}`,
		`{name: c-fam, client_family: [curl, go], action: DENY}`,
		`{name: c-nofam, client_family: [""], action: DENY}`,
		`{name: c-addr, remote_addresses: [198.51.100.0/24], action: DENY}`,
		`{name: c-asn, asns: {match: [64500]}, action: DENY}`,
		`{name: c-geo, geoip: {countries: [DE]}, action: DENY}`,
		`{name: c-chrome, client_family: [chrome], action: ALLOW}`,
		`{name: c-t13, ja4: ["t13d*"], action: WEIGH, weight: {adjust: 50}}`,
		`{name: c-py, client_family: [python], action: WEIGH, weight: {adjust: -20}}`,
		`{name: c-asnw, asns: {match: [64500]}, action: WEIGH, weight: {adjust: 30}}`,
		`{name: c-doc, remote_addresses: [203.0.113.0/24], action: CHALLENGE, challenge: {algorithm: fast, difficulty: 2}}`,
		`{name: c-quic, ja4: ["q*"], action: DENY_AND_REROUTE, reroute_to: "https://example.org/x"}`,
		`{name: c-rate, client_family: [curl], action: RATE, rate: {key: ip, per_second: 1, burst: 1}}`,
		`{name: r-curl, user_agent_regex: curl, action: ALLOW}`,
		`{name: r-robots, path_regex: ^/robots\.txt$, action: ALLOW}`,
		`{name: r-moz, user_agent_regex: Mozilla, action: WEIGH, weight: {adjust: 10}}`,
		`{name: r-lang, headers_regex: {Accept-Language: .*}, action: WEIGH, weight: {adjust: -10}}`,
		`{name: r-curlcurl, client_family: [curl], user_agent_regex: curl, action: DENY}`,
		`{name: r-api, ja4: ["t13d*"], path_regex: ^/api/, action: ALLOW}`,
		`{name: r-lie, signal: ua_tls_mismatch, action: DENY}`,
		`{name: r-addr, expression: 'remoteAddress == "198.51.100.7"', action: DENY}`,
		`{name: r-feed, expression: 'path.startsWith("/feed")', action: ALLOW}`,
		`{name: r-h1, hfp: ["h1*"], action: CHALLENGE, challenge: {algorithm: fast, difficulty: 1}}`,
		`{name: r-g, user_agent_regex: Googlebot, action: DENY_AND_REROUTE, reroute_to: "https://example.org/y"}`,
		`{name: r-any, path_regex: ., action: WEIGH, weight: {adjust: 25}}`,
		`{name: r-go2, h2fp: ["2:0;4:4194304*"], action: DIVERT, divert_to: tarpit}`,
		`{name: r-fcr, expression: 'verifyFCrDNS(remoteAddress)', action: ALLOW}`,
		// Weights drawn at random (%d), on each side of the thresholds.
		`{name: c-w%[1]d, client_family: [curl, chrome, python], action: WEIGH, weight: {adjust: %[1]d}}`,
		`{name: c-wa%[1]d, remote_addresses: [198.51.100.0/24, 192.0.2.0/24], action: WEIGH, weight: {adjust: %[1]d}}`,
		`{name: r-wl%[1]d, headers_regex: {Accept-Language: .*}, action: WEIGH, weight: {adjust: %[1]d}}`,
		`{name: r-wu%[1]d, user_agent_regex: '(?i)bot|curl', action: WEIGH, weight: {adjust: %[1]d}}`,
	}
	earlyTailPool = []string{
		"",
		"\nthresholds:\n- {name: ok, expression: weight < 20, action: ALLOW}\n- {name: deny, expression: weight >= 20, action: DENY}",
		"\nthresholds: [{name: all, expression: 'true', action: DENY}]",
		"\nthresholds:\n- {name: a, expression: weight <= 0, action: ALLOW}\n- {name: c, expression: weight < 40, action: CHALLENGE, challenge: {algorithm: fast, difficulty: 1}}\n- {name: d, expression: weight >= 40, action: DENY}",
		"\nthresholds:\n- {name: d, expression: weight > 10 && weight < 60 || weight == 100, action: DENY}\n- {name: a, expression: 'true', action: ALLOW}",
		"\nthresholds: [{name: even, expression: weight % 2 == 0, action: DENY}]",
		"\nsignals: {ua_tls_mismatch: 30, browser_headers_missing: 10}\nthresholds:\n- {name: ok, expression: weight < 20, action: ALLOW}\n- {name: deny, expression: weight >= 20, action: DENY}",
		"\nthresholds:\n- {name: d, expression: weight < 30, action: DENY}\n- {name: a, expression: 'true', action: CHALLENGE, challenge: {algorithm: fast, difficulty: 1}}",
		"\nthresholds:\n- {name: a, expression: weight >= 5 && weight <= 8, action: ALLOW}\n- {name: d, expression: 'true', action: DENY}",
		"\nthresholds:\n- {name: s, expression: storm && weight < 40, action: CHALLENGE, challenge: {algorithm: fast, difficulty: 1}}\n- {name: d, expression: 'true', action: DENY}",
		"\nsignals: {verified_crawler: -40, hosting_asn: off}\nthresholds: [{name: d, expression: weight > -100, action: DENY}]",
	}
)

// TestDenyConnDifferential draws policies from the pools and checks,
// for every connection DenyConn refuses, that Evaluate denies requests of
// every shape on it. It also checks that the draw found both answers many
// times, so that the property was put to the test.
func TestDenyConnDifferential(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(35, 5))
	n := 400
	if testing.Short() {
		n = 100
	}
	shapes := map[string][]*Request{}
	for _, c := range earlyConns {
		shapes[c.JA4+c.RemoteAddr.String()] = requestShapes(&c)
	}
	var yes, no, missed int
	for i := range n {
		var b strings.Builder
		b.WriteString("bots:\n")
		for range 1 + rng.IntN(5) {
			r := earlyRulePool[rng.IntN(len(earlyRulePool))]
			if strings.Contains(r, "%[1]d") {
				r = fmt.Sprintf(r, rng.IntN(81)-40)
			}
			fmt.Fprintf(&b, "- %s\n", r)
		}
		b.WriteString(earlyTailPool[rng.IntN(len(earlyTailPool))])
		src := b.String()
		p, err := Parse("test.yaml", []byte(src), Options{Geo: Geo{ASN: true, Country: true}})
		if err != nil {
			if strings.Contains(err.Error(), "same name") || strings.Contains(err.Error(), "duplicate") {
				continue
			}
			t.Fatalf("policy %d: %v\n%s", i, err, src)
		}
		for _, c := range earlyConns {
			all := shapes[c.JA4+c.RemoteAddr.String()]
			if !p.DenyConn(&c) {
				no++
				// Count what a complete answer would have refused too: the
				// conservative side, not an error.
				if allDenied(p, all[:40]) && allDenied(p, all) {
					missed++
				}
				continue
			}
			yes++
			if !p.DeniesConns() {
				t.Fatalf("DeniesConns = false, DenyConn(%+v) = true:\n%s", c, src)
			}
			sample := make([]*Request, 0, 200)
			for range 200 {
				sample = append(sample, all[rng.IntN(len(all))])
			}
			if msg := denyFailure(p, &c, sample); msg != "" {
				t.Fatalf("%s\npolicy:\n%s", msg, src)
			}
		}
	}
	t.Logf("DenyConn true %d times, false %d times (%d of them denied every shape all the same)", yes, no, missed)
	if yes < n/4 || no < n/4 {
		t.Errorf("DenyConn true %d times, false %d times in %d draws: the pools no longer test both sides", yes, no, n)
	}
}

func allDenied(p *Policy, shapes []*Request) bool {
	for _, r := range shapes {
		if d := p.Evaluate(r); d.Action != DENY || d.RerouteTo != "" || d.NeedFCrDNS {
			return false
		}
	}
	return true
}

func TestDenyConnDoesNotAllocate(t *testing.T) {
	p := mustParse(t, "bots:\n- {name: robots, path_regex: ^/robots, action: ALLOW}\n- {name: w, client_family: [python], action: WEIGH, weight: {adjust: 60}}\nthresholds: [{name: d, expression: weight >= 50, action: DENY}]")
	c := connPython
	if n := testing.AllocsPerRun(100, func() { p.DenyConn(&c) }); n != 0 {
		t.Errorf("DenyConn allocates %v times", n)
	}
}

// BenchmarkDenyConn is the decision's cost per connection: a policy with
// one rule on the fingerprint among the default policy's rules.
func BenchmarkDenyConn(b *testing.B) {
	p, err := Parse("test.yaml", []byte("bots:\n- {name: no-curl, client_family: [curl], action: DENY}\n- import: (builtin)/default.yaml"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		c    ConnInfo
	}{{"denied", connCurl}, {"allowed", connChrome}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			want := bc.name == "denied"
			for b.Loop() {
				if p.DenyConn(&bc.c) != want {
					b.Fatal("wrong answer")
				}
			}
		})
	}
}

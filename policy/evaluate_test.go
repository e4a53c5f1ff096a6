package policy

import (
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestMatchers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		policy string
		edit   func(r *Request)
		want   Action
		rule   string // "" when no rule decides
	}{
		{"user_agent_regex hit", `bots: [{name: ua, user_agent_regex: 'Chrome/1[0-9]{2}', action: DENY}]`, nil, DENY, "ua"},
		{"user_agent_regex miss", `bots: [{name: ua, user_agent_regex: Firefox, action: DENY}]`, nil, ALLOW, ""},
		{"user_agent_regex case-insensitive literal", `bots: [{name: ua, user_agent_regex: '(?i)chrome|opera', action: DENY}]`, nil, DENY, "ua"},
		{"user_agent_regex case-sensitive literal", `bots: [{name: ua, user_agent_regex: chrome, action: DENY}]`, nil, ALLOW, ""},
		{"path_regex hit", `bots: [{name: p, path_regex: ^/wiki/, action: DENY}]`, nil, DENY, "p"},
		{"path_regex miss", `bots: [{name: p, path_regex: ^/api/, action: DENY}]`, nil, ALLOW, ""},
		{"path_regex dot is any", `bots: [{name: p, path_regex: ^/robots.txt$, action: DENY}]`, func(r *Request) { r.Path = "/robotsXtxt" }, DENY, "p"},
		{"headers_regex hit", `bots: [{name: h, headers_regex: {Sec-Fetch-Mode: ^navigate$}, action: DENY}]`, nil, DENY, "h"},
		{"headers_regex lower-case name", `bots: [{name: h, headers_regex: {sec-fetch-mode: navigate}, action: DENY}]`, nil, DENY, "h"},
		{"headers_regex all must hold", `bots: [{name: h, headers_regex: {Sec-Fetch-Mode: navigate, Accept: json}, action: DENY}]`, nil, ALLOW, ""},
		{"headers_regex absent header", `bots: [{name: h, headers_regex: {CF-Worker: .*}, action: DENY}]`, nil, ALLOW, ""},
		{"headers_regex present header", `bots: [{name: h, headers_regex: {CF-Worker: .*}, action: DENY}]`, func(r *Request) { r.Header.Set("CF-Worker", "x.workers.dev") }, DENY, "h"},
		{"remote_addresses hit", `bots: [{name: a, remote_addresses: [203.0.113.0/24], action: DENY}]`, nil, DENY, "a"},
		{"remote_addresses single address", `bots: [{name: a, remote_addresses: [203.0.113.7], action: DENY}]`, nil, DENY, "a"},
		{"remote_addresses miss", `bots: [{name: a, remote_addresses: [198.51.100.0/24, "2001:db8::/32"], action: DENY}]`, nil, ALLOW, ""},
		{"remote_addresses v4-mapped", `bots: [{name: a, remote_addresses: [203.0.113.0/24], action: DENY}]`, func(r *Request) { r.RemoteAddr = netip.MustParseAddr("::ffff:203.0.113.9") }, DENY, "a"},
		{"remote_addresses ipv6", `bots: [{name: a, remote_addresses: ["2001:db8::/32"], action: DENY}]`, func(r *Request) { r.RemoteAddr = netip.MustParseAddr("2001:db8::1") }, DENY, "a"},
		{"ja4 exact", `bots: [{name: j, ja4: t13d1516h2_8daaf6152771_02713d6af862, action: DENY}]`, nil, DENY, "j"},
		{"ja4 prefix", `bots: [{name: j, ja4: ["t13d1516h2_*"], action: DENY}]`, nil, DENY, "j"},
		{"ja4 miss", `bots: [{name: j, ja4: [t13d0000h2_000000000000_000000000000, "q13*"], action: DENY}]`, nil, ALLOW, ""},
		{"ja4 empty never matches prefix", `bots: [{name: j, ja4: ["*"], action: DENY}]`, func(r *Request) { r.JA4 = "" }, ALLOW, ""},
		{"hfp", `bots: [{name: h, hfp: [h216_aaaaaaaaaaaa], action: DENY}]`, func(r *Request) { r.HFP = "h216_aaaaaaaaaaaa" }, DENY, "h"},
		{"h2fp prefix", `bots: [{name: h, h2fp: ["1:65536;2:0;4:6291456*"], action: DENY}]`, nil, DENY, "h"},
		{"client_family", `bots: [{name: f, client_family: [firefox, chrome], action: DENY}]`, nil, DENY, "f"},
		{"client_family unknown", `bots: [{name: f, client_family: [""], action: DENY}]`, func(r *Request) { r.ClientFamily = "" }, DENY, "f"},
		{"client_family miss", `bots: [{name: f, client_family: curl, action: DENY}]`, nil, ALLOW, ""},
		{"signal", `bots: [{name: s, signal: ua_tls_mismatch, action: DENY}]`, func(r *Request) { r.ClientFamily = "curl" }, DENY, "s"},
		{"signal miss", `bots: [{name: s, signal: [ua_tls_mismatch, fake_crawler], action: DENY}]`, nil, ALLOW, ""},
		{"signal tls_http_mismatch", `bots: [{name: s, signal: tls_http_mismatch, action: DENY}]`, func(r *Request) { r.H2FP, r.H2Family = h2fpGoChromeOrder, "go" }, DENY, "s"},
		{"signal tls_http_mismatch miss", `bots: [{name: s, signal: tls_http_mismatch, action: DENY}]`, nil, ALLOW, ""},
		{"expression h2Family", `bots: [{name: e, expression: 'clientFamily == "chrome" && h2Family == "go"', action: DENY}]`, func(r *Request) { r.H2FP, r.H2Family = h2fpGoChromeOrder, "go" }, DENY, "e"},
		{"expression h2Family miss", `bots: [{name: e, expression: 'h2Family == "go"', action: DENY}]`, nil, ALLOW, ""},
		{"signal switched off", "bots: [{name: s, signal: ua_tls_mismatch, action: DENY}]\nsignals: {ua_tls_mismatch: off}", func(r *Request) { r.ClientFamily = "curl" }, ALLOW, ""},
		{"expression", `bots: [{name: e, expression: 'userAgent.contains("Chrome") && path.startsWith("/wiki/")', action: DENY}]`, nil, DENY, "e"},
		{"expression all", "bots:\n- name: e\n  action: DENY\n  expression:\n    all: ['method == \"GET\"', 'headers[\"Sec-Fetch-Mode\"] == \"navigate\"', 'host == \"example.org\"']", nil, DENY, "e"},
		{"expression any", "bots:\n- name: e\n  action: DENY\n  expression:\n    any: ['method == \"POST\"', 'remoteAddress == \"203.0.113.7\"']", nil, DENY, "e"},
		{"expression missing key is no match", `bots: [{name: e, expression: 'headers["X-Nope"] == "1"', action: DENY}]`, nil, ALLOW, ""},
		{"expression missingHeader", `bots: [{name: e, expression: 'missingHeader(headers, "x-nope")', action: DENY}]`, nil, DENY, "e"},
		{"expression query", `bots: [{name: e, expression: '"go-get" in query && query["go-get"] == "1"', action: DENY}]`, func(r *Request) { r.RawQuery = "go-get=1" }, DENY, "e"},
		{"expression ours", `bots: [{name: e, expression: 'clientFamily == "chrome" && proto == "HTTP/2.0" && ja4.startsWith("t13") && h2fp != ""', action: DENY}]`, nil, DENY, "e"},
		{"expression segments", `bots: [{name: e, expression: 'size(segments(path)) == 2', action: DENY}]`, nil, DENY, "e"},
		{"expression contentLength", `bots: [{name: e, expression: 'contentLength > 100', action: DENY}]`, func(r *Request) { r.Header.Set("Content-Length", "1000") }, DENY, "e"},
		{"all matchers must hold", `bots: [{name: m, user_agent_regex: Chrome, path_regex: ^/api/, action: DENY}]`, nil, ALLOW, ""},
		{"all matchers hold", `bots: [{name: m, user_agent_regex: Chrome, path_regex: ^/wiki/, remote_addresses: [203.0.113.0/24], client_family: chrome, action: DENY}]`, nil, DENY, "m"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := mustParse(t, tt.policy+"\nthresholds: [{name: t, expression: 'weight > 1000', action: DENY}]")
			r := chromeRequest()
			if tt.edit != nil {
				tt.edit(r)
			}
			d := p.Evaluate(r)
			if d.Action != tt.want || d.Rule != tt.rule {
				t.Errorf("Evaluate = %s rule %q, want %s rule %q\n%s", d.Action, d.Rule, tt.want, tt.rule, p.Explain(r))
			}
		})
	}
}

func TestActionsAndWeights(t *testing.T) {
	t.Parallel()
	const thresholds = `
thresholds:
  - {name: low, expression: weight <= 0, action: ALLOW}
  - {name: mid, expression: {all: [weight > 0, weight < 10]}, action: CHALLENGE, challenge: {algorithm: metarefresh, difficulty: 1}}
  - {name: high, min: 10, max: 20, action: CHALLENGE, challenge: {algorithm: fast, bits: 14}}
  - {name: extreme, expression: weight >= 20, action: DENY}
`
	tests := []struct {
		name      string
		bots      string
		want      Action
		weight    int
		rule      string
		challenge Challenge
		matched   []string
	}{
		{"allow stops", "- {name: a, path_regex: ., action: ALLOW}\n- {name: d, path_regex: ., action: DENY}", ALLOW, 0, "a", Challenge{}, []string{"a"}},
		{"deny", "- {name: d, path_regex: ., action: DENY}", DENY, 0, "d", Challenge{}, []string{"d"}},
		{"challenge default is Anubis's fast/4", "- {name: c, path_regex: ., action: CHALLENGE}", CHALLENGE, 0, "c", Challenge{"pow", 16}, []string{"c"}},
		{"challenge difficulty is 4 bits each", "- {name: c, path_regex: ., action: CHALLENGE, challenge: {difficulty: 2, algorithm: slow}}", CHALLENGE, 0, "c", Challenge{"pow", 8}, []string{"c"}},
		{"challenge bits", "- {name: c, path_regex: ., action: CHALLENGE, challenge: {bits: 13}}", CHALLENGE, 0, "c", Challenge{"pow", 13}, []string{"c"}},
		{"challenge metarefresh", "- {name: c, path_regex: ., action: CHALLENGE, challenge: {algorithm: metarefresh, difficulty: 1}}", CHALLENGE, 0, "c", Challenge{"metarefresh", 4}, []string{"c"}},
		{"weigh adds and falls to thresholds", "- {name: w1, path_regex: ., action: WEIGH, weight: {adjust: 4}}\n- {name: w2, path_regex: ., action: WEIGH, weight: {adjust: 3}}", CHALLENGE, 7, "mid", Challenge{"metarefresh", 4}, []string{"w1", "w2", "mid"}},
		{"weigh default is 5", "- {name: w, path_regex: ., action: WEIGH}", CHALLENGE, 5, "mid", Challenge{"metarefresh", 4}, []string{"w", "mid"}},
		{"weigh negative", "- {name: w, path_regex: ., action: WEIGH, weight: {adjust: -5}}", ALLOW, -5, "low", Challenge{}, []string{"w", "low"}},
		{"min max threshold", "- {name: w, path_regex: ., action: WEIGH, weight: {adjust: 12}}", CHALLENGE, 12, "high", Challenge{"pow", 14}, []string{"w", "high"}},
		{"threshold deny", "- {name: w, path_regex: ., action: WEIGH, weight: {adjust: 25}}", DENY, 25, "extreme", Challenge{}, []string{"w", "extreme"}},
		{"weigh then decide keeps weight", "- {name: w, path_regex: ., action: WEIGH, weight: {adjust: 25}}\n- {name: a, path_regex: ., action: ALLOW}", ALLOW, 25, "a", Challenge{}, []string{"w", "a"}},
		{"weigh after decision not counted", "- {name: a, path_regex: ., action: ALLOW}\n- {name: w, path_regex: ., action: WEIGH, weight: {adjust: 25}}", ALLOW, 0, "a", Challenge{}, []string{"a"}},
		{"non-matching weigh", "- {name: w, path_regex: ^/nope, action: WEIGH, weight: {adjust: 25}}", ALLOW, 0, "low", Challenge{}, []string{"low"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := mustParse(t, "bots:\n"+tt.bots+"\nsignals: {browser_headers_missing: 0}"+thresholds)
			r := chromeRequest()
			d := p.Evaluate(r)
			if d.Action != tt.want || d.Weight != tt.weight || d.Rule != tt.rule || d.Challenge != tt.challenge {
				t.Errorf("got %s weight %d rule %q %+v, want %s weight %d rule %q %+v", d.Action, d.Weight, d.Rule, d.Challenge, tt.want, tt.weight, tt.rule, tt.challenge)
			}
			if got := names(&d); !slices.Equal(got, tt.matched) {
				t.Errorf("names = %q, want %q", got, tt.matched)
			}
			if d.RuleID == "" || len(d.RuleID) != 16 {
				t.Errorf("RuleID = %q", d.RuleID)
			}
		})
	}
}

func TestThresholdForms(t *testing.T) {
	t.Parallel()
	tests := []struct {
		expr string
		yes  []int
		no   []int
		fast bool
	}{
		{"weight < 10", []int{-1, 9}, []int{10, 11}, true},
		{"weight <= 10", []int{10}, []int{11}, true},
		{"weight > 10", []int{11}, []int{10}, true},
		{"weight >= 10", []int{10}, []int{9}, true},
		{"weight == 3", []int{3}, []int{4}, true},
		{"weight != 3", []int{4}, []int{3}, true},
		{"10 > weight", []int{9}, []int{10}, true},
		{"weight > 0 && weight < 10 || weight == 50", []int{1, 9, 50}, []int{0, 10, 49}, true},
		{"true", []int{0, 100}, nil, true},
		{"weight % 2 == 0", []int{0, 2}, []int{1, 3}, false},
		{"int(string(weight)) > 5", []int{6}, []int{5}, false},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			t.Parallel()
			p := mustParse(t, "bots: [{name: n, path_regex: ^/never$, action: DENY}]\nthresholds: [{name: t, action: DENY, expression: '"+tt.expr+"'}]")
			th := &p.thresholds[0]
			if (th.pred != nil) != tt.fast {
				t.Errorf("fast path = %v, want %v", th.pred != nil, tt.fast)
			}
			for _, w := range tt.yes {
				if !th.match(w, &calmRequest) {
					t.Errorf("weight %d: no match, want match", w)
				}
			}
			for _, w := range tt.no {
				if th.match(w, &calmRequest) {
					t.Errorf("weight %d: match, want none", w)
				}
			}
		})
	}
}

func TestRate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		rate string
		edit func(*Request)
		key  string // after the rule id and ':'
	}{
		{"ip v4 /24", "{key: ip, per_second: 2, burst: 10}", nil, "ip:203.0.113.0/24"},
		{"ip v6 /64", "{key: ip, per_second: 2, burst: 10}", func(r *Request) { r.RemoteAddr = netip.MustParseAddr("2001:db8:1:2:3::4") }, "ip:2001:db8:1:2::/64"},
		{"ja4", "{key: ja4, per_second: 2, burst: 10}", nil, "ja4:t13d1516h2_8daaf6152771_02713d6af862"},
		{"ja4 unknown falls back to ip", "{key: ja4, per_second: 2, burst: 10}", func(r *Request) { r.JA4 = "" }, "ip:203.0.113.0/24"},
		{"pass", "{key: pass, per_second: 2, burst: 10}", func(r *Request) { r.Pass = "abc" }, "pass:abc"},
		{"pass absent falls back to ip", "{key: pass, per_second: 2, burst: 10}", nil, "ip:203.0.113.0/24"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := mustParse(t, "bots: [{name: r, path_regex: ., action: RATE, rate: "+tt.rate+"}]")
			r := chromeRequest()
			if tt.edit != nil {
				tt.edit(r)
			}
			d := p.Evaluate(r)
			if d.Action != RATE || d.Rate.Rate != 2 || d.Rate.Burst != 10 {
				t.Fatalf("got %s %+v", d.Action, d.Rate)
			}
			if want := d.RuleID + ":" + tt.key; d.Rate.Key != want {
				t.Errorf("key = %q, want %q", d.Rate.Key, want)
			}
		})
	}
}

// TestDefaultPolicy gives the requests real clients make and what the
// default policy decides for each; the edge's end-to-end tests make the
// same requests for real.
func TestDefaultPolicy(t *testing.T) {
	t.Parallel()
	p := mustDefault(t)
	tests := []struct {
		name    string
		req     func() *Request
		want    Action
		maxBits int
		rule    string
		signals []Signal
	}{
		{"chrome", chromeRequest, CHALLENGE, 12, "browser", nil},
		{"curl own UA", func() *Request { return curlRequest("curl/8.5.0") }, ALLOW, 0, "curl", nil},
		{"curl own UA unknown JA4", func() *Request { r := curlRequest("curl/7.88.1"); r.ClientFamily, r.JA4 = "", ""; return r }, ALLOW, 0, "curl", nil},
		{"curl with a Chrome UA", func() *Request { return curlRequest(uaChrome) }, CHALLENGE, 20, "suspicion", []Signal{SignalUATLSMismatch, SignalBrowserHeadersMissing}},
		{"python with a Firefox UA over HTTP/1.1", func() *Request {
			r := curlRequest(uaFirefox)
			r.ClientFamily, r.Proto, r.HeaderOrder = "python", "HTTP/1.1", []string{"Host", "User-Agent", "Accept-Encoding", "Accept", "Connection"}
			return r
		}, CHALLENGE, 20, "strong-suspicion", []Signal{SignalUATLSMismatch, SignalBrowserHeadersMissing, SignalProtoMismatch}},
		{"go with a Googlebot UA from loopback", func() *Request {
			r := curlRequest(uaGooglebot)
			r.ClientFamily, r.CrawlerVerified = "go", CrawlerFailed
			return r
		}, DENY, 0, "fake_crawler", []Signal{SignalFakeCrawler}},
		{"verified googlebot", func() *Request {
			r := curlRequest(uaGooglebot)
			r.ClientFamily, r.CrawlerVerified = "", CrawlerVerified
			return r
		}, ALLOW, 0, "verified_crawler", []Signal{SignalVerifiedCrawler}},
		{"GPTBot", func() *Request { return curlRequest(uaGPTBot) }, DENY, 0, "ai-crawlers", nil},
		{"ClaudeBot lower-case", func() *Request { return curlRequest("claudebot/1.0") }, DENY, 0, "ai-crawlers", nil},
		{"headless chromium", func() *Request {
			r := chromeRequest()
			r.Header.Set("User-Agent", uaHeadless)
			r.Header.Del("Accept-Language")
			return r
		}, CHALLENGE, 18, "suspicion", []Signal{SignalBrowserHeadersMissing, SignalHeadless}},
		{"feed reader on /feed.xml", func() *Request { r := curlRequest(uaMiniflux); r.Path = "/feed.xml"; r.ClientFamily = "go"; return r }, ALLOW, 0, "feed-path", nil},
		{"feed reader by UA", func() *Request { r := curlRequest(uaMiniflux); r.Path = "/posts/1"; r.ClientFamily = "go"; return r }, ALLOW, 0, "feed-readers", nil},
		// A feed's Accept opens a page to a reader's own stack, not to a
		// browser's: one header would otherwise let a headless Chrome in.
		{"reader asking for a feed by Accept", func() *Request {
			r := curlRequest("Mozilla/5.0 (compatible; SomeReader/1.0; +https://reader.example/)")
			r.Path, r.RawQuery, r.ClientFamily = "/", "feed=atom", "python"
			r.Header.Set("Accept", "application/atom+xml")
			return r
		}, ALLOW, 0, "feed-accept", nil},
		{"browser asking for a feed", func() *Request {
			r := chromeRequest()
			r.Path = "/blog/"
			r.Header.Set("Accept", "application/atom+xml")
			return r
		}, CHALLENGE, 12, "browser", nil},
		{"robots.txt", func() *Request { r := curlRequest(uaGPTBot); r.Path = "/robots.txt"; return r }, ALLOW, 0, "robots-txt", nil},
		{"well-known", func() *Request { r := chromeRequest(); r.Path = "/.well-known/security.txt"; return r }, ALLOW, 0, "well-known", nil},
		{"favicon", func() *Request { r := chromeRequest(); r.Path = "/favicon.ico"; return r }, ALLOW, 0, "favicon", nil},
		{"sitemap", func() *Request { r := chromeRequest(); r.Path = "/sitemap.xml"; return r }, ALLOW, 0, "sitemap", nil},
		{"sitemap index", func() *Request { r := curlRequest(uaGooglebot); r.Path = "/sitemap_index.xml"; return r }, ALLOW, 0, "sitemap", nil},
		{"sitemap part, gzipped", func() *Request { r := chromeRequest(); r.Path = "/sitemap-posts.xml.gz"; return r }, ALLOW, 0, "sitemap", nil},
		{"not a sitemap", func() *Request { r := chromeRequest(); r.Path = "/sitemap.xml.php"; return r }, CHALLENGE, 12, "browser", nil},
		{"firefox", func() *Request {
			r := chromeRequest()
			r.Header.Set("User-Agent", uaFirefox)
			r.Header.Del("Sec-Ch-Ua")
			r.ClientFamily, r.H2FP, r.H2Family = "firefox", h2fpFirefox, "firefox"
			r.HeaderOrder = []string{":method", ":path", ":authority", ":scheme", "user-agent"}
			return r
		}, CHALLENGE, 12, "browser", nil},
		{"safari on iphone", func() *Request {
			r := chromeRequest()
			r.Header.Set("User-Agent", uaIPhone)
			r.Header.Del("Sec-Ch-Ua")
			r.ClientFamily, r.H2FP, r.H2Family = "ios", h2fpSafari, ""
			r.HeaderOrder = []string{":method", ":scheme", ":authority", ":path", "user-agent"}
			return r
		}, CHALLENGE, 12, "browser", nil},
		{"git", func() *Request { return curlRequest("git/2.43.0") }, ALLOW, 0, "git", nil},
		{"unknown tool", func() *Request { r := curlRequest("foo/1.0"); r.ClientFamily = ""; return r }, ALLOW, 0, "no-suspicion", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := tt.req()
			d := p.Evaluate(r)
			if d.Action != tt.want || d.Rule != tt.rule {
				t.Errorf("got %s rule %q, want %s rule %q\n%s", d.Action, d.Rule, tt.want, tt.rule, p.Explain(r))
			}
			if d.Action == CHALLENGE && d.Challenge.Bits > tt.maxBits {
				t.Errorf("bits = %d, want at most %d", d.Challenge.Bits, tt.maxBits)
			}
			var got []Signal
			for s := range d.Signals.All {
				got = append(got, s)
			}
			if !slices.Equal(got, tt.signals) {
				t.Errorf("signals = %v, want %v", got, tt.signals)
			}
			for _, s := range tt.signals {
				if !slices.Contains(names(&d), s.String()) {
					t.Errorf("names %q lack signal %s", names(&d), s)
				}
			}
			// Each name once: the rule named for its signal
			// (fake_crawler) is not listed again as the signal.
			n := names(&d)
			if c := slices.Compact(slices.Sorted(slices.Values(n))); len(c) != len(n) {
				t.Errorf("names %q repeat one", n)
			}
		})
	}
}

// TestDefaultNeverDeniesBrowsers: whatever a real browser's request looks
// like (any signals, any path), the default policy does not deny it.
func TestDefaultNeverDeniesBrowsers(t *testing.T) {
	t.Parallel()
	p := mustDefault(t)
	for _, ua := range []string{uaChrome, uaFirefox, uaSafari, uaIPhone, uaHeadless} {
		for _, fam := range []string{"", "chrome", "firefox", "safari", "curl", "python", "go"} {
			for _, proto := range []string{"HTTP/1.1", "HTTP/2.0", "HTTP/3.0"} {
				r := chromeRequest()
				r.Header = http.Header{"User-Agent": {ua}}
				r.ClientFamily, r.Proto = fam, proto
				if d := p.Evaluate(r); d.Action == DENY {
					t.Errorf("%s on %s %s: DENY", ua, fam, proto)
				}
			}
		}
	}
}

func TestIsNavigation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		method string
		header http.Header
		want   bool
	}{
		{"navigate", "GET", http.Header{"Sec-Fetch-Mode": {"navigate"}}, true},
		{"cors fetch", "GET", http.Header{"Sec-Fetch-Mode": {"cors"}, "Accept": {"text/html"}}, false},
		{"post navigate", "POST", http.Header{"Sec-Fetch-Mode": {"navigate"}}, false},
		{"old browser html", "GET", http.Header{"Accept": {"text/html,*/*"}}, true},
		{"xhr", "GET", http.Header{"Accept": {"text/html"}, "X-Requested-With": {"XMLHttpRequest"}}, false},
		{"api client", "GET", http.Header{"Accept": {"application/json"}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := IsNavigation(&Request{Method: tt.method, Header: tt.header}); got != tt.want {
				t.Errorf("IsNavigation = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestExplain(t *testing.T) {
	t.Parallel()
	p := mustDefault(t)
	r := curlRequest(uaChrome)
	out := p.Explain(r)
	for _, want := range []string{"policy " + p.Version(), "signal ua_tls_mismatch: weight +30", "rule generic-browser", "WEIGH +10", "decision: CHALLENGE weight=50", "bits=18"} {
		if !strings.Contains(out, want) {
			t.Errorf("Explain lacks %q:\n%s", want, out)
		}
	}
}

func TestEvaluateDoesNotAllocate(t *testing.T) {
	// Not parallel: AllocsPerRun needs a quiet heap.
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector")
	}
	p := mustDefault(t)
	for _, r := range []*Request{chromeRequest(), curlRequest("curl/8.5.0"), curlRequest(uaGPTBot), curlRequest(uaChrome)} {
		if n := testing.AllocsPerRun(100, func() { p.Evaluate(r) }); n != 0 {
			t.Errorf("%s: %v allocations, want 0", r.Header.Get("User-Agent"), n)
		}
	}
}

func TestAppendNamesDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector")
	}
	p := mustDefault(t)
	d := p.Evaluate(curlRequest(uaChrome))
	buf := make([]string, 0, 8)
	if n := testing.AllocsPerRun(100, func() { buf = d.AppendNames(buf[:0]) }); n != 0 {
		t.Errorf("AppendNames: %v allocations, want 0", n)
	}
	if want := []string{"generic-browser", "suspicion", "ua_tls_mismatch", "browser_headers_missing"}; !slices.Equal(buf, want) {
		t.Errorf("AppendNames = %q, want %q", buf, want)
	}
}

// TestConcurrentEvaluate runs one policy from many goroutines; with -race
// it shows that a Policy is safe for concurrent use, CEL rules included.
func TestConcurrentEvaluate(t *testing.T) {
	t.Parallel()
	p, err := Load("testdata/good/anubis-rules.yaml", Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := p.Evaluate(chromeRequest())
	done := make(chan Decision)
	for range 8 {
		go func() {
			var d Decision
			for range 50 {
				d = p.Evaluate(chromeRequest())
			}
			done <- d
		}()
	}
	for range 8 {
		if d := <-done; d.Action != want.Action || d.Rule != want.Rule || d.Weight != want.Weight {
			t.Errorf("concurrent Evaluate = %s %q %d, want %s %q %d", d.Action, d.Rule, d.Weight, want.Action, want.Rule, want.Weight)
		}
	}
}

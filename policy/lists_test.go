package policy

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// honestClients are the automated clients the default policy lets through
// without a challenge (issue #13): each with the User-Agent it really
// sends (sources in lists/*.yaml), the TLS family of its real stack, the
// rule that allows it, and a family that would be a lie.
var honestClients = []struct {
	name, ua, family, rule, lie string
}{
	{"UptimeRobot", "Mozilla/5.0+(compatible; UptimeRobot/2.0; http://www.uptimerobot.com/)", "node", "uptimerobot", "chrome"},
	{"UptimeRobot, unknown stack", "Mozilla/5.0+(compatible; UptimeRobot/2.0; http://www.uptimerobot.com/)", "", "uptimerobot", "firefox"},
	{"Uptime Kuma", "Uptime-Kuma/1.23.16", "node", "uptime-kuma", "chrome"},
	{"Pingdom", "Pingdom.com_bot_version_1.4_(http://www.pingdom.com/)", "", "pingdom", "chrome"},
	{"Better Stack", uaBetterUptime, "go", "better-stack", "chrome"},
	{"Better Stack, short", "Better Stack Better Uptime Bot Mozilla/5.0", "", "better-stack", "chrome"},
	// StatusCake's User-Agent carries no bot token: on Chrome's TLS it is a
	// Chrome that names StatusCake, challenged as a browser; on Safari's it
	// lies.
	{"StatusCake", "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/129.0.0.0 Safari/537.36 (StatusCake)", "go", "statuscake", "safari"},
	{"StatusCake, older", "Mozilla/5.0 (Windows NT 6.2; WOW64) AppleWebKit/537.4 (KHTML, like Gecko) Chrome/98 Safari/537.4 (StatusCake)", "", "statuscake", "safari"},
	{"Site24x7", "Site24x7", "java", "site24x7", "chrome"},
	{"Nagios check_http", "check_http/v2.3.3 (monitoring-plugins 2.3.3)", "openssl", "monitoring-plugins", "chrome"},
	{"Nagios check_http, nagios-plugins", "check_http/v2.2.1 (nagios-plugins 2.2.1)", "gnutls", "monitoring-plugins", "firefox"},
	{"Icinga check_curl", "check_curl/v2.3.3 (monitoring-plugins 2.3.3)", "curl", "monitoring-plugins", "chrome"},
	{"updown.io", "Mozilla/5.0 (compatible; updown.io daemon 2.11)", "", "updown", "chrome"},
	{"Gatus", "Gatus/1.0", "go", "gatus", "chrome"},
	{"HetrixTools", "HetrixTools Uptime Monitoring Bot. https://hetrix.tools/uptime-monitoring-bot.html", "", "hosted-checkers", "chrome"},
	{"Oh Dear", "Mozilla/5.0 (compatible; OhDear/1.1; +https://ohdear.app/checker)", "", "hosted-checkers", "chrome"},
	{"Mastodon link card", "http.rb/5.1.1 (Mastodon/4.2.1; +https://mastodon.social/) Bot", "", "mastodon", "chrome"},
	{"Mastodon ActivityPub", "http.rb/5.1.1 (Mastodon/4.2.0; +https://example.social/)", "openssl", "mastodon", "chrome"},
	{"Pleroma", "Pleroma 2.5.2; https://pleroma.example <admin@pleroma.example>", "", "pleroma-akkoma", "safari"},
	{"Akkoma", "Akkoma 3.10.4; https://akkoma.example <admin@akkoma.example>", "", "pleroma-akkoma", "chrome"},
	{"Misskey", "Misskey/2024.11.0 (https://misskey.io)", "node", "misskey", "chrome"},
	{"Synapse", "Synapse (bot; +https://github.com/matrix-org/synapse)", "python", "synapse", "chrome"},
	{"Slack", "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)", "", "slack", "chrome"},
	{"Discord", "Mozilla/5.0 (compatible; Discordbot/2.0; +https://discordapp.com)", "", "discord", "chrome"},
	{"Telegram", "TelegramBot (like TwitterBot)", "", "telegram", "chrome"},
	{"Signal", "WhatsApp/2", "node", "signal-whatsapp", "chrome"},
	{"Signal on iOS", "WhatsApp/2", "ios", "signal-whatsapp", "firefox"},
	{"WhatsApp", "WhatsApp/2.23.20.0 A", "android", "signal-whatsapp", "chrome"},
	{"iMessage", uaIMessage, "ios", "imessage", "curl"},
	{"Twitterbot", "Twitterbot/1.0", "", "twitterbot", "chrome"},
	{"Facebook", "facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)", "", "facebook", "chrome"},
	{"LinkedIn", "LinkedInBot/1.0 (compatible; Mozilla/5.0; Apache-HttpClient +http://www.linkedin.com)", "java", "linkedin", "chrome"},
	{"Iframely", "Iframely/1.3.1 (+https://iframely.com/docs/about) Atlassian", "node", "iframely", "chrome"},
	{"Embedly", "Mozilla/5.0 (compatible; Embedly/0.2; +http://support.embed.ly/)", "", "embedly", "chrome"},
	{"Bluesky", "Mozilla/5.0 (compatible; Bluesky Cardyb/1.1; +mailto:support@bsky.app)", "", "bluesky", "chrome"},
	{"Thunderbird", "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Thunderbird/128.0", "firefox", "thunderbird", "chrome"},
	{"Thunderbird on macOS", "Mozilla/5.0 (Macintosh; Intel Mac OS X 10.15; rv:102.0) Gecko/20100101 Thunderbird/102.13.0", "", "thunderbird", "curl"},
	{"curl", "curl/8.5.0", "curl", "curl", "chrome"},
	{"git", "git/2.43.0", "gnutls", "git", "chrome"},
	{"Go", "Go-http-client/2.0", "go", "go-http-client", "firefox"},
	{"Go, HTTP/1.1", "Go-http-client/1.1", "go", "go-http-client", "python"},
	{"Wget", "Wget/1.21.3", "wget", "wget", "go"},
	{"python-requests", "python-requests/2.28.1", "python", "python-clients", "go"},
	{"Python urllib", "Python-urllib/3.11", "python", "python-clients", "node"},
	{"Node fetch", "node", "node", "node-clients", "go"},
	{"Node 20 fetch", "undici", "node", "node-clients", "python"},
	{"Java HttpClient", "Java-http-client/17.0.15", "java", "java-clients", "go"},
	{"Kubernetes probe", "kube-probe/1.29", "go", "go-health-checkers", "chrome"},
	{"Consul", "Consul Health Check", "", "go-health-checkers", "chrome"},
	{"Blackbox exporter", "Blackbox Exporter/0.25.0", "go", "go-health-checkers", "firefox"},
	{"AWS ELB", "ELB-HealthChecker/2.0", "", "cloud-health-checkers", "chrome"},
	{"AWS Classic ELB", "ELB-HealthChecker/1.0", "java", "cloud-health-checkers", "safari"},
	{"Google Cloud", "GoogleHC/1.0", "", "cloud-health-checkers", "chrome"},
	{"Feedly", uaFeedly, "", "feed-readers", "chrome"},
	{"Miniflux", uaMiniflux, "go", "feed-readers", "chrome"},
	{"NewsBlur", uaNewsBlur, "python", "feed-readers", "safari"},
	{"Inoreader", "Inoreader/1.0 (+http://www.inoreader.com/feed-fetcher; 7 subscribers; )", "", "feed-readers", "firefox"},
	{"Feedbin", "Feedbin feed-id:123 - 3 subscribers", "openssl", "feed-readers", "chrome"},
	{"FreshRSS", "FreshRSS/1.23.1 (Linux; https://freshrss.org)", "curl", "feed-readers", "chrome"},
	{"Tiny Tiny RSS", "Tiny Tiny RSS/23.04 (Unsupported) (https://tt-rss.org/)", "curl", "feed-readers", "firefox"},
	{"Liferea", "Liferea/1.12.6 (Linux; https://lzone.de/liferea/) AppleWebKit (KHTML, like Gecko)", "gnutls", "feed-readers", "chrome"},
	{"Akregator", "Akregator/5.22.3; syndication", "openssl", "feed-readers", "chrome"},
	{"NetNewsWire", uaNetNewsWire, "safari", "feed-readers-apple", "chrome"},
	{"NetNewsWire on iOS", uaNetNewsWire, "ios", "feed-readers-apple", "firefox"},
	{"Reeder", "Reeder/5050.1 CFNetwork/1410.0.3 Darwin/22.6.0", "", "feed-readers-apple", "chrome"},
}

// Real feed readers' User-Agents (sources in lists/honest-clients.yaml).
const (
	uaFeedly      = "Feedly/1.0 (+http://www.feedly.com/fetcher.html; 12 subscribers; like FeedFetcher-Google)"
	uaNewsBlur    = "NewsBlur Feed Fetcher - 5 subscribers - https://www.newsblur.com/site/123/x (Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/14.0.1 Safari/605.1.15)"
	uaNetNewsWire = "NetNewsWire (RSS Reader; https://netnewswire.com/)"
)

// monitorRequest is what a monitor or previewer sends: its User-Agent,
// Accept */*, over HTTP/2, from its stack.
func monitorRequest(ua, family string) *Request {
	r := curlRequest(ua)
	r.Path = "/blog/2024/hello"
	r.ClientFamily = family
	if family == "" {
		r.JA4 = "t13d1011h2_aaaaaaaaaaaa_bbbbbbbbbbbb"
	}
	return r
}

// TestHonestClients: each passes the default policy by its own rule; the
// same User-Agent on a browser's TLS stack, or with a browser part on
// another stack, is not let through by that rule, nor by any other: it is
// challenged.
func TestHonestClients(t *testing.T) {
	t.Parallel()
	p := mustDefault(t)
	for _, tt := range honestClients {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := monitorRequest(tt.ua, tt.family)
			d := p.Evaluate(r)
			if d.Action != ALLOW || d.Rule != tt.rule {
				t.Errorf("honest: got %s %q, want ALLOW %q\n%s", d.Action, d.Rule, tt.rule, p.Explain(r))
			}
			liar := monitorRequest(tt.ua, tt.lie)
			d = p.Evaluate(liar)
			if d.Action == ALLOW || d.Rule == tt.rule {
				t.Errorf("on %s's TLS: got %s %q, want a challenge\n%s", tt.lie, d.Action, d.Rule, p.Explain(liar))
			}
			if d.BrowserAgrees {
				t.Errorf("on %s's TLS: BrowserAgrees; the no-JS wait would be offered to an impostor", tt.lie)
			}
		})
	}
}

// TestBrowserPartOfBotUserAgents: a previewer or monitor that sends a
// browser-looking User-Agent with a bot token is held to the browser part:
// the lie detector fires on a stack that is not that browser's, and not on
// the real one.
func TestBrowserPartOfBotUserAgents(t *testing.T) {
	t.Parallel()
	p := mustDefault(t)
	tests := []struct {
		name, ua, family string
		lied             bool
	}{
		{"Better Stack's Chrome part on Go's TLS", uaBetterUptime, "go", true},
		{"Better Stack's Chrome part on Chrome's TLS", uaBetterUptime, "chrome", false},
		{"StatusCake's Chrome part on Go's TLS", "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/129.0.0.0 Safari/537.36 (StatusCake)", "go", true},
		{"Pingdom page speed on Chrome's TLS", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/129.0.0.0 Safari/537.36 PingdomPageSpeed/1.0 (pingbot/2.0; +http://www.pingdom.com/)", "chrome", false},
		{"Pingdom page speed on curl", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/129.0.0.0 Safari/537.36 PingdomPageSpeed/1.0 (pingbot/2.0; +http://www.pingdom.com/)", "curl", true},
		{"iMessage's Safari part on Apple's TLS", uaIMessage, "ios", false},
		{"iMessage's Safari part on Python", uaIMessage, "python", true},
		{"Googlebot smartphone on an unknown stack", uaGooglebotSmartphone, "", false},
		{"Googlebot smartphone on Go", uaGooglebotSmartphone, "go", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := monitorRequest(tt.ua, tt.family)
			d := p.Evaluate(r)
			if got := d.Signals.Has(SignalUATLSMismatch); got != tt.lied || d.Lied() != tt.lied {
				t.Errorf("ua_tls_mismatch %v, Lied %v, want %v\n%s", got, d.Lied(), tt.lied, p.Explain(r))
			}
			if d.BrowserAgrees {
				t.Error("BrowserAgrees for a declared bot")
			}
		})
	}
}

// TestHonestClientsSkipChallengePages: monitors and previewers are allowed
// on HTML pages too, where browsers are challenged.
func TestHonestClientsSkipChallengePages(t *testing.T) {
	t.Parallel()
	p := mustDefault(t)
	for _, tt := range honestClients {
		r := monitorRequest(tt.ua, tt.family)
		r.Header.Set("Accept", "text/html,application/xhtml+xml")
		if d := p.Evaluate(r); d.Action != ALLOW {
			t.Errorf("%s asking for HTML: %s %q", tt.name, d.Action, d.Rule)
		}
	}
}

// TestListsDocumented: every rule of the built-in lists says where its
// User-Agents come from, in a comment above it.
func TestListsDocumented(t *testing.T) {
	t.Parallel()
	for _, name := range BuiltinLists() {
		data, err := readBuiltin(name)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) == 0 || data[0] != '#' {
			t.Errorf("%s does not start with a comment", name)
		}
	}
	p := mustDefault(t)
	var got []string
	for _, r := range p.Rules() {
		got = append(got, r.Name)
	}
	for _, want := range []string{"uptimerobot", "mastodon", "synapse", "signal-whatsapp", "thunderbird", "monitor-impostor", "previewer-impostor", "client-impostor", "unverified-ccbot",
		"feed-readers", "feed-readers-apple", "feed-reader-impostor", "go-health-checkers", "cloud-health-checkers"} {
		if !slices.Contains(got, want) {
			t.Errorf("default policy lacks rule %s", want)
		}
	}
}

// tlsStack is a JA4 and the client family tlsfp's known-client table gives
// it ("" when the table does not know it), as the edge hands both to the
// policy. The edge's TestFeedReaderExplain checks the pairing through
// the real table.
type tlsStack struct{ name, ja4, family string }

var (
	// Chrome as FoxIO's captures show it (/work/shared/ja4:
	// browsers-x509.pcapng, tls-handshake.pcapng).
	stackChromeCapture  = tlsStack{"Chrome (capture)", "t13d1516h2_8daaf6152771_e5627efa2ab1", "chrome"}
	stackChromeHeadless = tlsStack{"headless Chromium 156", "t13d1517h2_8daaf6152771_cb7bf5808d99", "chrome"}
	stackFirefox        = tlsStack{"Firefox 120", "t13d1715h2_5b57614c22b0_5c2c66f702b0", "firefox"}
	stackSafari         = tlsStack{"Safari 16", "t13d2014h2_a09f3c656075_14788d8d241b", "safari"}
	// Apple's stack on macOS (FoxIO's macos_tcp_flags.pcap).
	stackApple   = tlsStack{"Apple (capture)", "t13d2613h2_2802a3db6c62_845d286b0d67", "ios"}
	stackGo      = tlsStack{"Go", "t13d1312h2_f57a46bbacb6_ab7e3b40a677", "go"}
	stackPython  = tlsStack{"Python", "t13d181100_85036bcba153_d41ae481755e", "python"}
	stackCurl    = tlsStack{"curl", "t13d3112h2_e8f1e7e78f70_b26ce05bbdd6", "curl"}
	stackGnuTLS  = tlsStack{"GnuTLS", "t13d291300_723694b0fccc_2cc26d266019", "gnutls"}
	stackJava    = tlsStack{"Java", "t13d3713h2_db35923f8641_7c76daad20ec", "java"}
	stackUnknown = tlsStack{"unknown", "t13d1011h2_aaaaaaaaaaaa_bbbbbbbbbbbb", ""}
)

// feedReaderRequest is what a feed reader sends for path: its User-Agent,
// an Accept, over HTTP/2 from stack.
func feedReaderRequest(ua, path, accept string, stack tlsStack) *Request {
	r := curlRequest(ua)
	r.Path, r.RawQuery, _ = strings.Cut(path, "?")
	r.Header.Set("Accept", accept)
	r.JA4, r.ClientFamily = stack.ja4, stack.family
	return r
}

// TestFeedReaderImpostors: a feed reader on its own TLS stack passes the
// default policy without a challenge, on pages and on feeds, whatever the
// feed's URL; the same User-Agent on a browser's TLS stack (a headless
// Chrome that borrows "Feedly/1.0") is challenged on pages, is never
// offered the no-JS wait, and gets feeds only at feed paths, which are
// open to every client.
func TestFeedReaderImpostors(t *testing.T) {
	t.Parallel()
	p := mustDefault(t)
	browsers := []tlsStack{stackChromeCapture, stackChromeHeadless, stackFirefox, stackSafari}
	tests := []struct {
		name, ua, rule string
		honest         tlsStack
		browsers       []tlsStack
	}{
		{"Feedly", uaFeedly, "feed-readers", stackUnknown, browsers},
		{"Miniflux", uaMiniflux, "feed-readers", stackGo, browsers},
		{"NewsBlur", uaNewsBlur, "feed-readers", stackPython, browsers},
		{"FreshRSS", "FreshRSS/1.23.1 (Linux; https://freshrss.org)", "feed-readers", stackCurl, browsers},
		{"Liferea", "Liferea/1.12.6 (Linux; https://lzone.de/liferea/) AppleWebKit (KHTML, like Gecko)", "feed-readers", stackGnuTLS, browsers},
		{"CommaFeed", "CommaFeed/4.6.0 (https://github.com/Athou/commafeed)", "feed-readers", stackJava, browsers},
		// Apple's readers speak through Apple's stack, which Safari shares.
		{"NetNewsWire", uaNetNewsWire, "feed-readers-apple", stackApple, []tlsStack{stackChromeCapture, stackChromeHeadless, stackFirefox}},
	}
	const html, rss = "text/html,application/xhtml+xml,*/*;q=0.8", "application/rss+xml, application/atom+xml;q=0.9, */*;q=0.8"
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := feedReaderRequest(tt.ua, "/blog/2024/hello", html, tt.honest)
			if d := p.Evaluate(r); d.Action != ALLOW || d.Rule != tt.rule {
				t.Errorf("a page on %s: %s %q, want ALLOW %q\n%s", tt.honest.name, d.Action, d.Rule, tt.rule, p.Explain(r))
			}
			for _, path := range []string{"/feed.xml", "/?feed=rss2", "/feeds/posts/default"} {
				r := feedReaderRequest(tt.ua, path, rss, tt.honest)
				if d := p.Evaluate(r); d.Action != ALLOW {
					t.Errorf("feed %s on %s: %s %q, want ALLOW\n%s", path, tt.honest.name, d.Action, d.Rule, p.Explain(r))
				}
			}
			for _, b := range tt.browsers {
				r := feedReaderRequest(tt.ua, "/blog/2024/hello", html, b)
				d := p.Evaluate(r)
				if d.Action != CHALLENGE {
					t.Errorf("a page on %s's TLS: %s %q, want CHALLENGE\n%s", b.name, d.Action, d.Rule, p.Explain(r))
				}
				if d.BrowserAgrees {
					t.Errorf("a page on %s's TLS: BrowserAgrees; the no-JS wait would be offered to an impostor", b.name)
				}
				// The Accept of a feed opens no page to a browser's stack.
				r = feedReaderRequest(tt.ua, "/?feed=rss2", rss, b)
				if d := p.Evaluate(r); d.Action != CHALLENGE {
					t.Errorf("Accept: rss on %s's TLS: %s %q, want CHALLENGE\n%s", b.name, d.Action, d.Rule, p.Explain(r))
				}
				r = feedReaderRequest(tt.ua, "/feed.xml", rss, b)
				if d := p.Evaluate(r); d.Action != ALLOW || d.Rule != "feed-path" {
					t.Errorf("/feed.xml on %s's TLS: %s %q, want ALLOW feed-path", b.name, d.Action, d.Rule)
				}
			}
		})
	}
}

// TestPageSpeedChromiumIsABrowser: Pingdom's page speed check runs
// Chromium, and on Chrome's TLS stack its name cannot be told from a
// headless Chrome's borrowing it: it is weighed and challenged as a
// browser, like any Chromium.
func TestPageSpeedChromiumIsABrowser(t *testing.T) {
	t.Parallel()
	p := mustDefault(t)
	const ua = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/129.0.0.0 Safari/537.36 PingdomPageSpeed/1.0 (pingbot/2.0; +http://www.pingdom.com/)"
	for _, s := range []tlsStack{stackChromeCapture, stackChromeHeadless} {
		r := feedReaderRequest(ua, "/", "text/html", s)
		if d := p.Evaluate(r); d.Action != CHALLENGE {
			t.Errorf("%s: %s %q, want CHALLENGE\n%s", s.name, d.Action, d.Rule, p.Explain(r))
		}
	}
}

// TestClientLies: a User-Agent that names a non-browser client over
// another client's TLS stack (or HTTP/2 preface) fires ua_tls_mismatch
// and the default policy's client-lie rule challenges it, whatever rule
// the name alone would meet; over its own stack, a library it is built
// on, or a stack the tables do not know, it passes by its own rule.
func TestClientLies(t *testing.T) {
	t.Parallel()
	p := mustDefault(t)
	tests := []struct {
		name, ua, family, h2family string
		lie                        bool
		rule                       string // the deciding rule when not a lie
	}{
		{"python-requests on Go's TLS", "python-requests/2.28.1", "go", "", true, ""},
		{"python-requests on Go's TLS and HTTP/2", "python-requests/2.28.1", "go", "go", true, ""},
		{"Python urllib on Go's TLS", "Python-urllib/3.11", "go", "", true, ""},
		{"curl on Python's TLS", "curl/7.88.1", "python", "", true, ""},
		{"curl on Node's TLS", "curl/7.88.1", "node", "", true, ""},
		{"curl on curl's TLS and Go's HTTP/2", "curl/7.88.1", "curl", "go", true, ""},
		{"curl on an unknown TLS and Go's HTTP/2", "curl/7.88.1", "", "go", true, ""},
		{"Go on Python's TLS", "Go-http-client/1.1", "python", "", true, ""},
		{"Go on curl's TLS and HTTP/2", "Go-http-client/2.0", "curl", "curl", true, ""},
		{"node on Java's TLS", "node", "java", "", true, ""},
		{"undici on Go's TLS", "undici", "go", "", true, ""},
		{"Java on Python's TLS", "Java-http-client/17.0.15", "python", "", true, ""},
		{"Wget on Go's TLS", "Wget/1.21.3", "go", "", true, ""},
		{"git on Go's TLS", "git/2.39.5", "go", "", true, ""},
		{"aiohttp on Chrome's TLS", "aiohttp/3.9.1", "chrome", "", true, ""},
		{"python-requests on Python's TLS", "python-requests/2.28.1", "python", "", false, "python-clients"},
		{"python-requests on OpenSSL's", "python-requests/2.28.1", "openssl", "", false, "python-clients"},
		{"python-requests on an unknown TLS", "python-requests/2.28.1", "", "", false, "python-clients"},
		{"curl on curl's TLS and HTTP/2", "curl/7.88.1", "curl", "curl", false, "curl"},
		{"curl on GnuTLS", "curl/7.88.1", "gnutls", "", false, "curl"},
		{"git on GnuTLS", "git/2.39.5", "gnutls", "", false, "git"},
		{"git on wget's GnuTLS", "git/2.39.5", "wget", "", false, "git"},
		{"Go on Go's TLS and HTTP/2", "Go-http-client/2.0", "go", "go", false, "go-http-client"},
		{"node on Node's TLS", "node", "node", "", false, "node-clients"},
		{"Java on Java's TLS", "Java-http-client/17.0.15", "java", "", false, "java-clients"},
		{"a name that is not a client's", "nodejs-thing/1.0", "go", "", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := monitorRequest(tt.ua, tt.family)
			r.H2Family = tt.h2family
			switch tt.h2family {
			case "go":
				r.H2FP = h2fpGo
			case "curl":
				r.H2FP = h2fpCurl
			}
			d := p.Evaluate(r)
			if got := d.Signals.Has(SignalUATLSMismatch); got != tt.lie {
				t.Errorf("ua_tls_mismatch %v, want %v\n%s", got, tt.lie, p.Explain(r))
			}
			switch {
			case tt.lie && (d.Action != CHALLENGE || d.Rule != "client-lie" || d.Challenge.Bits != 16):
				t.Errorf("got %s %q %d bits, want CHALLENGE by client-lie at 16 bits\n%s", d.Action, d.Rule, d.Challenge.Bits, p.Explain(r))
			case !tt.lie && tt.rule != "" && (d.Action != ALLOW || d.Rule != tt.rule):
				t.Errorf("got %s %q, want ALLOW by %q\n%s", d.Action, d.Rule, tt.rule, p.Explain(r))
			}
		})
	}
}

// TestStormPolicyFile: bench/storm/storm-policy.yaml, the pattern
// docs/policy.md shows for scripts in a storm, loads; in a storm an honest
// curl is counted in its JA4's bucket (RATE), on a calm day it passes by
// the default policy's own rule, and a lie is challenged either way.
func TestStormPolicyFile(t *testing.T) {
	t.Parallel()
	p, err := Load(filepath.Join("..", "bench", "storm", "storm-policy.yaml"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !p.UsesPressure() {
		t.Error("the storm policy reads storm, but UsesPressure says no")
	}
	for _, tt := range []struct {
		name, ua, family string
		storm            bool
		action           Action
		rule             string
	}{
		{"curl, calm", "curl/7.88.1", "curl", false, ALLOW, "curl"},
		{"curl, storm", "curl/7.88.1", "curl", true, RATE, "tools-in-storm"},
		{"Go, storm", "Go-http-client/2.0", "go", true, RATE, "tools-in-storm"},
		{"python-requests over Go's TLS, calm", "python-requests/2.28.1", "go", false, CHALLENGE, "lie-first"},
		{"python-requests over Go's TLS, storm", "python-requests/2.28.1", "go", true, CHALLENGE, "lie-first"},
		{"git, storm", "git/2.39.5", "gnutls", true, ALLOW, "git"},
	} {
		r := monitorRequest(tt.ua, tt.family)
		r.Storm = tt.storm
		if tt.storm {
			r.Pressure = 1
		}
		d := p.Evaluate(r)
		if d.Action != tt.action || d.Rule != tt.rule {
			t.Errorf("%s: %s by %q, want %s by %q\n%s", tt.name, d.Action, d.Rule, tt.action, tt.rule, p.Explain(r))
		}
	}
}

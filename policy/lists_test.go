package policy

import (
	"slices"
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
	{"Pingdom page speed", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/129.0.0.0 Safari/537.36 PingdomPageSpeed/1.0 (pingbot/2.0; +http://www.pingdom.com/)", "chrome", "pingdom-page-speed", "curl"},
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
}

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
	for _, want := range []string{"uptimerobot", "mastodon", "synapse", "signal-whatsapp", "thunderbird", "monitor-impostor", "previewer-impostor", "client-impostor", "unverified-ccbot"} {
		if !slices.Contains(got, want) {
			t.Errorf("default policy lacks rule %s", want)
		}
	}
}

package policy

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

const robotsTxt = `# example robots.txt
User-agent: GPTBot
User-agent: CCBot
Disallow: /

User-agent: Googlebot
Disallow: /search
Disallow: /*.pdf$
Allow: /search/about
Allow: /public/
Crawl-delay: 10

User-agent: *
Disallow: /private/
Disallow:
Allow: /private/press/
Sitemap: https://example.org/sitemap.xml
`

func TestRobotsToPolicy(t *testing.T) {
	t.Parallel()
	out, err := RobotsToPolicy(strings.NewReader(robotsTxt))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Parse("robots.yaml", out, Options{})
	if err != nil {
		t.Fatalf("generated policy does not parse: %v\n%s", err, out)
	}
	if len(p.Warnings()) != 0 {
		t.Errorf("warnings: %v", p.Warnings())
	}
	tests := []struct {
		ua, path string
		check    CrawlerCheck
		want     Action
		rule     string
	}{
		{"Mozilla/5.0 (compatible; GPTBot/1.2)", "/", CrawlerUnchecked, DENY, "robots-gptbot-ccbot-disallow-1"},
		{"CCBot/2.0 (https://commoncrawl.org/faq/)", "/anything", CrawlerVerified, DENY, "robots-gptbot-ccbot-disallow-1"},
		{"Mozilla/5.0 (compatible; GPTBot/1.2)", "/robots.txt", CrawlerUnchecked, ALLOW, "robots-txt"},
		{uaGooglebot, "/search", CrawlerVerified, DENY, "robots-googlebot-disallow-1"},
		// The longer Allow exempts the path from the Disallow; the group's
		// Crawl-delay then applies.
		{uaGooglebot, "/search/about", CrawlerVerified, RATE, "robots-googlebot-crawl-delay"},
		{uaGooglebot, "/doc.pdf", CrawlerVerified, DENY, "robots-googlebot-disallow-2"},
		{uaGooglebot, "/public/x.pdf", CrawlerVerified, RATE, "robots-googlebot-crawl-delay"},
		{uaGooglebot, "/doc.pdf.html", CrawlerVerified, RATE, "robots-googlebot-crawl-delay"},
		{uaGooglebot, "/search", CrawlerFailed, DENY, "robots-fake-crawler"},
		{uaChrome, "/private/x", CrawlerUnchecked, CHALLENGE, "robots-all-disallow-1"},
		{uaChrome, "/private/press/2024", CrawlerUnchecked, CHALLENGE, "browser"},
		{uaChrome, "/", CrawlerUnchecked, CHALLENGE, "browser"},
		// An AI crawler robots.txt does not name is still denied by the
		// default policy, even on a path an Allow line exempts.
		{"ClaudeBot/1.0", "/private/press/2024", CrawlerUnchecked, DENY, "ai-crawlers"},
		{"curl/8.5.0", "/private/x", CrawlerUnchecked, ALLOW, "curl"},
	}
	for _, tt := range tests {
		r := chromeRequest()
		r.Header.Set("User-Agent", tt.ua)
		if tt.ua != uaChrome {
			r.ClientFamily = ""
		}
		r.Path, r.CrawlerVerified = tt.path, tt.check
		d := p.Evaluate(r)
		if d.Action != tt.want || d.Rule != tt.rule {
			t.Errorf("%s %s: got %s %q, want %s %q\n%s", tt.ua, tt.path, d.Action, d.Rule, tt.want, tt.rule, p.Explain(r))
		}
		if d.Action == RATE && (d.Rate.Rate != 0.1 || d.Rate.Burst != 1) {
			t.Errorf("crawl-delay 10 gave %+v", d.Rate)
		}
	}
}

// TestRobotsRealFiles converts real robots.txt files (testdata/robots)
// and checks what people, honest clients and crawlers get.
func TestRobotsRealFiles(t *testing.T) {
	t.Parallel()
	type want struct {
		ua, family, path string
		action           Action
		rule             string
	}
	tests := []struct {
		file   string
		opts   RobotsOptions
		header []string
		cases  []want
	}{
		{"gitlab.txt", RobotsOptions{}, []string{"imports (builtin)/default.yaml", "stay allowed on disallowed paths", "Disallow challenges (CHALLENGE)"}, []want{
			// git clone of a project: /*/*.git is disallowed for crawlers.
			{"git/2.43.0", "gnutls", "/group/project.git/info/refs", ALLOW, "git"},
			{"curl/8.5.0", "curl", "/api/v4/projects", ALLOW, "curl"},
			{"Mozilla/5.0+(compatible; UptimeRobot/2.0; http://www.uptimerobot.com/)", "", "/help", ALLOW, "uptimerobot"},
			{uaChrome, "chrome", "/group/project/-/archive/main.zip", CHALLENGE, "robots-all-disallow-18"},
			{uaChrome, "chrome", "/users/sign_in", CHALLENGE, "browser"},
			{uaChrome, "chrome", "/users/alice", CHALLENGE, "robots-all-disallow-10"},
			{uaGPTBot, "", "/group/project", DENY, "ai-crawlers"},
			{"Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Thunderbird/128.0", "firefox", "/group/project/-/tags?format=atom", ALLOW, "thunderbird"},
		}},
		{"gitlab.txt", RobotsOptions{DisallowHonestClients: true}, []string{"challenged on disallowed paths like everyone"}, []want{
			{"git/2.43.0", "gnutls", "/group/project.git/info/refs", CHALLENGE, "robots-all-disallow-16"},
			{"curl/8.5.0", "curl", "/", ALLOW, "curl"},
		}},
		{"wikipedia.txt", RobotsOptions{}, []string{"named User-agent groups"}, []want{
			// Named groups are obeyed as written, wget included.
			{"Wget/1.21.4", "wget", "/wiki/Main_Page", DENY, "robots-wget-disallow-1"},
			{"Fetch/2.0a (CMS Detection/Web/SEO analysis tool, see http://guess.scritch.org)", "", "/", DENY, "robots-fetch-disallow-1"},
			// "Fetch" is a product token, not a substring.
			{"node-fetch/1.0 (+https://github.com/bitinn/node-fetch)", "node", "/wiki/Main_Page", ALLOW, "node-clients"},
			{"Mediapartners-Google/2.1", "", "/", DENY, "robots-mediapartners-google-disallow-1"},
			{uaChrome, "chrome", "/w/index.php", CHALLENGE, "robots-all-disallow-1"},
			{uaChrome, "chrome", "/w/load.php", CHALLENGE, "browser"},
			{uaChrome, "chrome", "/wiki/Wikipedia:Löschkandidaten/Foo", CHALLENGE, "robots-all-disallow-9"},
			{uaChrome, "chrome", "/wiki/Special:Search", CHALLENGE, "robots-all-disallow-8"},
			{uaChrome, "chrome", "/wiki/Main_Page", CHALLENGE, "browser"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			in, err := os.ReadFile("testdata/robots/" + tt.file)
			if err != nil {
				t.Fatal(err)
			}
			out, err := RobotsToPolicyWith(bytes.NewReader(in), tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			header, _, _ := strings.Cut(string(out), "\nbots:")
			for _, h := range tt.header {
				if !strings.Contains(strings.ReplaceAll(header, "\n#  ", ""), h) {
					t.Errorf("header lacks %q:\n%s", h, header)
				}
			}
			p, err := Parse(tt.file+".yaml", out, Options{})
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if len(p.Warnings()) != 0 {
				t.Errorf("warnings: %v", p.Warnings())
			}
			for _, c := range tt.cases {
				r := chromeRequest()
				r.Header.Set("User-Agent", c.ua)
				r.ClientFamily = c.family
				if c.family == "curl" {
					r.H2FP, r.H2Family = h2fpCurl, "curl"
				}
				r.Path, r.RawQuery, _ = strings.Cut(c.path, "?")
				d := p.Evaluate(r)
				if d.Action != c.action || d.Rule != c.rule {
					t.Errorf("%s %s: got %s %q, want %s %q\n%s", c.ua, c.path, d.Action, d.Rule, c.action, c.rule, p.Explain(r))
				}
			}
		})
	}
}

// TestRobotsQueries: Disallow lines with a query are left out and counted
// in the header; Allow lines are cut at the query.
func TestRobotsQueries(t *testing.T) {
	t.Parallel()
	out, err := RobotsToPolicy(strings.NewReader("User-agent: *\nDisallow: /index.php?title=Special:\nDisallow: /w/\nAllow: /w/load.php?\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "# - 1 Disallow line(s) with a query") {
		t.Errorf("header does not count the query line:\n%s", out)
	}
	p, err := Parse("q.yaml", out, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := chromeRequest()
	for path, rule := range map[string]string{"/index.php": "browser", "/w/x": "robots-all-disallow-1", "/w/load.php": "browser"} {
		r.Path = path
		if d := p.Evaluate(r); d.Rule != rule {
			t.Errorf("%s: rule %q, want %q", path, d.Rule, rule)
		}
	}
}

func TestRobotsPathRegex(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"/", "^/"},
		{"/a.b", `^/a\.b`},
		{"/*.pdf$", `^/.*\.pdf$`},
		{"/a*b*c", `^/a.*b.*c`},
		{"/$", `^/$`},
	}
	for _, tt := range tests {
		if got := robotsPathRegex(tt.in); got != tt.want {
			t.Errorf("robotsPathRegex(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestRobotsEmpty: a robots.txt that disallows nothing gives the default
// policy's decisions.
func TestRobotsEmpty(t *testing.T) {
	t.Parallel()
	def := mustDefault(t)
	for _, in := range []string{"", "User-agent: *\nDisallow:\n", "garbage\n\x00\xff"} {
		out, err := RobotsToPolicy(strings.NewReader(in))
		if err != nil {
			t.Fatal(err)
		}
		p, err := Parse("robots.yaml", out, Options{})
		if err != nil {
			t.Fatalf("%q: %v\n%s", in, err, out)
		}
		for _, r := range []*Request{chromeRequest(), curlRequest("curl/8.5.0"), curlRequest(uaGPTBot)} {
			if d, w := p.Evaluate(r), def.Evaluate(r); d.Action != w.Action || d.Rule != w.Rule {
				t.Errorf("%q: %s %q, default policy %s %q", in, d.Action, d.Rule, w.Action, w.Rule)
			}
		}
	}
}

package policy

import (
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
	p.weights = [numSignals]int{}
	tests := []struct {
		ua, path string
		want     Action
		rule     string
	}{
		{"Mozilla/5.0 (compatible; GPTBot/1.2)", "/", DENY, "robots-gptbot-ccbot-disallow-1"},
		{"CCBot/2.0", "/anything", DENY, "robots-gptbot-ccbot-disallow-1"},
		{uaGooglebot, "/search?q=x", DENY, "robots-googlebot-disallow-3"},
		{uaGooglebot, "/search/about", ALLOW, "robots-googlebot-allow-1"},
		{uaGooglebot, "/doc.pdf", DENY, "robots-googlebot-disallow-4"},
		{uaGooglebot, "/doc.pdf.html", RATE, "robots-googlebot-crawl-delay"},
		{uaGooglebot, "/public/x.pdf", ALLOW, "robots-googlebot-allow-2"}, // the longer Allow wins over /*.pdf$
		{uaChrome, "/private/x", CHALLENGE, "robots-all-disallow-2"},
		{uaChrome, "/private/press/2024", ALLOW, "robots-all-allow-1"},
		{uaChrome, "/", ALLOW, ""},
	}
	for _, tt := range tests {
		r := chromeRequest()
		r.Header.Set("User-Agent", tt.ua)
		r.Path, _, _ = strings.Cut(tt.path, "?")
		d := p.Evaluate(r)
		if d.Action != tt.want || d.Rule != tt.rule {
			t.Errorf("%s %s: got %s %q, want %s %q\n%s", tt.ua, tt.path, d.Action, d.Rule, tt.want, tt.rule, out)
		}
		if d.Action == RATE && (d.Rate.Rate != 0.1 || d.Rate.Burst != 1) {
			t.Errorf("crawl-delay 10 gave %+v", d.Rate)
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

func TestRobotsEmpty(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"", "User-agent: *\nDisallow:\n", "garbage\n\x00\xff"} {
		out, err := RobotsToPolicy(strings.NewReader(in))
		if err != nil {
			t.Fatal(err)
		}
		p, err := Parse("robots.yaml", out, Options{})
		if err != nil {
			t.Fatalf("%q: %v\n%s", in, err, out)
		}
		if d := p.Evaluate(chromeRequest()); d.Action != ALLOW {
			t.Errorf("%q: %s, want ALLOW", in, d.Action)
		}
	}
}

package policy_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/maatproxy/maat/policy"
)

func Example() {
	p, err := policy.Parse("policy.yaml", []byte(`
bots:
  - name: ai-crawlers
    user_agent_regex: (?i)GPTBot|ClaudeBot
    action: DENY
  - name: generic-browser
    user_agent_regex: Mozilla
    action: WEIGH
    weight: { adjust: 10 }
thresholds:
  - { name: ok, expression: weight <= 0, action: ALLOW }
  - { name: browsers, expression: weight > 0, action: CHALLENGE, challenge: { algorithm: fast, difficulty: 3 } }
`), policy.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, ua := range []string{"curl/8.5.0", "Mozilla/5.0 (compatible; GPTBot/1.2)", "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0"} {
		d := p.Evaluate(&policy.Request{
			RemoteAddr: netip.MustParseAddr("192.0.2.1"),
			Method:     "GET",
			Path:       "/",
			Proto:      "HTTP/2.0",
			Header:     http.Header{"User-Agent": {ua}, "Accept": {"*/*"}, "Accept-Language": {"en"}},
		})
		fmt.Println(d.Action, d.Rule, d.Challenge.Bits, strings.Join(d.AppendNames(nil), ","))
	}
	// Output:
	// ALLOW ok 0 ok
	// DENY ai-crawlers 0 ai-crawlers
	// CHALLENGE browsers 12 generic-browser,browsers
}

func ExampleRobotsToPolicy() {
	out, _ := policy.RobotsToPolicy(strings.NewReader("User-agent: GPTBot\nDisallow: /\n\nUser-agent: *\nDisallow: /private/\n"))
	_, rules, _ := strings.Cut(string(out), "bots:\n")
	fmt.Print(rules)
	// Output:
	//   - name: robots-txt
	//     action: ALLOW
	//     path_regex: ^/robots\.txt$
	//   - name: robots-fake-crawler
	//     action: DENY
	//     signal:
	//       - fake_crawler
	//   - name: robots-gptbot-disallow-1
	//     action: DENY
	//     user_agent_regex: (?i)(?:^|[^a-z0-9_-])(?:GPTBot)(?:$|[^a-z0-9_-])
	//     path_regex: ^/
	//   - import: (builtin)/keep-internet-working.yaml
	//   - import: (builtin)/honest-clients.yaml
	//   - import: (builtin)/monitors.yaml
	//   - import: (builtin)/link-previews.yaml
	//   - name: robots-all-disallow-1
	//     action: CHALLENGE
	//     path_regex: ^/private/
	//   - import: (builtin)/default.yaml
}

// staticDNS is a Resolver with one forward-confirmed crawler address.
type staticDNS struct{}

func (staticDNS) LookupAddr(_ context.Context, addr string) ([]string, error) {
	if addr == "66.249.66.1" {
		return []string{"crawl-66-249-66-1.googlebot.com."}, nil
	}
	return []string{"localhost"}, nil
}

func (staticDNS) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if host == "crawl-66-249-66-1.googlebot.com" {
		return []netip.Addr{netip.MustParseAddr("66.249.66.1")}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func ExampleVerifier() {
	v, err := policy.NewVerifier(policy.VerifierConfig{Resolver: staticDNS{}})
	if err != nil {
		fmt.Println(err)
		return
	}
	ua := "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
	for _, ip := range []string{"66.249.66.1", "127.0.0.1"} {
		r := &policy.Request{RemoteAddr: netip.MustParseAddr(ip), Header: http.Header{"User-Agent": {ua}}}
		if policy.ClaimedCrawler(ua) != "" { // the edge asks only then
			r.CrawlerVerified = v.Verify(context.Background(), ua, r.RemoteAddr)
		}
		fmt.Println(ip, r.CrawlerVerified)
	}
	// Output:
	// 66.249.66.1 verified
	// 127.0.0.1 failed
}

// The edge offers the no-JS wait only where the default policy allows it:
// a browser whose fingerprints agree with its User-Agent, no lie, and a
// weight below WaitMaxWeight.
func ExamplePolicy_WaitMaxWeight() {
	p, err := policy.Default()
	if err != nil {
		fmt.Println(err)
		return
	}
	chrome := "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"
	for _, family := range []string{"chrome", "curl"} {
		d := p.Evaluate(&policy.Request{
			RemoteAddr: netip.MustParseAddr("192.0.2.1"),
			Method:     "GET",
			Path:       "/",
			Proto:      "HTTP/2.0",
			TLS:        true,
			Header: http.Header{"User-Agent": {chrome}, "Accept": {"text/html"}, "Accept-Language": {"en"},
				"Sec-Fetch-Mode": {"navigate"}, "Sec-Ch-Ua": {`"Chromium";v="131"`}},
			ClientFamily: family,
		})
		wait := d.Action == policy.CHALLENGE && d.BrowserAgrees && !d.Lied() && d.Weight < p.WaitMaxWeight()
		fmt.Printf("Chrome's User-Agent on %s's TLS: %s weight %d, wait offered: %v\n", family, d.Action, d.Weight, wait)
	}
	// Output:
	// Chrome's User-Agent on chrome's TLS: CHALLENGE weight 10, wait offered: true
	// Chrome's User-Agent on curl's TLS: CHALLENGE weight 40, wait offered: false
}

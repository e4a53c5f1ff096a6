package policy

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test -update rewrites it):\n%s", name, got)
	}
}

func TestRobotsGolden(t *testing.T) {
	t.Parallel()
	in, err := os.ReadFile("testdata/golden/robots.txt")
	if err != nil {
		t.Fatal(err)
	}
	out, err := RobotsToPolicy(bytes.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "robots.yaml", out)
}

// TestExplainGolden records what the default policy says about the clients
// of the acceptance list.
func TestExplainGolden(t *testing.T) {
	t.Parallel()
	p, err := LoadDefault(Options{Geo: Geo{ASN: true, Country: true}})
	if err != nil {
		t.Fatal(err)
	}
	python := curlRequest(uaFirefox)
	python.ClientFamily, python.Proto = "python", "HTTP/1.1"
	python.HeaderOrder = []string{"Host", "User-Agent", "Accept-Encoding", "Accept", "Connection"}
	gobot := curlRequest(uaGooglebot)
	gobot.ClientFamily, gobot.CrawlerVerified = "go", CrawlerFailed
	headless := chromeRequest()
	headless.Header.Set("User-Agent", uaHeadless)
	headless.Header.Del("Accept-Language")
	feed := curlRequest(uaMiniflux)
	feed.Path, feed.ClientFamily = "/feed.xml", "go"
	bot := curlRequest(uaGooglebot)
	bot.ClientFamily = ""
	botVerified := curlRequest(uaGooglebot)
	botVerified.ClientFamily, botVerified.CrawlerVerified = "", CrawlerVerified
	cloud := chromeRequest()
	cloud.ASN, cloud.ASOrg, cloud.Country = 16509, "AMAZON-02", "US"
	home := chromeRequest()
	home.ASN, home.ASOrg, home.Country = 3320, "Deutsche Telekom AG", "DE"
	robot := curlRequest("Mozilla/5.0+(compatible; UptimeRobot/2.0; http://www.uptimerobot.com/)")
	robot.ClientFamily = "node"
	fakeRobot := chromeRequest()
	fakeRobot.Header.Set("User-Agent", "Mozilla/5.0+(compatible; UptimeRobot/2.0; http://www.uptimerobot.com/)")
	parrot := chromeRequest()
	parrot.H2FP, parrot.H2Family = h2fpGoChromeOrder, "go"
	cases := []struct {
		name string
		r    *Request
		ran  *Checks
	}{
		{"chrome", chromeRequest(), nil},
		{"curl", curlRequest("curl/8.5.0"), nil},
		{"curl with a Chrome UA", curlRequest(uaChrome), nil},
		{"python with a Firefox UA", python, nil},
		{"go with a Googlebot UA", gobot, nil},
		{"GPTBot", curlRequest(uaGPTBot), nil},
		{"headless chromium", headless, nil},
		{"feed reader", feed, nil},
		{"Googlebot, verification skipped", bot, nil},
		{"Googlebot, verification ran without an answer", bot, &Checks{Crawler: true}},
		{"Googlebot, verified", botVerified, nil},
		{"chrome from a cloud network", cloud, nil},
		{"chrome from a home network", home, nil},
		{"UptimeRobot", robot, nil},
		{"UptimeRobot's User-Agent on Chrome's TLS", fakeRobot, nil},
		{"a parrot: Chrome's TLS under Go's HTTP/2 in Chrome's pseudo-header order", parrot, nil},
	}
	var b strings.Builder
	for _, c := range cases {
		b.WriteString("== " + c.name + "\n")
		out := p.Explain(c.r)
		if c.ran != nil {
			out = p.ExplainChecks(c.r, *c.ran)
		}
		b.WriteString(strings.Replace(out, "policy "+p.Version(), "policy (version)", 1))
	}
	golden(t, "explain-default.txt", []byte(b.String()))
}

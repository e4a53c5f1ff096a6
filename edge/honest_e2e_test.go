package edge

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/maatproxy/maat/tlsfp"
)

// Stacks the policy's tests pair with client families (policy's
// lists_test.go); their JA4s from FoxIO's captures (../shared/ja4) and the
// known-client table.
const (
	ja4ChromeCapture  = "t13d1516h2_8daaf6152771_e5627efa2ab1" // browsers-x509.pcapng, tls-handshake.pcapng
	ja4ChromeHeadless = "t13d1517h2_8daaf6152771_cb7bf5808d99"
	ja4Firefox120     = "t13d1715h2_5b57614c22b0_5c2c66f702b0"
	ja4Safari16       = "t13d2014h2_a09f3c656075_14788d8d241b"
	ja4AppleCapture   = "t13d2613h2_2802a3db6c62_845d286b0d67" // macos_tcp_flags.pcap
	ja4Go             = "t13d1312h2_f57a46bbacb6_ab7e3b40a677"
	ja4Unknown        = "t13d1011h2_aaaaaaaaaaaa_bbbbbbbbbbbb"

	uaFeedly      = "Feedly/1.0 (+http://www.feedly.com/fetcher.html; 12 subscribers; like FeedFetcher-Google)"
	uaNetNewsWire = "NetNewsWire (RSS Reader; https://netnewswire.com/)"
)

// TestFeedReaderExplain: `edge policy explain` with a browser's JA4 and a
// feed reader's or health checker's User-Agent says CHALLENGE (a headless
// Chrome that calls itself Feedly), with the reader's own stack ALLOW; and
// the JA4s the policy's tests stand on map to the families they assume.
func TestFeedReaderExplain(t *testing.T) {
	t.Parallel()
	for ja4, family := range map[string]string{
		ja4ChromeCapture: "chrome", ja4ChromeHeadless: "chrome", ja4Firefox120: "firefox", ja4Safari16: "safari",
		ja4AppleCapture: "ios", ja4Go: "go", ja4Unknown: "",
		"t13d181100_85036bcba153_d41ae481755e": "python", "t13d3112h2_e8f1e7e78f70_b26ce05bbdd6": "curl",
		"t13d291300_723694b0fccc_2cc26d266019": "gnutls", "t13d3713h2_db35923f8641_7c76daad20ec": "java",
	} {
		if c, _ := tlsfp.LookupClient(ja4); c.Family != family {
			t.Errorf("%s is %q in the known-client table; the policy's tests take it for %q", ja4, c.Family, family)
		}
	}
	tests := []struct {
		name, ua, ja4, decision, rule string
	}{
		{"Feedly on Chrome", uaFeedly, ja4ChromeCapture, "CHALLENGE", "feed-reader-impostor"},
		{"Feedly on headless Chromium", uaFeedly, ja4ChromeHeadless, "CHALLENGE", "feed-reader-impostor"},
		{"Miniflux on Chrome", feedUA, ja4ChromeCapture, "CHALLENGE", "feed-reader-impostor"},
		{"NetNewsWire on Chrome", uaNetNewsWire, ja4ChromeCapture, "CHALLENGE", "feed-reader-impostor"},
		{"NetNewsWire on Firefox", uaNetNewsWire, ja4Firefox120, "CHALLENGE", "feed-reader-impostor"},
		{"kube-probe on Chrome", "kube-probe/1.29", ja4ChromeCapture, "CHALLENGE", "monitor-impostor"},
		{"Feedly on its own stack", uaFeedly, ja4Unknown, "ALLOW", "feed-readers"},
		{"Miniflux on Go", feedUA, ja4Go, "ALLOW", "feed-readers"},
		{"NetNewsWire on Apple's stack", uaNetNewsWire, ja4AppleCapture, "ALLOW", "feed-readers-apple"},
		{"kube-probe on Go", "kube-probe/1.29", ja4Go, "ALLOW", "go-health-checkers"},
		{"ELB on an unknown stack", "ELB-HealthChecker/2.0", ja4Unknown, "ALLOW", "cloud-health-checkers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, err := ExplainPolicy(context.Background(), ExplainRequest{UA: tt.ua, JA4: tt.ja4, Path: "/blog/2024/hello"}, ExplainOptions{NoDNS: true})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "decision: "+tt.decision+" ") || !strings.Contains(out, " rule="+tt.rule+"\n") {
				t.Errorf("want %s by %s:\n%s", tt.decision, tt.rule, out)
			}
		})
	}
}

// TestFeedReaderThroughEdge: a Go client that sends Feedly's User-Agent
// gets pages and feeds, whatever the feed's URL; a utls Chrome parrot with
// the same User-Agent, as a headless Chrome would send it, is challenged
// on pages and on feeds asked for by Accept alone, without the no-JS wait,
// and gets only feeds at feed paths, which are every client's.
func TestFeedReaderThroughEdge(t *testing.T) {
	t.Parallel()
	e, fp := startChallengeEdge(t, "")
	const rss = "application/rss+xml, application/atom+xml;q=0.9, */*;q=0.8"
	reader := e.client(t, "h2")
	for _, tt := range []struct{ path, accept string }{
		{"/feed.xml", rss}, {"/go/index.php?feed=rss2", rss}, {"/go/blog/2024/hello", "text/html"},
	} {
		res, body := get(t, reader, e.url(tt.path), "User-Agent", uaFeedly, "Accept", tt.accept)
		if res.StatusCode != http.StatusOK || !strings.Contains(body, "Path="+tt.path+"\n") {
			t.Errorf("the reader on %s: %d %q", tt.path, res.StatusCode, body)
		}
	}
	if rules := waitLine(t, fp, "/go/blog/2024/hello").rules(); !slices.Contains(rules, "feed-readers") {
		t.Errorf("the reader's page was let through by %v, want feed-readers", rules)
	}

	// A headless Chrome sends Chrome's headers with the User-Agent it
	// chose, and the Accept of a feed where it wants one.
	page := slices.Clone(chromeHeaders)
	for i := range page {
		if page[i][0] == "User-Agent" {
			page[i][1] = uaFeedly
		}
	}
	feed := slices.Clone(page)
	for i := range feed {
		if feed[i][0] == "Accept" {
			feed[i][1] = rss
		}
	}
	for _, tt := range []struct {
		path string
		hdr  [][2]string
	}{{"/chrome/blog/2024/hello", page}, {"/chrome/index.php?feed=rss2", feed}} {
		res, body := chromeRoundTrip(t, e, tt.path, tt.hdr, "")
		if res.StatusCode != http.StatusForbidden || res.Header.Get("Maat-Mitigated") != "challenge" {
			t.Errorf("Feedly's name on Chrome's TLS, %s: %d %q, want a challenge", tt.path, res.StatusCode, res.Header.Get("Maat-Mitigated"))
			continue
		}
		if p := parsePage(t, body); p.wait != "" || p.pass == "" {
			t.Errorf("%s: the impostor was offered the wait (%q) or no proof of work (%q)", tt.path, p.wait, p.pass)
		}
	}
	if rules := waitLine(t, fp, "/chrome/blog/2024/hello").rules(); !slices.Contains(rules, "feed-reader-impostor") {
		t.Errorf("the impostor was challenged by %v, want feed-reader-impostor", rules)
	}
	if res, body := chromeRoundTrip(t, e, "/chrome/feed.xml", feed, ""); res.StatusCode != http.StatusOK || !strings.Contains(body, "Path=/chrome/feed.xml\n") {
		t.Errorf("a feed path on Chrome's TLS: %d, want the feed", res.StatusCode)
	}
}

package edge

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

// uaFeedly is Feedly's User-Agent.
const uaFeedly = "Feedly/1.0 (+http://www.feedly.com/fetcher.html; 12 subscribers; like FeedFetcher-Google)"

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

package policy

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakeDNS answers PTR and A/AAAA queries from tables and counts queries.
type fakeDNS struct {
	mu      sync.Mutex
	ptr     map[string][]string
	fwd     map[string][]netip.Addr
	fail    bool // answer with a temporary error
	queries int
}

func (f *fakeDNS) LookupAddr(_ context.Context, addr string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queries++
	if f.fail {
		return nil, &net.DNSError{Err: "timeout", Name: addr, IsTimeout: true, IsTemporary: true}
	}
	if n, ok := f.ptr[addr]; ok {
		return n, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: addr, IsNotFound: true}
}

func (f *fakeDNS) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queries++
	if a, ok := f.fwd[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func newFakeDNS() *fakeDNS {
	return &fakeDNS{
		ptr: map[string][]string{
			"66.249.66.1":   {"crawl-66-249-66-1.googlebot.com."},
			"66.249.66.2":   {"crawl-66-249-66-2.googlebot.com."},      // forward does not confirm
			"203.0.113.9":   {"crawl-66-249-66-1.googlebot.com.evil."}, // wrong domain
			"157.55.39.1":   {"msnbot-157-55-39-1.search.msn.com."},
			"2001:4860::1":  {"crawl.googlebot.com."},
			"198.51.100.10": {"fake.googlebot.com.example.net."},
		},
		fwd: map[string][]netip.Addr{
			"crawl-66-249-66-1.googlebot.com":      {netip.MustParseAddr("66.249.66.1")},
			"crawl-66-249-66-2.googlebot.com":      {netip.MustParseAddr("192.0.2.1")},
			"msnbot-157-55-39-1.search.msn.com":    {netip.MustParseAddr("157.55.39.1")},
			"crawl.googlebot.com":                  {netip.MustParseAddr("2001:4860::1")},
			"crawl-66-249-66-1.googlebot.com.evil": {netip.MustParseAddr("203.0.113.9")},
		},
	}
}

func TestClaimedCrawler(t *testing.T) {
	t.Parallel()
	tests := []struct{ ua, want string }{
		{uaGooglebot, "googlebot"},
		{"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm) Chrome/116.0.1938.76 Safari/537.36", "bingbot"},
		{"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/13.1.1 Safari/605.1.15 (Applebot/0.1; +http://www.apple.com/go/applebot)", "applebot"},
		{"DuckDuckBot/1.1; (+http://duckduckgo.com/duckduckbot.html)", "duckduckbot"},
		{"CCBot/2.0 (https://commoncrawl.org/faq/)", "ccbot"},
		{uaChrome, ""},
		{uaGPTBot, ""},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			t.Parallel()
			if got := ClaimedCrawler(tt.ua); got != tt.want {
				t.Errorf("ClaimedCrawler = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestVerify(t *testing.T) {
	t.Parallel()
	ranges, err := ParseRanges([]byte(`{"creationTime": "2025-01-01T00:00:00", "prefixes": [{"ipv4Prefix": "20.191.45.212/32"}, {"ipv6Prefix": "2620:0:2d0::/48"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	const bing = "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)"
	const ddg = "DuckDuckBot/1.1; (+http://duckduckgo.com/duckduckbot.html)"
	tests := []struct {
		name string
		ua   string
		addr string
		want CrawlerCheck
	}{
		{"googlebot verified", uaGooglebot, "66.249.66.1", CrawlerVerified},
		{"googlebot v4-mapped", uaGooglebot, "::ffff:66.249.66.1", CrawlerVerified},
		{"googlebot ipv6", uaGooglebot, "2001:4860::1", CrawlerVerified},
		{"forward does not confirm", uaGooglebot, "66.249.66.2", CrawlerFailed},
		{"wrong domain", uaGooglebot, "203.0.113.9", CrawlerFailed},
		{"suffix trick", uaGooglebot, "198.51.100.10", CrawlerFailed},
		{"no PTR: loopback", uaGooglebot, "127.0.0.1", CrawlerFailed},
		{"bingbot by ranges, not DNS", bing, "20.191.45.212", CrawlerVerified},
		{"bingbot outside ranges", bing, "157.55.39.1", CrawlerFailed},
		{"bingbot ipv6 range", bing, "2620:0:2d0::9", CrawlerVerified},
		{"ranges-only crawler without ranges", ddg, "20.191.45.212", CrawlerUnchecked},
		{"no claim", uaChrome, "66.249.66.1", CrawlerUnchecked},
	}
	dns := newFakeDNS()
	v, err := NewVerifier(VerifierConfig{Resolver: dns, Ranges: map[string][]netip.Prefix{"bingbot": ranges}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := v.Verify(context.Background(), tt.ua, netip.MustParseAddr(tt.addr)); got != tt.want {
				t.Errorf("Verify = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestVerifyCache(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		dns := newFakeDNS()
		v, err := NewVerifier(VerifierConfig{Resolver: dns, TTL: 10 * time.Minute, MaxEntries: 2})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		good := netip.MustParseAddr("66.249.66.1")
		check := func(want CrawlerCheck, queries int) {
			t.Helper()
			if got := v.Verify(ctx, uaGooglebot, good); got != want {
				t.Errorf("Verify = %s, want %s", got, want)
			}
			if dns.queries != queries {
				t.Errorf("queries = %d, want %d", dns.queries, queries)
			}
		}
		check(CrawlerVerified, 2) // PTR + A
		check(CrawlerVerified, 2) // cached
		time.Sleep(10*time.Minute - time.Nanosecond)
		check(CrawlerVerified, 2) // still cached
		time.Sleep(time.Nanosecond)
		check(CrawlerVerified, 4) // expired: asked again

		// A temporary failure is not cached and is no verdict.
		dns.fail = true
		bad := netip.MustParseAddr("66.249.66.2")
		if got := v.Verify(ctx, uaGooglebot, bad); got != CrawlerUnchecked {
			t.Errorf("temporary failure: %s, want unchecked", got)
		}
		if got := v.Verify(ctx, uaGooglebot, bad); got != CrawlerUnchecked || dns.queries != 6 {
			t.Errorf("temporary failure cached: %s after %d queries", got, dns.queries)
		}
		dns.fail = false

		// The cache stays within MaxEntries.
		for _, a := range []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"} {
			v.Verify(ctx, uaGooglebot, netip.MustParseAddr(a))
		}
		if n := len(v.cache); n > 2 {
			t.Errorf("cache holds %d entries, want at most 2", n)
		}
	})
}

func TestNewVerifierRejectsUnknownCrawler(t *testing.T) {
	t.Parallel()
	if _, err := NewVerifier(VerifierConfig{Ranges: map[string][]netip.Prefix{"nobot": nil}}); err == nil {
		t.Error("ranges for an unknown crawler accepted")
	}
}

func TestParseRanges(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		n    int
		err  bool
	}{
		{"google format", `{"creationTime":"x","prefixes":[{"ipv6Prefix":"2001:4860:4801:10::/64"},{"ipv4Prefix":"66.249.64.0/27"}]}`, 2, false},
		{"empty", `{"prefixes":[]}`, 0, false},
		{"bad prefix", `{"prefixes":[{"ipv4Prefix":"66.249.64.0/33"}]}`, 0, true},
		{"not json", `prefixes`, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ps, err := ParseRanges([]byte(tt.in))
			if (err != nil) != tt.err || len(ps) != tt.n {
				t.Errorf("ParseRanges = %v, %v", ps, err)
			}
		})
	}
}

func TestNotFound(t *testing.T) {
	t.Parallel()
	if notFound(errors.New("x")) || !notFound(&net.DNSError{IsNotFound: true}) {
		t.Error("notFound misreads errors")
	}
}

// TestCommonCrawl: CCBot is verified as the search crawlers are (forward-
// confirmed reverse DNS in crawl.commoncrawl.org, or its published
// ranges) and the default policy allows it when verified, denies it as a
// fake when not, and challenges it when the check had no answer.
func TestCommonCrawl(t *testing.T) {
	t.Parallel()
	const ua = "CCBot/2.0 (https://commoncrawl.org/faq/)"
	dns := &fakeDNS{
		ptr: map[string][]string{
			"18.97.9.170":  {"ccbot-18-97-9-170.crawl.commoncrawl.org."},
			"198.51.100.7": {"host-7.example.net."},
		},
		fwd: map[string][]netip.Addr{"ccbot-18-97-9-170.crawl.commoncrawl.org": {netip.MustParseAddr("18.97.9.170")}},
	}
	v, err := NewVerifier(VerifierConfig{Resolver: dns})
	if err != nil {
		t.Fatal(err)
	}
	ranges, err := NewVerifier(VerifierConfig{Resolver: dns, Ranges: map[string][]netip.Prefix{"ccbot": {netip.MustParsePrefix("18.97.9.168/29")}}})
	if err != nil {
		t.Fatal(err)
	}
	p := mustDefault(t)
	tests := []struct {
		name   string
		v      *Verifier
		addr   string
		check  CrawlerCheck
		action Action
		rule   string
	}{
		{"reverse DNS", v, "18.97.9.170", CrawlerVerified, ALLOW, "verified_crawler"},
		{"another network", v, "198.51.100.7", CrawlerFailed, DENY, "fake_crawler"},
		{"published ranges", ranges, "18.97.9.171", CrawlerVerified, ALLOW, "verified_crawler"},
		{"outside the ranges", ranges, "18.97.9.160", CrawlerFailed, DENY, "fake_crawler"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			addr := netip.MustParseAddr(tt.addr)
			got := tt.v.Verify(t.Context(), ua, addr)
			if got != tt.check {
				t.Fatalf("Verify = %v, want %v", got, tt.check)
			}
			r := curlRequest(ua)
			r.RemoteAddr, r.ClientFamily, r.CrawlerVerified = addr, "", got
			if d := p.Evaluate(r); d.Action != tt.action || d.Rule != tt.rule {
				t.Errorf("got %s %q, want %s %q", d.Action, d.Rule, tt.action, tt.rule)
			}
		})
	}
	r := curlRequest(ua)
	r.ClientFamily = ""
	if d := p.Evaluate(r); d.Action != CHALLENGE || d.Rule != "unverified-ccbot" {
		t.Errorf("unchecked CCBot: got %s %q, want CHALLENGE unverified-ccbot", d.Action, d.Rule)
	}
}

// TestPublishedRanges: DuckDuckBot, Qwantbot and MojeekBot, which publish
// address ranges and no reverse DNS names, are verified by their ranges
// with a Verifier's zero configuration, without a DNS query; an address
// outside them fails. An empty Ranges map turns the ranges off.
func TestPublishedRanges(t *testing.T) {
	t.Parallel()
	ranges, err := PublishedRanges()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"duckduckbot", "qwantbot", "mojeekbot"} {
		if len(ranges[c]) == 0 {
			t.Errorf("no published ranges for %s", c)
		}
	}
	dns := newFakeDNS()
	v, err := NewVerifier(VerifierConfig{Resolver: dns})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, ua, addr string
		want           CrawlerCheck
	}{
		{"duckduckbot", "DuckDuckBot/1.1; (+http://duckduckgo.com/duckduckbot.html)", "104.43.54.127", CrawlerVerified},
		{"duckduckbot elsewhere", "DuckDuckBot/1.1; (+http://duckduckgo.com/duckduckbot.html)", "203.0.113.7", CrawlerFailed},
		{"qwantbot", "Mozilla/5.0 (compatible; Qwantbot/1.0_4193332; +https://help.qwant.com/bot/)", "194.187.171.5", CrawlerVerified},
		{"qwantbot elsewhere", "Mozilla/5.0 (compatible; Qwantbot/1.0_4193332; +https://help.qwant.com/bot/)", "198.51.100.5", CrawlerFailed},
		{"mojeekbot", "Mozilla/5.0 (compatible; MojeekBot/0.11; +https://www.mojeek.com/bot.html)", "5.102.173.70", CrawlerVerified},
		{"mojeekbot elsewhere", "Mozilla/5.0 (compatible; MojeekBot/0.11; +https://www.mojeek.com/bot.html)", "5.102.173.1", CrawlerFailed},
	}
	for _, tt := range tests {
		if got := v.Verify(t.Context(), tt.ua, netip.MustParseAddr(tt.addr)); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
	if dns.queries != 0 {
		t.Errorf("%d DNS queries for crawlers verified by ranges", dns.queries)
	}
	off, err := NewVerifier(VerifierConfig{Resolver: dns, Ranges: map[string][]netip.Prefix{}})
	if err != nil {
		t.Fatal(err)
	}
	if got := off.Verify(t.Context(), tests[0].ua, netip.MustParseAddr(tests[0].addr)); got != CrawlerUnchecked {
		t.Errorf("without ranges: %s, want unchecked", got)
	}
}

// TestVerifierFCrDNS: the answer Anubis's verifyFCrDNS reads: the PTR
// names, whether one resolves back, no names for an address without a PTR
// record, Failed (not cached) for a temporary failure; answers are cached.
func TestVerifierFCrDNS(t *testing.T) {
	t.Parallel()
	dns := newFakeDNS()
	v, err := NewVerifier(VerifierConfig{Resolver: dns})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		addr string
		want FCrDNS
	}{
		{"66.249.66.1", FCrDNS{Checked: true, Names: []string{"crawl-66-249-66-1.googlebot.com"}, Confirmed: true}},
		{"66.249.66.2", FCrDNS{Checked: true, Names: []string{"crawl-66-249-66-2.googlebot.com"}}},
		{"::ffff:157.55.39.1", FCrDNS{Checked: true, Names: []string{"msnbot-157-55-39-1.search.msn.com"}, Confirmed: true}},
		{"192.0.2.77", FCrDNS{Checked: true}},
	}
	for _, tt := range tests {
		got := v.FCrDNS(t.Context(), netip.MustParseAddr(tt.addr))
		if got.Checked != tt.want.Checked || got.Failed != tt.want.Failed || got.Confirmed != tt.want.Confirmed || !slices.Equal(got.Names, tt.want.Names) {
			t.Errorf("%s: %+v, want %+v", tt.addr, got, tt.want)
		}
	}
	n := dns.queries
	v.FCrDNS(t.Context(), netip.MustParseAddr("66.249.66.1"))
	if dns.queries != n {
		t.Errorf("a cached answer asked DNS again")
	}
	dns.mu.Lock()
	dns.fail = true
	dns.mu.Unlock()
	if got := v.FCrDNS(t.Context(), netip.MustParseAddr("198.51.100.10")); !got.Checked || !got.Failed {
		t.Errorf("temporary failure: %+v, want Checked and Failed", got)
	}
	dns.mu.Lock()
	dns.fail = false
	dns.mu.Unlock()
	if got := v.FCrDNS(t.Context(), netip.MustParseAddr("198.51.100.10")); got.Failed || len(got.Names) != 1 {
		t.Errorf("after a temporary failure: %+v, want the answer (the failure was not cached)", got)
	}
}

package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"
)

// crawler is a well-known crawler: the token its User-Agent carries and the
// domains its addresses' reverse DNS names end in.
type crawler struct {
	name    string
	token   string
	domains []string
}

// knownCrawlers is read-only. Domains are those the crawlers' operators
// document for forward-confirmed reverse DNS.
var knownCrawlers = [...]crawler{
	{"googlebot", "Googlebot", []string{"googlebot.com", "google.com", "googleusercontent.com"}},
	{"google-inspectiontool", "Google-InspectionTool", []string{"googlebot.com", "google.com"}},
	{"bingbot", "bingbot", []string{"search.msn.com"}},
	{"applebot", "Applebot", []string{"applebot.apple.com"}},
	{"yandexbot", "YandexBot", []string{"yandex.ru", "yandex.net", "yandex.com"}},
	{"baiduspider", "Baiduspider", []string{"baidu.com", "baidu.jp"}},
	{"petalbot", "PetalBot", []string{"petalsearch.com"}},
	{"duckduckbot", "DuckDuckBot", nil}, // published ranges only
	{"qwantbot", "Qwantbot", nil},
	{"mojeekbot", "MojeekBot", nil},
	// https://commoncrawl.org/ccbot: reverse DNS in crawl.commoncrawl.org;
	// ranges at https://index.commoncrawl.org/ccbot.json.
	{"ccbot", "CCBot", []string{"crawl.commoncrawl.org"}},
}

// ClaimedCrawler returns the name of the well-known crawler a User-Agent
// claims to be ("googlebot", "bingbot", …), or "". The edge asks a
// Verifier only when it is not "".
func ClaimedCrawler(userAgent string) string {
	for i := range knownCrawlers {
		if strings.Contains(userAgent, knownCrawlers[i].token) {
			return knownCrawlers[i].name
		}
	}
	return ""
}

// CrawlerNames lists the crawlers ClaimedCrawler knows, for VerifierConfig
// Ranges keys.
func CrawlerNames() []string {
	out := make([]string, len(knownCrawlers))
	for i, c := range knownCrawlers {
		out[i] = c.name
	}
	return out
}

// Resolver is what a Verifier needs of DNS; *net.Resolver implements it.
type Resolver interface {
	LookupAddr(ctx context.Context, addr string) ([]string, error)
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// VerifierConfig configures a Verifier.
type VerifierConfig struct {
	// Resolver answers DNS queries. If nil, net.DefaultResolver is used.
	Resolver Resolver
	// TTL is how long an answer is cached. If zero, DefaultVerifyTTL.
	TTL time.Duration
	// MaxEntries bounds the cache. If zero, DefaultVerifyEntries.
	MaxEntries int
	// Ranges maps a crawler name (see CrawlerNames) to its published
	// address ranges (see ParseRanges). A crawler with ranges is verified
	// by them alone, without DNS. If nil, PublishedRanges is used: the
	// ranges of the crawlers that publish ranges and no reverse DNS names
	// (DuckDuckBot, Qwantbot, MojeekBot). An empty map turns them off.
	Ranges map[string][]netip.Prefix
	// Now returns the current time. If nil, time.Now.
	Now func() time.Time
}

// Defaults of VerifierConfig.
const (
	DefaultVerifyTTL     = time.Hour
	DefaultVerifyEntries = 100_000
)

// Verifier checks that a request claiming a well-known crawler comes from
// that crawler: by its published ranges, or by forward-confirmed reverse
// DNS. Answers are cached. It is safe for concurrent use.
type Verifier struct {
	res    Resolver
	ttl    time.Duration
	max    int
	ranges map[string]addrSet
	now    func() time.Time

	mu    sync.Mutex
	cache map[verifyKey]verifyEntry
}

type verifyKey struct {
	crawler string
	addr    netip.Addr
}

type verifyEntry struct {
	check   CrawlerCheck
	fcrdns  FCrDNS // for fcrdnsKey
	expires time.Time
}

// NewVerifier returns a Verifier; it validates the ranges' crawler names.
func NewVerifier(cfg VerifierConfig) (*Verifier, error) {
	v := &Verifier{res: cfg.Resolver, ttl: cfg.TTL, max: cfg.MaxEntries, now: cfg.Now,
		ranges: map[string]addrSet{}, cache: map[verifyKey]verifyEntry{}}
	if v.res == nil {
		v.res = net.DefaultResolver
	}
	if v.ttl <= 0 {
		v.ttl = DefaultVerifyTTL
	}
	if v.max <= 0 {
		v.max = DefaultVerifyEntries
	}
	if v.now == nil {
		v.now = time.Now
	}
	ranges := cfg.Ranges
	if ranges == nil {
		var err error
		if ranges, err = PublishedRanges(); err != nil {
			return nil, err
		}
	}
	var errs []error
	for name, ps := range ranges {
		if !knownCrawler(name) {
			errs = append(errs, fmt.Errorf("policy: ranges for unknown crawler %q (known: %s)", name, strings.Join(CrawlerNames(), ", ")))
			continue
		}
		v.ranges[name] = newAddrSet(ps)
	}
	return v, errors.Join(errs...)
}

func knownCrawler(name string) bool {
	for _, c := range knownCrawlers {
		if c.name == name {
			return true
		}
	}
	return false
}

// Verify checks addr against the crawler userAgent claims. It returns
// CrawlerUnchecked when no crawler is claimed, when the crawler can be
// verified neither by ranges nor by DNS, or when DNS fails temporarily (not
// cached); CrawlerVerified or CrawlerFailed otherwise.
func (v *Verifier) Verify(ctx context.Context, userAgent string, addr netip.Addr) CrawlerCheck {
	name := ClaimedCrawler(userAgent)
	if name == "" || !addr.IsValid() {
		return CrawlerUnchecked
	}
	addr = addr.Unmap()
	if set, ok := v.ranges[name]; ok {
		if set.contains(addr) {
			return CrawlerVerified
		}
		return CrawlerFailed
	}
	var c *crawler
	for i := range knownCrawlers {
		if knownCrawlers[i].name == name {
			c = &knownCrawlers[i]
		}
	}
	if len(c.domains) == 0 {
		return CrawlerUnchecked
	}
	key := verifyKey{name, addr}
	now := v.now()
	v.mu.Lock()
	e, ok := v.cache[key]
	v.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.check
	}
	check, cacheable := v.fcrdns(ctx, c, addr)
	if cacheable {
		v.store(key, verifyEntry{check: check, expires: now.Add(v.ttl)}, now)
	}
	return check
}

func (v *Verifier) store(key verifyKey, e verifyEntry, now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.cache) >= v.max {
		for k, old := range v.cache {
			if !now.Before(old.expires) || len(v.cache) >= v.max {
				delete(v.cache, k)
			}
		}
	}
	v.cache[key] = e
}

// fcrdns does forward-confirmed reverse DNS: a PTR name of addr in one of
// the crawler's domains whose A/AAAA records include addr.
func (v *Verifier) fcrdns(ctx context.Context, c *crawler, addr netip.Addr) (CrawlerCheck, bool) {
	names, err := v.res.LookupAddr(ctx, addr.String())
	if err != nil {
		if notFound(err) {
			return CrawlerFailed, true
		}
		return CrawlerUnchecked, false
	}
	for _, n := range names {
		host := strings.ToLower(strings.TrimSuffix(n, "."))
		if !inDomains(host, c.domains) {
			continue
		}
		addrs, err := v.res.LookupNetIP(ctx, "ip", host)
		if err != nil {
			if notFound(err) {
				continue
			}
			return CrawlerUnchecked, false
		}
		for _, a := range addrs {
			if a.Unmap() == addr {
				return CrawlerVerified, true
			}
		}
	}
	return CrawlerFailed, true
}

func notFound(err error) bool {
	var de *net.DNSError
	return errors.As(err, &de) && de.IsNotFound
}

func inDomains(host string, domains []string) bool {
	for _, d := range domains {
		if host == d || strings.HasSuffix(host, "."+d) {
			return true
		}
	}
	return false
}

// publishedRangeFiles names, for each crawler that publishes its address
// ranges and no reverse DNS names, the file of Anubis's policy tree
// (anubisdata, copied by make anubis-data; SOURCE records its version and
// date) whose rule lists them, each citing the crawler's own page:
// DuckDuckBot's https://duckduckgo.com/duckduckgo-help-pages/results/duckduckbot,
// Qwant's https://help.qwant.com/bot/, Mojeek's
// https://www.mojeek.com/bot.html.
var publishedRangeFiles = [...]struct{ crawler, file string }{
	{"duckduckbot", "crawlers/duckduckbot.yaml"},
	{"qwantbot", "crawlers/qwantbot.yaml"},
	{"mojeekbot", "crawlers/mojeekbot.yaml"},
}

// PublishedRanges returns the published address ranges of the crawlers
// that have no reverse DNS names to verify (DuckDuckBot, Qwantbot,
// MojeekBot), by crawler name, from the files of Anubis's policy tree that
// Maat ships (AnubisVersion; `make anubis-data` refreshes them). A
// Verifier built without Ranges uses them.
func PublishedRanges() (map[string][]netip.Prefix, error) {
	out := make(map[string][]netip.Prefix, len(publishedRangeFiles))
	for _, f := range publishedRangeFiles {
		data, err := readAnubisData(f.file)
		if err != nil {
			return nil, fmt.Errorf("policy: published ranges of %s: %w", f.crawler, err)
		}
		var rules []struct {
			RemoteAddresses []string `yaml:"remote_addresses"`
		}
		if err := yaml.Unmarshal(data, &rules); err != nil {
			return nil, fmt.Errorf("policy: published ranges of %s: %s: %w", f.crawler, f.file, err)
		}
		for _, r := range rules {
			for _, a := range r.RemoteAddresses {
				pfx, err := parsePrefix(a)
				if err != nil {
					return nil, fmt.Errorf("policy: published ranges of %s: %s: %w", f.crawler, f.file, err)
				}
				out[f.crawler] = append(out[f.crawler], pfx)
			}
		}
		if len(out[f.crawler]) == 0 {
			return nil, fmt.Errorf("policy: published ranges of %s: %s lists no addresses", f.crawler, f.file)
		}
	}
	return out, nil
}

// FCrDNS does forward-confirmed reverse DNS (RFC 1912 section 2.1) for
// addr: its PTR names, and whether the addresses of one of them include
// addr, as Anubis's verifyFCrDNS and reverseDNS expressions read them
// (Request.FCrDNS). Answers are cached as Verify's are; a temporary DNS
// failure is not cached and gives Checked with Failed.
func (v *Verifier) FCrDNS(ctx context.Context, addr netip.Addr) FCrDNS {
	if !addr.IsValid() {
		return FCrDNS{Checked: true, Failed: true}
	}
	addr = addr.Unmap()
	key := verifyKey{fcrdnsKey, addr}
	now := v.now()
	v.mu.Lock()
	e, ok := v.cache[key]
	v.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.fcrdns
	}
	f, cacheable := v.lookupFCrDNS(ctx, addr)
	if cacheable {
		v.store(key, verifyEntry{fcrdns: f, expires: now.Add(v.ttl)}, now)
	}
	return f
}

// fcrdnsKey is the cache's crawler name for FCrDNS answers, which no
// crawler has.
const fcrdnsKey = "(fcrdns)"

func (v *Verifier) lookupFCrDNS(ctx context.Context, addr netip.Addr) (FCrDNS, bool) {
	f := FCrDNS{Checked: true}
	names, err := v.res.LookupAddr(ctx, addr.String())
	switch {
	case err != nil && notFound(err):
		return f, true // no PTR record
	case err != nil:
		f.Failed = true
		return f, false
	}
	if len(names) > maxPTRNames {
		names = names[:maxPTRNames]
	}
	for _, n := range names {
		host := strings.TrimSuffix(n, ".")
		f.Names = append(f.Names, host)
		if f.Confirmed {
			continue
		}
		addrs, err := v.res.LookupNetIP(ctx, "ip", host)
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if a.Unmap() == addr {
				f.Confirmed = true
			}
		}
	}
	return f, true
}

// maxPTRNames bounds the PTR names of one address that are looked up.
const maxPTRNames = 8

// ParseRanges reads a crawler's published address ranges in the JSON format
// Google and Bing use: {"prefixes": [{"ipv4Prefix": "66.249.64.0/27"},
// {"ipv6Prefix": "2001:4860:4801:10::/64"}]}.
func ParseRanges(data []byte) ([]netip.Prefix, error) {
	var f struct {
		Prefixes []struct {
			IPv4 string `json:"ipv4Prefix"`
			IPv6 string `json:"ipv6Prefix"`
		} `json:"prefixes"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("policy: ranges: %w", err)
	}
	out := make([]netip.Prefix, 0, len(f.Prefixes))
	for i, p := range f.Prefixes {
		s := p.IPv4
		if s == "" {
			s = p.IPv6
		}
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("policy: ranges: prefix %d: %w", i, err)
		}
		out = append(out, pfx.Masked())
	}
	return out, nil
}

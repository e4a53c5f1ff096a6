package edge

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"

	"github.com/maatproxy/maat/policy"
)

// crawlerDNS is a DNS server on loopback that answers from a table of
// records (PTR, A), NXDOMAIN for a name it does not hold, and counts the
// questions it was asked.
type crawlerDNS struct {
	addr string
	rrs  map[string][]dns.RR // by lower-case fully qualified name

	mu    sync.Mutex
	asked map[string]int // "PTR 1.66.249.66.in-addr.arpa." …
}

// startCrawlerDNS serves records, given as zone-file lines, over UDP on
// 127.0.0.1 until the test ends.
func startCrawlerDNS(t *testing.T, records ...string) *crawlerDNS {
	t.Helper()
	d := &crawlerDNS{rrs: map[string][]dns.RR{}, asked: map[string]int{}}
	for _, r := range records {
		rr, err := dns.NewRR(r)
		if err != nil {
			t.Fatalf("record %q: %v", r, err)
		}
		name := strings.ToLower(rr.Header().Name)
		d.rrs[name] = append(d.rrs[name], rr)
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d.addr = pc.LocalAddr().String()
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		m.Authoritative = true
		for _, q := range r.Question {
			name := strings.ToLower(q.Name)
			d.mu.Lock()
			d.asked[dns.TypeToString[q.Qtype]+" "+name]++
			d.mu.Unlock()
			rrs, ok := d.rrs[name]
			if !ok {
				m.Rcode = dns.RcodeNameError
				continue
			}
			for _, rr := range rrs {
				if rr.Header().Rrtype == q.Qtype {
					m.Answer = append(m.Answer, rr)
				}
			}
		}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return d
}

// questions is how many times the server was asked q ("PTR name.").
func (d *crawlerDNS) questions(q string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.asked[q]
}

// resolver is Go's own resolver, asking only d.
func (d *crawlerDNS) resolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var dl net.Dialer
		return dl.DialContext(ctx, "udp", d.addr)
	}}
}

// verifyWith has e verify crawlers by asking d: the Server's Handlers
// are built from its Env, and a reload builds the one that serves next.
// Call it before any request.
func verifyWith(t *testing.T, e *testEdge, d *crawlerDNS) {
	t.Helper()
	v, err := policy.NewVerifier(policy.VerifierConfig{Resolver: d.resolver()})
	if err != nil {
		t.Fatal(err)
	}
	e.env.verifier = v
	if err := e.Reload(e.Server.base); err != nil {
		t.Fatal(err)
	}
}

// The crawlers of these tests: a Googlebot whose address's PTR name is
// Google's and resolves back to it; one whose PTR name is someone
// else's; one whose PTR name says Google but does not resolve back to
// the address (a spoofed PTR record); one whose address has no PTR name.
var crawlerRecords = []string{
	"1.66.249.66.in-addr.arpa. 60 IN PTR crawl-66-249-66-1.googlebot.com.",
	"crawl-66-249-66-1.googlebot.com. 60 IN A 66.249.66.1",
	"7.113.0.203.in-addr.arpa. 60 IN PTR host-7.example.net.",
	"host-7.example.net. 60 IN A 203.0.113.7",
	"8.113.0.203.in-addr.arpa. 60 IN PTR crawl-66-249-66-1.googlebot.com.",
}

const (
	realCrawler    = "66.249.66.1"
	otherPTR       = "203.0.113.7"
	spoofedPTR     = "203.0.113.8"
	noPTR          = "203.0.113.9"
	crawlerUAValue = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
)

var crawlerUA = http.Header{"User-Agent": {crawlerUAValue}}

// crawlersPolicy is a policy file of the built-in crawler rules alone:
// verified crawlers are allowed, fake ones denied, everyone else allowed
// (no rule matches).
func crawlersPolicy(t *testing.T) string {
	return writePolicy(t, "policy.yaml", "bots:\n  - import: (builtin)/crawlers.yaml\n")
}

// allowAllPolicy is a policy file that allows every request.
func allowAllPolicy(t *testing.T) string {
	return writePolicy(t, "policy.yaml", "bots:\n  - {name: everyone, path_regex: ., action: ALLOW}\n")
}

// TestVerifiedCrawlerFirst: with the upstream's one slot busy, a flood of
// one cluster and an older request of another waiting, a Googlebot whose
// address passes forward-confirmed reverse DNS (a loopback DNS server
// answers the edge's resolver) and whom the policy allows (crawlers.yaml's
// verified_crawler, in the default policy and alone) is served as soon as
// the slot frees, before all of them. Googlebots that fail verification (a
// PTR name not Google's, a PTR name Google's that does not resolve back,
// no PTR name) are denied (crawlers.yaml's fake_crawler) and never reach
// the upstream.
// With priority off, the crawler would wait behind /other (its fair turn,
// TestFairQueueByCluster): the order fails.
func TestVerifiedCrawlerFirst(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, policy string }{
		{"default policy", `""`},
		{"crawlers.yaml", crawlersPolicy(t)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			verifiedCrawlerFirst(t, tt.policy)
		})
	}
}

// verifiedCrawlerFirst is TestVerifiedCrawlerFirst with the policy file
// policyFile (`""`: the default policy).
func verifiedCrawlerFirst(t *testing.T, policyFile string) {
	t.Helper()
	d := startCrawlerDNS(t, crawlerRecords...)
	up := newSteppedUpstream(t)
	e := startEdge(t, "limits: {upstream_conns: 1, upstream_queue: 60s}\n"+
		strings.Replace(strings.Replace(fairConfig, `policy: ""`, "policy: "+policyFile, 1), "%s", up.URL, 1))
	verifyWith(t, e, d)
	c := e.client(t, "h2")
	pool, got := holdTheSlot(t, e, c, up)
	for i, p := range []string{"/flood/1", "/flood/2", "/flood/3"} {
		sendAs(e, c, p, "192.0.2.1", nil, got)
		waitQueue(t, pool, i+1)
	}
	sendAs(e, c, "/other", "198.51.100.1", nil, got)
	waitQueue(t, pool, 4)
	for _, fake := range []struct{ path, from string }{{"/fake/other-ptr", otherPTR}, {"/fake/spoofed-ptr", spoofedPTR}, {"/fake/no-ptr", noPTR}} {
		sendAs(e, c, fake.path, fake.from, crawlerUA, got)
		if r := <-got; r != [2]string{fake.path, "403 "} {
			t.Errorf("a Googlebot failing verification: %v, want 403 (fake_crawler)", r)
		}
	}
	sendAs(e, c, "/crawler", realCrawler, crawlerUA, got)
	waitQueue(t, pool, 5)
	if order, want := stepAll(t, up, 5), "/flood/0 /crawler /other /flood/1 /flood/2 /flood/3"; order != want {
		t.Errorf("the upstream served %s, want %s: the verified crawler first", order, want)
	}
	wantOK(t, got, 6)
	// The verdicts were the DNS server's: the PTR names were asked, and
	// the forward lookup that confirms (or not) the Google name.
	for _, q := range []string{"PTR 1.66.249.66.in-addr.arpa.", "PTR 7.113.0.203.in-addr.arpa.",
		"PTR 8.113.0.203.in-addr.arpa.", "PTR 9.113.0.203.in-addr.arpa.", "A crawl-66-249-66-1.googlebot.com."} {
		if d.questions(q) == 0 {
			t.Errorf("the edge never asked %s", q)
		}
	}
	if d.questions("A host-7.example.net.") != 0 {
		t.Error("the edge resolved a PTR name outside Google's domains")
	}
}

// TestFakeCrawlerNoPriority: a policy that allows everyone lets a Googlebot
// that fails verification through, but in its fair turn only: its
// User-Agent buys it nothing. A verified one, allowed as well,
// goes first. Fair order alone would serve the verified crawler last of
// the three newcomers; a priority given by User-Agent would serve the
// fake before /other.
func TestFakeCrawlerNoPriority(t *testing.T) {
	t.Parallel()
	d := startCrawlerDNS(t, crawlerRecords...)
	up := newSteppedUpstream(t)
	e := startEdge(t, "limits: {upstream_conns: 1, upstream_queue: 60s}\n"+
		strings.Replace(strings.Replace(fairConfig, `policy: ""`, "policy: "+allowAllPolicy(t), 1), "%s", up.URL, 1))
	verifyWith(t, e, d)
	c := e.client(t, "h2")
	pool, got := holdTheSlot(t, e, c, up)
	sendAs(e, c, "/flood/1", "192.0.2.1", nil, got)
	waitQueue(t, pool, 1)
	sendAs(e, c, "/flood/2", "192.0.2.1", nil, got)
	waitQueue(t, pool, 2)
	sendAs(e, c, "/other", "198.51.100.1", nil, got)
	waitQueue(t, pool, 3)
	sendAs(e, c, "/fake", spoofedPTR, crawlerUA, got)
	waitQueue(t, pool, 4)
	sendAs(e, c, "/crawler", realCrawler, crawlerUA, got)
	waitQueue(t, pool, 5)
	if order, want := stepAll(t, up, 5), "/flood/0 /crawler /other /fake /flood/1 /flood/2"; order != want {
		t.Errorf("the upstream served %s, want %s: the verified crawler first, the fake in its fair turn", order, want)
	}
	wantOK(t, got, 6)
	if d.questions("PTR 8.113.0.203.in-addr.arpa.") == 0 || d.questions("A crawl-66-249-66-1.googlebot.com.") == 0 {
		t.Error("the fake crawler's address was not checked by DNS")
	}
}

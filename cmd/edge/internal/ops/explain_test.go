package ops

import (
	"cmp"
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"

	"github.com/maatproxy/maat/edge/config"
	"github.com/maatproxy/maat/policy"
	"github.com/maatproxy/maat/tlsfp"
)

// fakeDNS answers crawler verification's queries from tables: reverse
// names by address, addresses by name.
type fakeDNS struct {
	ptr map[string][]string
	a   map[string][]netip.Addr
}

func (f fakeDNS) LookupAddr(_ context.Context, addr string) ([]string, error) {
	if names, ok := f.ptr[addr]; ok {
		return names, nil
	}
	return nil, errors.New("no such host")
}

func (f fakeDNS) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if addrs, ok := f.a[host]; ok {
		return addrs, nil
	}
	return nil, errors.New("no such host")
}

const googlebotUA = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"

// googlebotLine is what the fingerprint log says of the request of
// TestExplainAgreesWithLive, in the fields explain reads:
// TestCrawlerVerificationLive (edge) checks that the live edge writes it so.
const googlebotLine = `{"remote_ip":"127.0.0.1","host":"a.test","method":"GET","path":"/page","proto":"HTTP/1.1","user_agent":"` + googlebotUA + `"}`

// TestExplainAgreesWithLive: a request claiming Googlebot from an address
// whose reverse name is not Google's is denied as fake_crawler, and one
// whose address verifies is allowed, by explain given the same resolver,
// from flags and from the request's fingerprint log line, as by the live
// edge: TestCrawlerVerificationLive (edge) holds the same table and checks
// that the live edge writes googlebotLine. Without DNS, explain says it
// skipped the check.
func TestExplainAgreesWithLive(t *testing.T) {
	t.Parallel()
	loop := netip.MustParseAddr("127.0.0.1")
	for _, tt := range []struct {
		name       string
		dns        fakeDNS
		action     string // live and explained
		rule, says string
	}{
		{"fake googlebot", fakeDNS{ptr: map[string][]string{"127.0.0.1": {"host-1.example.net."}}},
			"DENY", "fake_crawler", "googlebot FAILED"},
		{"real googlebot", fakeDNS{ptr: map[string][]string{"127.0.0.1": {"crawl-127-0-0-1.googlebot.com."}},
			a: map[string][]netip.Addr{"crawl-127-0-0-1.googlebot.com.": {loop}, "crawl-127-0-0-1.googlebot.com": {loop}}},
			"ALLOW", "", "googlebot verified"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fromFlags := ExplainRequest{UA: googlebotUA, IP: "127.0.0.1", Path: "/page", Proto: "HTTP/1.1", Host: "a.test",
				Headers: []string{"Host: a.test", "User-Agent: " + googlebotUA, "Accept: */*"}}
			fromLog, err := ExplainRequestFromLog([]byte(googlebotLine))
			if err != nil {
				t.Fatal(err)
			}
			for name, er := range map[string]ExplainRequest{"flags": fromFlags, "log line": fromLog} {
				out, err := ExplainPolicy(t.Context(), er, ExplainOptions{Resolver: tt.dns})
				if err != nil {
					t.Fatal(err)
				}
				want := "decision: " + tt.action
				if !strings.Contains(out, want) || !strings.Contains(out, "check crawler verification: ran: "+tt.says) ||
					tt.rule != "" && !strings.Contains(out, "rule="+tt.rule) {
					t.Errorf("from %s, explain says:\n%s\nwant %s %s, %s", name, out, want, tt.rule, tt.says)
				}
			}
			skipped, err := ExplainPolicy(t.Context(), fromFlags, ExplainOptions{NoDNS: true})
			if err != nil || !strings.Contains(skipped, "check crawler verification: SKIPPED") {
				t.Errorf("-no-dns: %v\n%s", err, skipped)
			}
		})
	}
}

// TestExplainRequestFromLog: what a log line gives explain, and what it
// cannot (a hashed address).
func TestExplainRequestFromLog(t *testing.T) {
	t.Parallel()
	er, err := ExplainRequestFromLog([]byte(`{"time":"2025-01-02T03:04:05.000Z","remote_ip":"203.0.113.5","asn":64500,"as_org":"Example","country":"NL","host":"a.test","method":"POST","path":"/x?y=1","proto":"HTTP/2.0","ja4":"t13d1516h2_8daaf6152771_02713d6af862","hfp":"h204_aaaaaaaaaaaa","hfp_r":":method,:authority,user-agent,accept-language","h2fp":"1:65536|0|0|m,a,s,p","user_agent":"curl/8.0","action":"ALLOW","status":200}`))
	if err != nil {
		t.Fatal(err)
	}
	want := ExplainRequest{UA: "curl/8.0", Path: "/x?y=1", IP: "203.0.113.5", JA4: "t13d1516h2_8daaf6152771_02713d6af862",
		Method: "POST", Host: "a.test", Proto: "HTTP/2.0", HFP: "h204_aaaaaaaaaaaa", H2FP: "1:65536|0|0|m,a,s,p",
		Headers: []string{":method:", ":authority:", "user-agent:", "accept-language:"}, ASN: 64500, ASOrg: "Example", Country: "NL"}
	if strings.Join(er.Headers, "|") != strings.Join(want.Headers, "|") {
		t.Errorf("headers %q, want %q", er.Headers, want.Headers)
	}
	if !equalExplain(er, want) {
		t.Errorf("%+v\nwant %+v", er, want)
	}
	// A resumed session's line: the policy judged it by ja4_session.
	er, err = ExplainRequestFromLog([]byte(`{"ja4":"t13d3113h1_e8f1e7e78f70_ac6b91b2c826","ja4_session":"t13d3112h1_e8f1e7e78f70_b26ce05bbdd6","resumed":true}`))
	if err != nil || er.JA4 != "t13d3112h1_e8f1e7e78f70_b26ce05bbdd6" {
		t.Errorf("resumed session: JA4 %s, %v; want ja4_session's", er.JA4, err)
	}
	r, err := fromLogRequest(t, `{"remote_ip":"h:3fa9c1","user_agent":"x","hfp_r":"host,user-agent,accept-language"}`)
	if err != nil {
		t.Fatal(err)
	}
	if r.RemoteAddr.String() != "192.0.2.1" || len(r.Header["Accept-Language"]) != 1 ||
		strings.Join(r.HeaderOrder, ",") != "host,user-agent,accept-language" {
		t.Errorf("hashed address and names only: %v %v %v", r.RemoteAddr, r.Header, r.HeaderOrder)
	}
}

func equalExplain(a, b ExplainRequest) bool {
	a.Headers, b.Headers = nil, nil
	return a.UA == b.UA && a.Path == b.Path && a.IP == b.IP && a.JA4 == b.JA4 && a.Method == b.Method &&
		a.Host == b.Host && a.Proto == b.Proto && a.HFP == b.HFP && a.H2FP == b.H2FP && a.ASN == b.ASN &&
		a.ASOrg == b.ASOrg && a.Country == b.Country
}

func fromLogRequest(t *testing.T, line string) (policy.Request, error) {
	t.Helper()
	er, err := ExplainRequestFromLog([]byte(line))
	if err != nil {
		return policy.Request{}, err
	}
	return er.policyRequest()
}

// TestExplainLooksUpGeo: with a configuration whose geo: names databases,
// explain looks the address up in them, as the live edge does, says what
// it found, and decides by it; a log line's own asn and country give way
// to the databases'.
func TestExplainLooksUpGeo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	asnDB, countryDB := filepath.Join(dir, "asn.mmdb"), filepath.Join(dir, "country.mmdb")
	writeMMDB(t, asnDB, "GeoLite2-ASN", asnRecord(64500, "Example Net")) // 127.0.0.0/8 only
	writeMMDB(t, countryDB, "GeoLite2-Country", countryRecord("NL"))
	pol := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(pol, []byte(`bots:
  - {name: from-64500, asns: {match: [64500]}, path_regex: ^/asn, action: DENY}
  - {name: from-nl, geoip: {countries: [NL]}, path_regex: ^/country, action: DENY}
  - {name: cel, expression: 'asn == 64500 && country == "NL"', path_regex: ^/cel, action: DENY}
  - {name: rest, path_regex: ., action: ALLOW}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("geo.yaml", []byte("geo: {asn_db: "+asnDB+", country_db: "+countryDB+"}\npolicy: "+pol+
		"\nsites: [{hosts: [a.test], upstream: 'http://127.0.0.1:1'}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	fromLog, err := ExplainRequestFromLog([]byte(`{"remote_ip":"127.0.0.1","asn":64999,"as_org":"Stale","country":"US","path":"/asn","user_agent":"curl/8.5.0"}`))
	if err != nil {
		t.Fatal(err)
	}
	const found = "check geo: ran: AS64500 (Example Net), country NL\n"
	for _, tt := range []struct {
		name      string
		er        ExplainRequest
		geo, rule string
		denied    bool
	}{
		{name: "asns:", er: ExplainRequest{IP: "127.0.0.1", Path: "/asn"}, geo: found, rule: "from-64500", denied: true},
		{name: "geoip:", er: ExplainRequest{IP: "127.0.0.1", Path: "/country"}, geo: found, rule: "from-nl", denied: true},
		{name: "CEL", er: ExplainRequest{IP: "127.0.0.1", Path: "/cel"}, geo: found, rule: "cel", denied: true},
		{name: "an address the databases do not hold", er: ExplainRequest{IP: "192.0.2.7", Path: "/asn"},
			geo: "check geo: ran: unknown, country unknown\n", rule: "rest"},
		{name: "a log line's stale geo", er: fromLog, geo: found, rule: "from-64500", denied: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.er.UA = cmp.Or(tt.er.UA, "curl/8.5.0")
			out, err := ExplainPolicy(t.Context(), tt.er, ExplainOptions{Config: &cfg, NoDNS: true})
			if err != nil {
				t.Fatal(err)
			}
			want := "decision: ALLOW"
			if tt.denied {
				want = "decision: DENY"
			}
			if !strings.Contains(out, tt.geo) || !strings.Contains(out, want) || !strings.Contains(out, "rule="+tt.rule) {
				t.Errorf("explain says:\n%s\nwant %q, %s, rule=%s", out, tt.geo, want, tt.rule)
			}
		})
	}
	// Without the configuration, the same policy sees no geo data.
	out, err := ExplainPolicy(t.Context(), ExplainRequest{IP: "127.0.0.1", Path: "/asn", UA: "curl/8.5.0"}, ExplainOptions{Policy: pol, NoDNS: true})
	if err != nil || !strings.Contains(out, "check geo: SKIPPED") || strings.Contains(out, "rule=from-64500") {
		t.Errorf("explain with the policy alone: %v\n%s", err, out)
	}
}

// Stacks the policy's tests pair with client families (policy's
// lists_test.go); their JA4s from FoxIO's captures (shared/ja4) and the
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
	uaMiniflux    = "Mozilla/5.0 (compatible; Miniflux/2.2.4; +https://miniflux.app)"
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
		{"Miniflux on Chrome", uaMiniflux, ja4ChromeCapture, "CHALLENGE", "feed-reader-impostor"},
		{"NetNewsWire on Chrome", uaNetNewsWire, ja4ChromeCapture, "CHALLENGE", "feed-reader-impostor"},
		{"NetNewsWire on Firefox", uaNetNewsWire, ja4Firefox120, "CHALLENGE", "feed-reader-impostor"},
		{"kube-probe on Chrome", "kube-probe/1.29", ja4ChromeCapture, "CHALLENGE", "monitor-impostor"},
		{"Feedly on its own stack", uaFeedly, ja4Unknown, "ALLOW", "feed-readers"},
		{"Miniflux on Go", uaMiniflux, ja4Go, "ALLOW", "feed-readers"},
		{"NetNewsWire on Apple's stack", uaNetNewsWire, ja4AppleCapture, "ALLOW", "feed-readers-apple"},
		{"kube-probe on Go", "kube-probe/1.29", ja4Go, "ALLOW", "go-health-checkers"},
		{"ELB on an unknown stack", "ELB-HealthChecker/2.0", ja4Unknown, "ALLOW", "cloud-health-checkers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, err := ExplainPolicy(t.Context(), ExplainRequest{UA: tt.ua, JA4: tt.ja4, Path: "/blog/2024/hello"}, ExplainOptions{NoDNS: true})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "decision: "+tt.decision+" ") || !strings.Contains(out, " rule="+tt.rule+"\n") {
				t.Errorf("want %s by %s:\n%s", tt.decision, tt.rule, out)
			}
		})
	}
}

// writeMMDB writes a small MMDB of the given type, mapping 127.0.0.0/8 to
// data.
func writeMMDB(t *testing.T, path, dbType string, data mmdbtype.Map) {
	t.Helper()
	w, err := mmdbwriter.New(mmdbwriter.Options{DatabaseType: dbType, IncludeReservedNetworks: true, BuildEpoch: time.Now().Unix()})
	if err != nil {
		t.Fatal(err)
	}
	_, n, _ := net.ParseCIDR("127.0.0.0/8")
	if err := w.Insert(n, data); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteTo(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func asnRecord(asn uint32, org string) mmdbtype.Map {
	return mmdbtype.Map{"autonomous_system_number": mmdbtype.Uint32(asn), "autonomous_system_organization": mmdbtype.String(org)}
}

func countryRecord(code string) mmdbtype.Map {
	return mmdbtype.Map{"country": mmdbtype.Map{"iso_code": mmdbtype.String(code)}}
}

// TestExplainPathAsLive: explain gives the policy the path the live edge
// gives it, its urlpath model, and refuses a path the edge answers with
// 400 before any rule.
func TestExplainPathAsLive(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want string }{
		{"/admin;x/", "/admin/"},
		{"/%41dmin./", "/Admin/"},
		{"/a/b?q=1", "/a/b"},
	} {
		er := ExplainRequest{Path: tt.in}
		r, err := er.policyRequest()
		if err != nil {
			t.Fatalf("%s: %v", tt.in, err)
		}
		if r.Path != tt.want {
			t.Errorf("%s: the policy sees %q, want %q", tt.in, r.Path, tt.want)
		}
	}
	er := ExplainRequest{Path: "/%c0%afadmin/"}
	if _, err := er.policyRequest(); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("an overlong UTF-8 path: err = %v, want the 400 the edge answers", err)
	}
}

// TestExplainSitePolicy: with a configuration, explain uses the policy of
// the site of the request's Host (sites[].policy), a wildcard's too, and
// the global policy for a site without one or a host no site answers.
func TestExplainSitePolicy(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	deny := write("deny.yaml", "bots:\n  - {name: site-deny, path_regex: ^/x, action: DENY}\n")
	allow := write("allow.yaml", "bots:\n  - {name: global-allow, path_regex: ^/x, action: ALLOW}\n")
	cfg, err := config.Parse("sites.yaml", []byte("policy: "+allow+"\nsites:\n"+
		"  - {hosts: [a.test, '*.w.test'], upstream: 'http://127.0.0.1:1', policy: "+deny+"}\n"+
		"  - {hosts: [b.test], upstream: 'http://127.0.0.1:1'}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ host, want string }{
		{"a.test", "rule=site-deny"}, {"x.w.test:443", "rule=site-deny"}, {"b.test", "rule=global-allow"}, {"other.test", "rule=global-allow"}, {"", "rule=global-allow"},
	} {
		out, err := ExplainPolicy(t.Context(), ExplainRequest{Host: tt.host, Path: "/x", UA: "curl/8.5.0"}, ExplainOptions{Config: &cfg, NoDNS: true})
		if err != nil || !strings.Contains(out, tt.want) {
			t.Errorf("host %q: %v\n%s\nwant %s", tt.host, err, out, tt.want)
		}
	}
	bad := write("bad.yaml", "bots:\n  - {name: x, action: FOO}\n")
	cfg, err = config.Parse("sites.yaml", []byte("sites:\n  - {hosts: [a.test], upstream: 'http://127.0.0.1:1', policy: "+bad+"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ExplainPolicy(t.Context(), ExplainRequest{Host: "a.test"}, ExplainOptions{Config: &cfg, NoDNS: true}); err == nil || !strings.Contains(err.Error(), "sites.yaml:2: sites[0].policy:") {
		t.Errorf("a site's bad policy: %v, want its key and line", err)
	}
}

package edge

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/maatproxy/maat/fplog"
	"github.com/maatproxy/maat/policy"
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

// syncWriter is a buffer the fingerprint log writes to while the test reads.
type syncWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// liveDecision serves one request (from 127.0.0.1) to a Handler whose
// crawler verification asks dns, and returns its fingerprint log line.
func liveDecision(t *testing.T, dns policy.Resolver, raw string) fplog.Record {
	t.Helper()
	cfg, err := ParseConfig("live.yaml", []byte("tls: {mode: self-signed, cache: ''}\nsites: [{hosts: [a.test], upstream: 'http://127.0.0.1:1'}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := policy.NewVerifier(policy.VerifierConfig{Resolver: dns})
	if err != nil {
		t.Fatal(err)
	}
	var out syncWriter
	w, err := fplog.NewWriter(fplog.Config{Output: &out})
	if err != nil {
		t.Fatal(err)
	}
	h, err := NewHandler(cfg, Env{FPLog: w, verifier: v})
	if err != nil {
		t.Fatal(err)
	}
	serveRaw(t, h, raw)
	h.Close()
	if err := w.Close(); err != nil { // flushes
		t.Fatal(err)
	}
	rec, err := fplog.ParseLine(bytes.TrimSpace(out.b.Bytes()))
	if err != nil {
		t.Fatalf("log line %q: %v", out.b.String(), err)
	}
	return rec
}

// TestExplainAgreesWithLive: a request claiming Googlebot from an address
// whose reverse name is not Google's is denied live as fake-crawler, and
// explain, given the same resolver, says the same, from flags and from
// the request's own fingerprint log line; one whose address verifies is
// allowed by both. Without DNS, explain says it skipped the check.
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
			"DENY", "fake-crawler", "googlebot FAILED"},
		{"real googlebot", fakeDNS{ptr: map[string][]string{"127.0.0.1": {"crawl-127-0-0-1.googlebot.com."}},
			a: map[string][]netip.Addr{"crawl-127-0-0-1.googlebot.com.": {loop}, "crawl-127-0-0-1.googlebot.com": {loop}}},
			"ALLOW", "", "googlebot verified"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			live := liveDecision(t, tt.dns, "GET /page HTTP/1.1\r\nHost: a.test\r\nUser-Agent: "+googlebotUA+"\r\nAccept: */*\r\n\r\n")
			if live.Action != tt.action || tt.rule != "" && !strings.Contains(strings.Join(live.Rules, ","), tt.rule) {
				t.Fatalf("live: %s %v, want %s %s", live.Action, live.Rules, tt.action, tt.rule)
			}
			fromFlags := ExplainRequest{UA: googlebotUA, IP: "127.0.0.1", Path: "/page", Proto: "HTTP/1.1", Host: "a.test",
				Headers: []string{"Host: a.test", "User-Agent: " + googlebotUA, "Accept: */*"}}
			line := live
			line.ClientIP = "127.0.0.1"
			fromLog, err := ExplainRequestFromLog(line.AppendJSON(nil))
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
	cfg, err := ParseConfig("geo.yaml", []byte("geo: {asn_db: "+asnDB+", country_db: "+countryDB+"}\npolicy: "+pol+
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
			tt.er.UA = orString(tt.er.UA, "curl/8.5.0")
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

package edge

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/maatproxy/maat/edge/config"
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
	cfg, err := config.Parse("live.yaml", []byte("tls: {mode: self-signed, cache: ''}\nsites: [{hosts: [a.test], upstream: 'http://127.0.0.1:1'}]\n"))
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

// googlebotLine is what the fingerprint log says of the request of
// TestCrawlerVerificationLive, in the fields `edge policy explain
// -from-log` reads. TestExplainAgreesWithLive (cmd/edge/internal/ops)
// explains this line.
const googlebotLine = `{"remote_ip":"127.0.0.1","host":"a.test","method":"GET","path":"/page","proto":"HTTP/1.1","user_agent":"` + googlebotUA + `"}`

// TestCrawlerVerificationLive: a request claiming Googlebot from an
// address whose reverse name is not Google's is denied as fake_crawler;
// one whose address verifies is allowed; and the log line says of the
// request what googlebotLine says. `edge policy explain` must decide the
// same, from flags and from that line, given the same resolver:
// TestExplainAgreesWithLive in cmd/edge/internal/ops holds this table, and
// the two tests together pin the agreement.
func TestCrawlerVerificationLive(t *testing.T) {
	t.Parallel()
	loop := netip.MustParseAddr("127.0.0.1")
	for _, tt := range []struct {
		name         string
		dns          fakeDNS
		action, rule string
	}{
		{"fake googlebot", fakeDNS{ptr: map[string][]string{"127.0.0.1": {"host-1.example.net."}}},
			"DENY", "fake_crawler"},
		{"real googlebot", fakeDNS{ptr: map[string][]string{"127.0.0.1": {"crawl-127-0-0-1.googlebot.com."}},
			a: map[string][]netip.Addr{"crawl-127-0-0-1.googlebot.com.": {loop}, "crawl-127-0-0-1.googlebot.com": {loop}}},
			"ALLOW", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			live := liveDecision(t, tt.dns, "GET /page HTTP/1.1\r\nHost: a.test\r\nUser-Agent: "+googlebotUA+"\r\nAccept: */*\r\n\r\n")
			if live.Action != tt.action || tt.rule != "" && !strings.Contains(strings.Join(live.Rules, ","), tt.rule) {
				t.Fatalf("live: %s %v, want %s %s", live.Action, live.Rules, tt.action, tt.rule)
			}
			want, err := fplog.ParseLine([]byte(googlebotLine))
			if err != nil {
				t.Fatal(err)
			}
			// The fields explain reads from a log line (ExplainRequestFromLog).
			explained := func(r fplog.Record) fplog.Record {
				return fplog.Record{ClientIP: r.ClientIP, Host: r.Host, Method: r.Method, Path: r.Path, Proto: r.Proto,
					UserAgent: r.UserAgent, JA4: r.JA4, HFP: r.HFP, HFPR: r.HFPR, H2FP: r.H2FP, ASN: r.ASN, ASOrg: r.ASOrg, Country: r.Country}
			}
			if got := explained(live); !reflect.DeepEqual(got, explained(want)) {
				t.Errorf("live log line %+v\nwant %+v", got, explained(want))
			}
		})
	}
}

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

	"github.com/maatproxy/maat/edge/config"
	"github.com/maatproxy/maat/fplog"
	"github.com/maatproxy/maat/policy"
)

// anubisDNS answers DNS from tables (names by address, addresses by
// name); anything else does not exist.
type anubisDNS struct {
	ptr map[string][]string
	a   map[string][]netip.Addr
}

func (f anubisDNS) LookupAddr(_ context.Context, addr string) ([]string, error) {
	if names, ok := f.ptr[addr]; ok {
		return names, nil
	}
	return nil, errors.New("no such host")
}

func (f anubisDNS) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if addrs, ok := f.a[host]; ok {
		return addrs, nil
	}
	return nil, errors.New("no such host")
}

// lockedBuffer is a buffer the fingerprint log writes to.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// servedDecision serves raw (from 127.0.0.1) to a Handler of the
// configuration cfgYAML whose verifier is v (nil: the one the Handler
// builds itself, as the live edge does), and returns its fingerprint log
// line.
func servedDecision(t *testing.T, cfgYAML string, v *policy.Verifier, raw string) fplog.Record {
	t.Helper()
	cfg, err := config.Parse("live.yaml", []byte("tls: {mode: self-signed, cache: ''}\nsites: [{hosts: [a.test], upstream: 'http://127.0.0.1:1'}]\n"+cfgYAML))
	if err != nil {
		t.Fatal(err)
	}
	var out lockedBuffer
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
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rec, err := fplog.ParseLine(bytes.TrimSpace(out.b.Bytes()))
	if err != nil {
		t.Fatalf("log line %q: %v", out.b.String(), err)
	}
	return rec
}

// TestPolicyAnubisDefault: the edge serves with Anubis's own default
// policy, botPolicies.yaml, unchanged, and decides as Anubis does: curl
// passes (weight 0), a browser's User-Agent gets the proof of work of
// difficulty 2 (8 bits), GPTBot is denied; Maat's signals add nothing.
func TestPolicyAnubisDefault(t *testing.T) {
	t.Parallel()
	pol, err := filepath.Abs("../policy/anubisdata/data/botPolicies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, ua, action, rule string
	}{
		{"curl", "curl/8.5.0", "ALLOW", "minimal-suspicion"},
		{"browser", "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0", "CHALLENGE", "moderate-suspicion"},
		{"gptbot", "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)", "DENY", "ai-crawlers-training"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := servedDecision(t, "policy: "+pol+"\n", nil, "GET /page HTTP/1.1\r\nHost: a.test\r\nUser-Agent: "+tt.ua+"\r\nAccept: */*\r\n\r\n")
			if rec.Action != tt.action || !strings.Contains(strings.Join(rec.Rules, ","), tt.rule) {
				t.Errorf("%s %v, want %s by %s", rec.Action, rec.Rules, tt.action, tt.rule)
			}
			if tt.action == "CHALLENGE" && (rec.Challenge == nil || rec.Challenge.Bits != 8) {
				t.Errorf("challenge %+v, want 8 bits (difficulty 2)", rec.Challenge)
			}
		})
	}
}

// TestPolicyAnubisVerifyFCrDNS: Anubis's yandexbot rule,
// verifyFCrDNS(remoteAddress, "^.*\\.yandex\\.(ru|com|net)$"), is answered
// live by the edge's verifier: allowed when the address's PTR name is
// Yandex's and resolves back, not otherwise.
func TestPolicyAnubisVerifyFCrDNS(t *testing.T) {
	t.Parallel()
	const yandexUA = "Mozilla/5.0 (compatible; YandexBot/3.0; +http://yandex.com/bots)"
	loop := netip.MustParseAddr("127.0.0.1")
	pol := filepath.Join(t.TempDir(), "policy.yaml")
	writeTestFile(t, pol, "bots:\n  - import: (data)/crawlers/yandexbot.yaml\n  - {name: others, path_regex: ., action: DENY}\n")
	for _, tt := range []struct {
		name   string
		dns    anubisDNS
		action string
		rule   string
	}{
		{"confirmed", anubisDNS{ptr: map[string][]string{"127.0.0.1": {"spider-127-0-0-1.yandex.com."}},
			a: map[string][]netip.Addr{"spider-127-0-0-1.yandex.com": {loop}}}, "ALLOW", "yandexbot"},
		{"not yandex", anubisDNS{ptr: map[string][]string{"127.0.0.1": {"host.example.net."}},
			a: map[string][]netip.Addr{"host.example.net": {loop}}}, "DENY", "others"},
		{"does not resolve back", anubisDNS{ptr: map[string][]string{"127.0.0.1": {"spider.yandex.com."}}}, "DENY", "others"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v, err := policy.NewVerifier(policy.VerifierConfig{Resolver: tt.dns})
			if err != nil {
				t.Fatal(err)
			}
			rec := servedDecision(t, "policy: "+pol+"\n", v, "GET / HTTP/1.1\r\nHost: a.test\r\nUser-Agent: "+yandexUA+"\r\n\r\n")
			if rec.Action != tt.action || !strings.Contains(strings.Join(rec.Rules, ","), tt.rule) {
				t.Errorf("%s %v, want %s by %s", rec.Action, rec.Rules, tt.action, tt.rule)
			}
		})
	}
}

// TestVerifyPublishedRangesLive: the edge's own verifier (the one it
// builds, with no configuration) verifies DuckDuckBot by its published
// ranges: from an address in them it is a verified crawler under the
// default policy; from another, a fake one, denied.
func TestVerifyPublishedRangesLive(t *testing.T) {
	t.Parallel()
	const ddg = "DuckDuckBot/1.1; (+http://duckduckgo.com/duckduckbot.html)"
	for _, tt := range []struct {
		name, from, action, rule string
	}{
		{"in the ranges", "104.43.54.127", "ALLOW", "verified_crawler"},
		{"elsewhere", "203.0.113.7", "DENY", "fake_crawler"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := servedDecision(t, "trusted_proxies: [127.0.0.0/8]\n", nil,
				"GET / HTTP/1.1\r\nHost: a.test\r\nUser-Agent: "+ddg+"\r\nX-Forwarded-For: "+tt.from+"\r\n\r\n")
			if rec.Action != tt.action || !strings.Contains(strings.Join(rec.Rules, ","), tt.rule) {
				t.Errorf("%s %v, want %s by %s", rec.Action, rec.Rules, tt.action, tt.rule)
			}
		})
	}
}

func writeTestFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestPolicyDifficultyZero: a rule of difficulty 0 (Anubis's meaning: the
// page's script must run, no work) serves a page that asks for one bit,
// not challenge's default of 16, and logs the 0 it was asked.
func TestPolicyDifficultyZero(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pol := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(pol, []byte("bots:\n  - name: zero\n    user_agent_regex: Mozilla\n    action: CHALLENGE\n    challenge: {algorithm: fast, difficulty: 0}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("live.yaml", []byte("tls: {mode: self-signed, cache: ''}\nsites: [{hosts: [a.test], upstream: 'http://127.0.0.1:1'}]\npolicy: "+pol+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	h, err := NewHandler(cfg, Env{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	w := serveRaw(t, h, "GET /page HTTP/1.1\r\nHost: a.test\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0\r\nAccept: text/html\r\n\r\n")
	if got := pageAttr(t, w.Body.String(), "bits"); got != "1" {
		t.Errorf("the page asks for %s bits, want 1 (difficulty 0)", got)
	}
}

package edge

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/maatproxy/maat/edge/config"
	"github.com/maatproxy/maat/internal/testenv"
	"github.com/maatproxy/maat/tlsfp"
)

// earlyPolicy denies curl by its TLS stack's family and every QUIC client
// by its JA4 ("q…"), whatever the request; everything else is allowed.
const earlyPolicy = `bots:
  - { name: no-curl, client_family: [curl], action: DENY }
  - { name: no-quic, ja4: ["q*"], action: DENY }
`

// startEarlyEdge starts an edge with earlyPolicy and limits.refuse_early
// set to refuse, logging fingerprints to the returned file.
func startEarlyEdge(t *testing.T, refuse bool) (*testEdge, string) {
	t.Helper()
	return startEarlyEdgeWith(t, refuse, "")
}

// startEarlyEdgeWith is startEarlyEdge with more configuration (YAML).
func startEarlyEdgeWith(t *testing.T, refuse bool, extra string) (*testEdge, string) {
	t.Helper()
	dir := t.TempDir()
	pol := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(pol, []byte(earlyPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	fp := filepath.Join(dir, "fp.jsonl")
	up := echoUpstream(t, "a")
	e := startEdge(t, fmt.Sprintf("log: {fingerprints: %s}\npolicy: %s\nlimits: {refuse_early: %v}\nsites: [{hosts: [localhost], upstream: %s}]\n%s",
		fp, pol, refuse, up.URL, extra))
	return e, fp
}

// earlyLines reads the fingerprint log's lines that keep says to keep.
func earlyLines(t *testing.T, file string, keep func(fpLine) bool) []fpLine {
	t.Helper()
	f, err := os.Open(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []fpLine
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l fpLine
		if json.Unmarshal(sc.Bytes(), &l) == nil && keep(l) {
			out = append(out, l)
		}
	}
	return out
}

func isEarlyRefusal(l fpLine) bool { return l.str("reason") == reasonEarlyRefusal }

// metricLine returns the line of the admin /metrics that starts with
// series, or "".
func metricLine(t *testing.T, e *testEdge, series string) string {
	t.Helper()
	res, err := http.Get("http://" + e.Addrs().Admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if strings.HasPrefix(line, series+" ") {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

// TestRefuseEarlyCurl: curl, whose TLS stack the policy denies, is refused
// at its ClientHello with the access_denied alert (curl exit 35), counted
// and logged once; with refuse_early: false the same curl gets the deny
// page (403) after a full handshake. A Go client is served either way.
func TestRefuseEarlyCurl(t *testing.T) {
	t.Parallel()
	bin := testenv.NeedCommand(t, "curl")
	for _, refuse := range []bool{true, false} {
		t.Run(fmt.Sprintf("refuse_early=%v", refuse), func(t *testing.T) {
			t.Parallel()
			e, fpFile := startEarlyEdge(t, refuse)
			p := port(e.Addrs().HTTPS)
			for _, v := range []string{"--http2", "--http1.1"} {
				path := "/early/curl" + strings.TrimPrefix(v, "--http")
				cmd := exec.Command(bin, "-sSk", v, "--max-time", "10", "-o", "/dev/null", "-w", "%{http_code}",
					"--resolve", "localhost:"+p+":127.0.0.1", "https://localhost:"+p+path)
				var stdout, stderr strings.Builder
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				err := cmd.Run()
				var exit *exec.ExitError
				if refuse {
					// curl's CURLE_SSL_CONNECT_ERROR, with the alert as its
					// TLS library names it ("tlsv1 alert access denied").
					if !errors.As(err, &exit) || exit.ExitCode() != 35 || !strings.Contains(strings.ToLower(stderr.String()), "access denied") {
						t.Fatalf("curl %s: %v, stderr %q; want exit 35 and the access_denied alert", v, err, stderr.String())
					}
					continue
				}
				if err != nil || stdout.String() != "403" {
					t.Fatalf("curl %s: %v %s, status %s; want the deny page's 403", v, err, stderr.String(), stdout.String())
				}
				l := waitLine(t, fpFile, path)
				if l.str("action") != "DENY" || !slices.Contains(l.rules(), "no-curl") {
					t.Errorf("%s: action %s rules %v; want DENY by no-curl", path, l.str("action"), l.rules())
				}
			}

			// Honest clients are served.
			for _, proto := range []string{"h1", "h2"} {
				res, _ := get(t, e.client(t, proto), e.url("/early/go-"+proto))
				if res.StatusCode != http.StatusOK {
					t.Errorf("go %s: status %d; want 200", proto, res.StatusCode)
				}
			}

			want := 0
			if refuse {
				want = 2
			}
			series := `maat_refused_early_total{transport="tcp"}`
			if !waitFor(t, 10*time.Second, func() bool {
				return metricLine(t, e, series) == fmt.Sprintf("%s %d", series, want) &&
					len(earlyLines(t, fpFile, isEarlyRefusal)) == want
			}) {
				t.Fatalf("metric %q and %d early_refusal lines; want %d of each", metricLine(t, e, series),
					len(earlyLines(t, fpFile, isEarlyRefusal)), want)
			}
			for _, l := range earlyLines(t, fpFile, isEarlyRefusal) {
				if l.str("action") != "DENY" || l.str("client_family") != "curl" || !strings.HasPrefix(l.str("ja4"), "t13") ||
					l.str("sni") != "localhost" || l.str("remote_ip") != "127.0.0.1" || l.str("request_id") == "" ||
					l["status"] != nil || l.str("path") != "" {
					t.Errorf("early_refusal line %v", l)
				}
			}
		})
	}
}

// TestRefuseEarlyQUIC: a QUIC client whose JA4 the policy denies is
// refused at its ClientHello with CRYPTO_ERROR 0x131 (0x100 + the TLS
// alert access_denied, RFC 9001 section 4.8), as quic-go sends it from the
// GetConfigForClient error; with refuse_early: false it gets the deny page
// over HTTP/3.
func TestRefuseEarlyQUIC(t *testing.T) {
	t.Parallel()
	for _, refuse := range []bool{true, false} {
		t.Run(fmt.Sprintf("refuse_early=%v", refuse), func(t *testing.T) {
			t.Parallel()
			e, fpFile := startEarlyEdge(t, refuse)
			if !refuse {
				res, _ := get(t, e.client(t, "h3"), e.url("/early/h3"))
				if res.StatusCode != http.StatusForbidden {
					t.Fatalf("h3: status %d; want the deny page's 403", res.StatusCode)
				}
				if l := waitLine(t, fpFile, "/early/h3"); l.str("action") != "DENY" || !slices.Contains(l.rules(), "no-quic") {
					t.Errorf("action %s rules %v; want DENY by no-quic", l.str("action"), l.rules())
				}
				if got := metricLine(t, e, `maat_refused_early_total{transport="quic"}`); !strings.HasSuffix(got, " 0") {
					t.Errorf("metric %q; want 0", got)
				}
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			conn, err := quic.DialAddr(ctx, e.Addrs().HTTP3, e.tlsConfig(http3.NextProtoH3), nil)
			if err == nil {
				_ = conn.CloseWithError(0, "")
				t.Fatal("the QUIC handshake succeeded")
			}
			var te *quic.TransportError
			if !errors.As(err, &te) || !te.Remote || te.ErrorCode != quic.TransportErrorCode(0x100+49) {
				t.Fatalf("dial: %v (%#v); want a remote CRYPTO_ERROR 0x131 (access_denied)", err, te)
			}
			series := `maat_refused_early_total{transport="quic"}`
			if !waitFor(t, 10*time.Second, func() bool {
				return metricLine(t, e, series) == series+" 1" && len(earlyLines(t, fpFile, isEarlyRefusal)) == 1
			}) {
				t.Fatalf("metric %q, %d early_refusal lines; want 1 of each", metricLine(t, e, series), len(earlyLines(t, fpFile, isEarlyRefusal)))
			}
			if l := earlyLines(t, fpFile, isEarlyRefusal)[0]; !strings.HasPrefix(l.str("ja4"), "q13") || l.str("alpn") != "h3" {
				t.Errorf("early_refusal line %v", l)
			}
		})
	}
}

// TestRefuseEarlySites: the edge refuses a connection early only when
// every site it may reach would deny it, and no site runs dry: a site with
// a policy that allows the client, or dry_run (global or a site's), turns
// the early refusal off, since any of that connection's requests may name
// that site.
func TestRefuseEarlySites(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	deny := filepath.Join(dir, "deny.yaml")
	allow := filepath.Join(dir, "allow.yaml")
	for file, text := range map[string]string{deny: earlyPolicy, allow: "bots:\n  - { name: all, path_regex: '.*', action: ALLOW }\n"} {
		if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	curl := tlsfp.Fingerprint{JA4: "t13d3112h2_e8f1e7e78f70_6bebaf5329ac", Client: tlsfp.Client{Family: "curl"}}
	for _, tt := range []struct {
		name, cfg string
		refuse    bool
	}{
		{"one site, its policy denies", "policy: " + deny + "\nsites: [{hosts: [a.test], upstream: 'http://127.0.0.1:1'}]", true},
		{"refuse_early off", "policy: " + deny + "\nlimits: {refuse_early: false}\nsites: [{hosts: [a.test], upstream: 'http://127.0.0.1:1'}]", false},
		{"dry_run", "policy: " + deny + "\ndry_run: true\nsites: [{hosts: [a.test], upstream: 'http://127.0.0.1:1'}]", false},
		{"one site runs dry", "policy: " + deny + "\nsites: [{hosts: [a.test], upstream: 'http://127.0.0.1:1'}, {hosts: [b.test], upstream: 'http://127.0.0.1:1', dry_run: true}]", false},
		{"another site's policy allows", "policy: " + deny + "\nsites: [{hosts: [a.test], upstream: 'http://127.0.0.1:1'}, {hosts: [b.test], upstream: 'http://127.0.0.1:1', policy: " + allow + "}]", false},
		{"two sites, both deny", "policy: " + deny + "\nsites: [{hosts: [a.test], upstream: 'http://127.0.0.1:1'}, {hosts: [b.test], upstream: 'http://127.0.0.1:1', policy: " + deny + "}]", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := config.Parse("e.yaml", []byte("tls: {mode: self-signed, cache: ''}\nlog: {fingerprints: 'off'}\n"+tt.cfg+"\n"))
			if err != nil {
				t.Fatal(err)
			}
			h, err := NewHandler(cfg, Env{})
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			_, denied := h.denyConn(&curl, netip.MustParseAddr("127.0.0.1"))
			if got := h.refusesEarly() && denied; got != tt.refuse {
				t.Errorf("refused early: %v (refusesEarly %v, denyConn %v), want %v", got, h.refusesEarly(), denied, tt.refuse)
			}
		})
	}
}

// TestRefuseEarlyTrustedProxy: a connection from a trusted proxy is not
// refused early, since its requests name their client (X-Forwarded-For):
// curl through it gets the deny page.
func TestRefuseEarlyTrustedProxy(t *testing.T) {
	t.Parallel()
	bin := testenv.NeedCommand(t, "curl")
	e, fpFile := startEarlyEdgeWith(t, true, "trusted_proxies: [127.0.0.1/32]\n")
	p := port(e.Addrs().HTTPS)
	out, err := exec.Command(bin, "-sSk", "--max-time", "10", "-o", "/dev/null", "-w", "%{http_code}",
		"--resolve", "localhost:"+p+":127.0.0.1", "https://localhost:"+p+"/early/proxied").CombinedOutput()
	if err != nil || string(out) != "403" {
		t.Fatalf("curl: %v %s; want the deny page's 403", err, out)
	}
	if l := waitLine(t, fpFile, "/early/proxied"); l.str("action") != "DENY" {
		t.Errorf("action %s; want DENY", l.str("action"))
	}
	if n := len(earlyLines(t, fpFile, isEarlyRefusal)); n != 0 {
		t.Errorf("%d early_refusal lines; want none", n)
	}
}

// TestDenyConnEdge: the Handler asks the policy with what policyRequest
// gives it; ACME's TLS-ALPN-01 validation is never refused; refuse_early:
// false, or a policy that cannot deny a connection, turns it all off.
func TestDenyConnEdge(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pol := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(pol, []byte(earlyPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	site := "sites: [{hosts: [localhost], upstream: 'http://127.0.0.1:1'}]\n"
	h := newTestHandler(t, "policy: "+pol+"\n"+site)
	peer := netip.MustParseAddr("192.0.2.1")
	curl := &tlsfp.Fingerprint{JA4: "t13d3112h2_e8f1e7e78f70_6bebaf5329ac", SNI: "localhost", ALPN: "h2", Client: tlsfp.Client{Family: "curl"}}
	acme := *curl
	acme.ALPN = "acme-tls/1"
	chrome := &tlsfp.Fingerprint{JA4: "t13d1516h2_8daaf6152771_02713d6af862", ALPN: "h2", Client: tlsfp.Client{Family: "chrome"}}
	if !h.refusesEarly() {
		t.Fatal("refusesEarly = false")
	}
	for _, tt := range []struct {
		name string
		fp   *tlsfp.Fingerprint
		want bool
	}{{"curl", curl, true}, {"acme", &acme, false}, {"chrome", chrome, false}} {
		if _, got := h.denyConn(tt.fp, peer); got != tt.want {
			t.Errorf("%s: denyConn = %v; want %v", tt.name, got, tt.want)
		}
	}
	if newTestHandler(t, "policy: "+pol+"\nlimits: {refuse_early: false}\n"+site).refusesEarly() {
		t.Error("refuse_early: false, refusesEarly = true")
	}
	if newTestHandler(t, site).refusesEarly() {
		t.Error("the default policy: refusesEarly = true")
	}
}

// TestRefuseEarlyPlainHTTP: plain HTTP on the TLS port still gets its
// redirect when the hello is read early (it is no hello: crypto/tls reads
// the same bytes and the edge answers them as always).
func TestRefuseEarlyPlainHTTP(t *testing.T) {
	t.Parallel()
	e, _ := startEarlyEdge(t, true)
	c, err := net.Dial("tcp", e.Addrs().HTTPS)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "GET /x HTTP/1.1\r\nHost: localhost\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMovedPermanently || !strings.HasPrefix(res.Header.Get("Location"), "https://localhost") {
		t.Errorf("status %d, Location %q; want 301 to https", res.StatusCode, res.Header.Get("Location"))
	}
}

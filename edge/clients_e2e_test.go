package edge

import (
	"context"
	"crypto/tls"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/maatproxy/maat/internal/testcapture"
	"github.com/maatproxy/maat/internal/testenv"
)

// startClientsEdge is an edge with the built-in default policy and a
// fingerprint log.
func startClientsEdge(t *testing.T) (*testEdge, string) {
	t.Helper()
	fp := t.TempDir() + "/fp.jsonl"
	up := echoUpstream(t, "site")
	e := startEdge(t, "log: {fingerprints: "+fp+"}\nsites: [{hosts: [localhost], upstream: "+up.URL+"}]\n")
	return e, fp
}

// TestKnownClientsHonest (issue #35 item 4): the real clients the
// known-client tables were captured from (internal/testcapture), each
// saying what it is over its own TLS stack, are recognised by their
// family and pass the default policy, by their own rule, through the edge.
// A missing program skips its client (fails in CI).
func TestKnownClientsHonest(t *testing.T) {
	t.Parallel()
	e, fp := startClientsEdge(t)
	base := "https://localhost:" + port(e.Addrs().HTTPS)
	tests := []struct {
		client, rule, path string // path: the request's, when not the page's
	}{
		{"curl-h2", "curl", ""},
		{"curl-h1", "curl", ""},
		{"git", "git", "repo.git/info/refs"},
		{"python-urllib", "python-clients", ""},
		{"python-requests", "python-clients", ""},
		{"python-urllib-system", "python-clients", ""},
		{"python-requests-system", "python-clients", ""},
		{"node-fetch", "node-clients", ""},
		{"java-httpclient-h2", "java-clients", ""},
		{"java-httpclient-h1", "java-clients", ""},
		{"go-net-http-h2", "go-http-client", ""},
		{"go-net-http-h1", "go-http-client", ""},
		{"go-net-http-h1-alpn", "go-http-client", ""},
		{"go-x-net-http2", "go-http-client", ""},
	}
	for _, tt := range tests {
		t.Run(tt.client, func(t *testing.T) {
			t.Parallel()
			c, ok := testcapture.Lookup(tt.client)
			if !ok {
				t.Fatalf("testcapture has no client %s", tt.client)
			}
			if !c.Installed() {
				testenv.Missing(t, "%s is not installed (make deps installs it)", c.Program)
			}
			page := "/honest/" + tt.client + "/"
			if err := c.Fetch(context.Background(), base+page); err != nil {
				t.Fatal(err)
			}
			l := waitLine(t, fp, page+tt.path)
			if l.str("client_family") != c.Family || l.str("action") != "ALLOW" || !slices.Contains(l.rules(), tt.rule) {
				t.Errorf("%s (%s, ja4 %s): family %q, action %s, rules %v; want %s, ALLOW by %s",
					tt.client, l.str("user_agent"), l.str("ja4"), l.str("client_family"), l.str("action"), l.rules(), c.Family, tt.rule)
			}
			if slices.Contains(l.rules(), "ua_tls_mismatch") {
				t.Errorf("%s: ua_tls_mismatch fired on an honest client", tt.client)
			}
		})
	}
}

// TestKnownClientsLies (issue #35 item 4): a User-Agent that names one
// client over another client's TLS stack is a lie, whatever it names:
// python-requests over Go's TLS (HTTP/1.1 with and without ALPN, HTTP/2),
// curl over Python's, Go over Node's, Python over curl's, Chrome over
// Go's. Each fires ua_tls_mismatch and is challenged by the default
// policy; the non-browser names by its client-lie rule at 16 bits.
func TestKnownClientsLies(t *testing.T) {
	t.Parallel()
	e, fp := startClientsEdge(t)
	base := "https://localhost:" + port(e.Addrs().HTTPS)
	const uaPython = "python-requests/2.28.1"
	check := func(t *testing.T, path, family, rule string) {
		t.Helper()
		l := waitLine(t, fp, path)
		if l.str("client_family") != family || l.str("action") != "CHALLENGE" || !slices.Contains(l.rules(), "ua_tls_mismatch") ||
			rule != "" && !slices.Contains(l.rules(), rule) {
			t.Errorf("%s (%s, ja4 %s): family %q, action %s, rules %v; want %s, CHALLENGE, ua_tls_mismatch %s",
				path, l.str("user_agent"), l.str("ja4"), l.str("client_family"), l.str("action"), l.rules(), family, rule)
		}
		if rule == "client-lie" {
			if ch, _ := l["challenge"].(map[string]any); ch["bits"] != float64(16) {
				t.Errorf("%s: challenge %v, want 16 bits", path, l["challenge"])
			}
		}
	}
	goClients := []struct {
		name string
		tr   func() *http.Transport
	}{
		{"h1", func() *http.Transport {
			return &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
		}},
		{"h1-alpn", func() *http.Transport {
			return &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}}}
		}},
		{"h2", func() *http.Transport {
			return &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: true}
		}},
	}
	for _, g := range goClients {
		for _, ua := range []string{uaPython, "Python-urllib/3.11", "curl/7.88.1", chromeUA} {
			t.Run("go-"+g.name+"/"+ua, func(t *testing.T) {
				t.Parallel()
				tr := g.tr()
				defer tr.CloseIdleConnections()
				path := "/lie/go-" + g.name + "/" + strings.ReplaceAll(strings.Fields(ua)[0], "/", "-")
				res, _ := get(t, &http.Client{Transport: tr, Timeout: 20 * time.Second}, base+path, "User-Agent", ua)
				if res.StatusCode != http.StatusForbidden || res.Header.Get("Maat-Mitigated") != "challenge" {
					t.Errorf("%d %q, want a challenge", res.StatusCode, res.Header.Get("Maat-Mitigated"))
				}
				rule := "client-lie"
				if ua == chromeUA {
					rule = ""
				}
				check(t, path, "go", rule)
			})
		}
	}
	programs := []struct {
		name, program, family string
		args                  []string
	}{
		{"curl-over-python", "python3", "python", []string{"-c", `import sys, warnings
warnings.simplefilter("ignore")
import requests
requests.get(sys.argv[1], verify=False, headers={"User-Agent": "curl/7.88.1"}, timeout=30)`}},
		{"go-over-node", "node", "node", []string{"-e", `process.env.NODE_TLS_REJECT_UNAUTHORIZED = '0';
process.emitWarning = () => {};
fetch(process.argv[1], {headers: {'user-agent': 'Go-http-client/1.1'}}).then(r => r.text()).then(() => process.exit(0), e => { console.error(e); process.exit(1) });`}},
		{"python-over-curl", "curl", "curl", []string{"-sk", "-o", "/dev/null", "--max-time", "20", "-A", uaPython}},
		{"python-over-curl-h1", "curl", "curl", []string{"-sk", "-o", "/dev/null", "--max-time", "20", "--http1.1", "-A", uaPython}},
	}
	for _, p := range programs {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			bin := testenv.NeedCommand(t, p.program)
			path := "/lie/" + p.name
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if out, err := exec.CommandContext(ctx, bin, append(p.args, base+path)...).CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", p.program, err, out)
			}
			check(t, path, p.family, "client-lie")
		})
	}
}

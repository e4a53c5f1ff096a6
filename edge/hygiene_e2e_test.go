package edge

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// rawTLSExchange writes raw request bytes to the edge over TLS (HTTP/1.1)
// and returns one response with its body.
func rawTLSExchange(t *testing.T, e *testEdge, raw string) (*http.Response, string) {
	t.Helper()
	c, err := tls.Dial("tcp", e.Addrs().HTTPS, e.tlsConfig("http/1.1"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

// TestPolicySeesNormalizedPath: a path_regex DENY on ^/secret/ holds for
// every spelling of the path, over HTTP/1.1 and HTTP/2 (whose :path the
// client sends as it likes), and the upstream gets the one normalized path
// of what passes.
func TestPolicySeesNormalizedPath(t *testing.T) {
	t.Parallel()
	up := newRawUpstream(t)
	pol := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(pol, []byte("bots:\n  - {name: no-secret, path_regex: ^/secret/, action: DENY}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := startEdge(t, "policy: "+pol+"\nsites: [{hosts: [localhost], upstream: "+up.URL+", compress: false}]\n")
	spellings := []string{"/DIR/TAG", "//DIR/TAG", "/x/../DIR/TAG", "/./DIR/TAG", "///DIR//TAG", "/%2e/DIR/TAG", "/ENC/TAG"}
	encoded := map[string]string{"secret": "%73ecret", "public": "%70ublic"}
	send := map[string]func(t *testing.T, path string) (int, string, string){
		"h1": func(t *testing.T, path string) (int, string, string) {
			res, body := rawTLSExchange(t, e, "GET "+path+" HTTP/1.1\r\nHost: localhost\r\nUser-Agent: curl/8.5.0\r\nConnection: close\r\n\r\n")
			return res.StatusCode, res.Header.Get("Maat-Mitigated"), body
		},
		"h2": func(t *testing.T, path string) (int, string, string) {
			res, body := chromeRoundTrip(t, e, path, chromeHeaders, "")
			return res.StatusCode, res.Header.Get("Maat-Mitigated"), body
		},
	}
	var want []string // request lines the upstream must get
	for _, proto := range []string{"h1", "h2"} {
		for i, sp := range spellings {
			for _, dir := range []string{"secret", "public"} {
				tag := fmt.Sprintf("%s-%d", proto, i)
				path := strings.NewReplacer("DIR", dir, "ENC", encoded[dir], "TAG", tag).Replace(sp)
				status, mitigated, body := send[proto](t, path)
				switch dir {
				case "secret":
					if status != http.StatusForbidden || mitigated != "deny" || !strings.Contains(body, "no-secret") {
						t.Errorf("%s %s: %d %q, want the policy's deny (no-secret)", proto, path, status, mitigated)
					}
				case "public":
					if status != http.StatusOK {
						t.Errorf("%s %s: %d, want 200", proto, path, status)
					}
					want = append(want, "GET /public/"+tag+" HTTP/1.1")
				}
			}
		}
	}
	var got []string
	for _, head := range up.heads() {
		got = append(got, requestLine(head))
		if strings.Contains(head, "secret") {
			t.Errorf("a denied path reached the upstream:\n%s", head)
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the upstream got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestFailoverThroughEdge: with the first of two upstream addresses down
// (a refused connection), a base path, a header rule and a trusted proxy,
// the request retried on the second address is, over HTTP/1.1 and HTTP/2,
// the request a first try sends: the base path once, the added header
// once, one X-Forwarded-For with the peer appended once.
func TestFailoverThroughEdge(t *testing.T) {
	t.Parallel()
	for _, proto := range []string{"h1", "h2"} {
		t.Run(proto, func(t *testing.T) {
			t.Parallel()
			up := newRawUpstream(t)
			e := startEdge(t, fmt.Sprintf(`trusted_proxies: [127.0.0.0/8]
sites:
  - hosts: [localhost]
    compress: false
    upstream: [http://%s/base, %s/base]
    headers: { request: { add: { X-Added: one } } }
`, deadAddr(t), up.URL))
			dead := e.Handler().sites.lookup("localhost").routes[0].pool.targets[0]
			c := e.client(t, proto)
			for i := range 2 { // the first meets the dead address; the second goes straight on
				res, _ := get(t, c, e.url("/x?q=1"), "User-Agent", "curl/8.5.0", "X-Forwarded-For", "203.0.113.9")
				if res.StatusCode != http.StatusOK {
					t.Fatalf("request %d: %d", i, res.StatusCode)
				}
				if i == 0 && dead.downUntil.Load() == 0 {
					t.Fatal("the first request did not try the dead address: no failover to test")
				}
			}
			heads := up.heads()
			if len(heads) != 2 {
				t.Fatalf("the live upstream got %d requests", len(heads))
			}
			for _, head := range heads {
				if line := requestLine(head); line != "GET /base/x?q=1 HTTP/1.1" {
					t.Errorf("request line %q", line)
				}
				if n := strings.Count(head, "X-Added: one\r\n"); n != 1 {
					t.Errorf("X-Added appears %d times:\n%s", n, head)
				}
				if n := strings.Count(head, "X-Forwarded-For:"); n != 1 || !strings.Contains(head, "X-Forwarded-For: 203.0.113.9, 127.0.0.1\r\n") {
					t.Errorf("X-Forwarded-For:\n%s", head)
				}
			}
			if stripID(heads[0]) != stripID(heads[1]) {
				t.Errorf("the retried request differs from a first try:\n%s\n%s", heads[0], heads[1])
			}
		})
	}
}

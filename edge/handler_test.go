package edge

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

func TestTrustedProxyForwardedFor(t *testing.T) {
	t.Parallel()
	up := echoUpstream(t, "a")
	h := newTestHandler(t, "trusted_proxies: [127.0.0.0/8]\nsites: [{hosts: [localhost], upstream: "+up.URL+"}]\n")
	_, body := get(t, handlerClient(h, "h1"), handlerURL("/"), "X-Forwarded-For", "203.0.113.9, 127.0.0.5")
	for _, want := range []string{"X-Forwarded-For=203.0.113.9, 127.0.0.5, 127.0.0.1\n", "X-Real-Ip=203.0.113.9\n"} {
		if !strings.Contains(body, want) {
			t.Errorf("want %q in\n%s", want, body)
		}
	}
}

func TestRoutesAndUnknownHost(t *testing.T) {
	t.Parallel()
	a, b := echoUpstream(t, "a"), echoUpstream(t, "b")
	h := newTestHandler(t, fmt.Sprintf("sites: [{hosts: [localhost, '*.example.test'], upstream: %s, routes: [{path: /api/, upstream: %s}]}]\n", a.URL, b.URL))
	c := handlerClient(h, "h1")
	for _, tt := range []struct{ host, path, want string }{
		{"localhost", "/", "a"}, {"localhost", "/api/x", "b"}, {"localhost", "/apix", "a"}, {"www.example.test", "/api/", "b"},
	} {
		req, _ := http.NewRequest("GET", handlerURL(tt.path), nil)
		req.Host = tt.host
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if got := res.Header.Get("X-Upstream"); got != tt.want {
			t.Errorf("%s%s went to %q, want %q", tt.host, tt.path, got, tt.want)
		}
	}
	req, _ := http.NewRequest("GET", handlerURL("/"), nil)
	req.Host = "other.test"
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("unknown host: status %d, want 421", res.StatusCode)
	}
}

func TestUpstreamDownGives502Quickly(t *testing.T) {
	t.Parallel()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now: connection refused
	h := newTestHandler(t, "timeouts: {upstream_dial: 2s}\nsites: [{hosts: [localhost], upstream: "+dead+"}]\n")
	start := time.Now()
	res, body := get(t, handlerClient(h, "h2"), handlerURL("/"))
	if res.StatusCode != http.StatusBadGateway {
		t.Fatalf("status %d, want 502", res.StatusCode)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("502 took %v, longer than the dial timeout", d)
	}
	if !strings.Contains(body, "upstream_unreachable") || !strings.Contains(body, "Request ID") {
		t.Errorf("502 page lacks reason or request id:\n%s", body)
	}
}

func TestLoadSharingSkipsDeadAddress(t *testing.T) {
	t.Parallel()
	a, b := echoUpstream(t, "a"), echoUpstream(t, "b")
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := "http://" + ln.Addr().String()
	ln.Close()
	h := newTestHandler(t, fmt.Sprintf("sites: [{hosts: [localhost], upstream: [%s, %s, %s]}]\n", a.URL, dead, b.URL))
	c := handlerClient(h, "h1")
	count := map[string]int{}
	for range 40 {
		res, _ := get(t, c, handlerURL("/"))
		if res.StatusCode != 200 {
			t.Fatalf("status %d: a dead address was not skipped", res.StatusCode)
		}
		count[res.Header.Get("X-Upstream")]++
	}
	if count["a"] < 10 || count["b"] < 10 || count["a"]+count["b"] != 40 {
		t.Errorf("load not shared: %v", count)
	}
}

func TestUpstreamBasePath(t *testing.T) {
	t.Parallel()
	got := make(chan string, 1)
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { got <- r.URL.EscapedPath() + "?" + r.URL.RawQuery })
	h := newTestHandler(t, "sites: [{hosts: [localhost], upstream: "+up+"/base/}]\n")
	get(t, handlerClient(h, "h1"), handlerURL("/a%2Fb/c?q=1"))
	if p := <-got; p != "/base/a%2Fb/c?q=1" {
		t.Errorf("upstream saw %q, want /base/a%%2Fb/c?q=1", p)
	}
}

// TestPolicyStatusCodes: a policy's Anubis-style status_codes set the
// status of challenge and deny pages; Maat-Mitigated still marks them.
func TestPolicyStatusCodes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pol := dir + "/policy.yaml"
	if err := os.WriteFile(pol, []byte(`bots:
  - {name: no-gpt, user_agent_regex: GPTBot, action: DENY}
  - {name: everyone, path_regex: ., action: CHALLENGE}
status_codes: {CHALLENGE: 200, DENY: 410}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	up := echoUpstream(t, "site")
	h := newTestHandler(t, "challenge: {wait: {duration: 1s}}\npolicy: "+pol+"\n"+
		"sites: [{hosts: [localhost], upstream: "+up.URL+"}]\n")
	c := handlerClient(h, "h2")
	res, _ := get(t, c, handlerURL("/x"), "User-Agent", gptUA)
	if res.StatusCode != 410 || res.Header.Get("Maat-Mitigated") != "deny" {
		t.Errorf("deny: %d %q, want 410 deny", res.StatusCode, res.Header.Get("Maat-Mitigated"))
	}
	res, _ = get(t, c, handlerURL("/x"), "User-Agent", chromeUA, "Sec-Fetch-Mode", "navigate", "Accept", "text/html")
	if res.StatusCode != 200 || res.Header.Get("Maat-Mitigated") != "challenge" {
		t.Errorf("challenge: %d %q, want 200 challenge", res.StatusCode, res.Header.Get("Maat-Mitigated"))
	}
}

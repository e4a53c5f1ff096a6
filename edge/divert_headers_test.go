package edge

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDivertStripsHeaders: a diverted request reaches the tarpit with what
// a page needs (User-Agent, Accept…) and the client's address, but without
// the client's cookies or credentials, any X-Maat-* field, the edge's own
// verdict, or the forwarding chain behind it; on every protocol.
func TestDivertStripsHeaders(t *testing.T) {
	t.Parallel()
	got := make(chan http.Header, 8)
	tarpit := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		_, _ = w.Write([]byte("garbage"))
	}))
	t.Cleanup(tarpit.Close)
	site := echoUpstream(t, "site")
	pol := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(pol, []byte("bots:\n  - {name: ai-to-tarpit, user_agent_regex: GPTBot, action: DIVERT, divert_to: tarpit}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := startEdge(t, "trusted_proxies: [127.0.0.0/8]\npolicy: "+pol+"\ndivert: {tarpit: {upstream: "+tarpit.URL+"}}\n"+
		"sites: [{hosts: [localhost], upstream: "+site.URL+"}]\n")
	for _, proto := range []string{"h1", "h2", "h3"} {
		t.Run(proto, func(t *testing.T) {
			res, body := get(t, e.client(t, proto), e.url("/page"), "User-Agent", gptUA, "Accept", "text/html",
				"Cookie", "session=secret", "Authorization", "Basic dXNlcjpwYXNz", "Proxy-Authorization", "Basic eDp5",
				"X-Maat-Action", "ALLOW", "X-Maat-Rule", "forged", "X-Forwarded-For", "203.0.113.9",
				"X-Forwarded-Host", "other.example", "Forwarded", "for=203.0.113.8", "X-Api-Key", "k")
			if res.StatusCode != 200 || body != "garbage" {
				t.Fatalf("diverted: %d %q", res.StatusCode, body)
			}
			h := <-got
			for k := range h {
				switch k {
				case "User-Agent", "Accept", "Accept-Encoding", "X-Forwarded-For", "X-Real-Ip":
				default:
					t.Errorf("the tarpit got %s: %q", k, h[k])
				}
			}
			if h.Get("User-Agent") != gptUA || h.Get("Accept") != "text/html" {
				t.Errorf("the tarpit lost what a page needs: %v", h)
			}
			if v := strings.Join(h["X-Forwarded-For"], ","); v != "203.0.113.9" {
				t.Errorf("X-Forwarded-For at the tarpit %q, want the client alone", v)
			}
		})
	}
}

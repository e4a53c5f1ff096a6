package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestExplainIDAfterRotation: a visitor's request ID, taken from a real
// deny page of a running edge, is found by edge explain -id after the
// fingerprint log has rotated (the record is then in a rotated file, plain
// or gzipped), and the explanation names the rule that denied it.
func TestExplainIDAfterRotation(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
	t.Cleanup(up.Close)
	dir := t.TempDir()
	pol := writeFile(t, dir, "policy.yaml", "bots:\n  - {name: no-entry, path_regex: ^/deny, action: DENY}\n  - {name: everyone, path_regex: ., action: ALLOW}\n")
	fp := filepath.Join(dir, "logs", "fp.jsonl")
	cfg := writeFile(t, dir, "edge.yaml", fmt.Sprintf(`listen: { https: "127.0.0.1:0", http: "", admin: "", http3: false }
tls: { mode: self-signed, cache: %q }
policy: %s
log: { fingerprints: %q, max_size_mb: 1 }
sites:
  - hosts: [site.test]
    upstream: %s
`, filepath.Join(dir, "state"), pol, fp, up.URL))
	p := startEdgeProcess(t, "run", cfg)
	addr, _ := p.waitLog(t, "listening")["https"].(string)
	c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: true}}
	get := func(path, ua string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", "https://"+addr+path, nil)
		req.Host = "site.test"
		req.Header.Set("User-Agent", ua)
		req.Header.Set("Accept", "text/html")
		req.Header.Set("Sec-Fetch-Mode", "navigate")
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	res, page := get("/deny/me", "Mozilla/5.0 (visitor)")
	m := regexp.MustCompile(`<code class="rid">([^<]+)</code>`).FindStringSubmatch(page)
	if res.StatusCode != 403 || m == nil || m[1] != res.Header.Get("X-Request-Id") {
		t.Fatalf("deny page: %d, ID %q, X-Request-Id %q:\n%s", res.StatusCode, m, res.Header.Get("X-Request-Id"), page)
	}
	id := m[1]

	// Lines of about 8 KB (long User-Agent and path) fill the 1 MB log
	// within some 130 requests; the test sends until a rotated file shows.
	long, rotated := strings.Repeat("x", 4000), []string(nil)
	for i := 0; len(rotated) == 0; i++ {
		if i == 2000 {
			t.Fatalf("no rotation after %d requests; log directory: %v", i, rotated)
		}
		get(fmt.Sprintf("/fill/%d/%s", i, long), long)
		if i%20 == 19 {
			rotated, _ = filepath.Glob(filepath.Join(dir, "logs", "fp-*.jsonl*"))
		}
	}
	out, errOut, code := edgeRun(t, "", "explain", "-config", cfg, "-id", id)
	if code != 0 {
		t.Fatalf("edge explain -id %s: exit %d: %s", id, code, errOut)
	}
	where := regexp.MustCompile(`(?m)^request ` + regexp.QuoteMeta(id) + `: (\S+), line 1$`).FindStringSubmatch(out)
	if where == nil || !strings.HasPrefix(filepath.Base(where[1]), "fp-") {
		t.Errorf("not found in a rotated file:\n%s", out)
	}
	for _, w := range []string{"request: GET site.test/deny/me", "logged decision: DENY", "logged rules and signals: no-entry",
		"decision: DENY weight=0 rule=no-entry", "the rule no-entry decided it"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	if _, err := os.Stat(fp); err != nil {
		t.Errorf("no current log after rotation: %v", err)
	}
}

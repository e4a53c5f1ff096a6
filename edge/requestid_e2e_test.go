package edge

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// idUpstream records the X-Request-Id each path arrived with.
type idUpstream struct {
	*httptest.Server
	ids sync.Map // path → X-Request-Id values
}

func newIDUpstream(t *testing.T) *idUpstream {
	t.Helper()
	u := &idUpstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.ids.Store(r.URL.Path, r.Header.Values("X-Request-Id"))
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(u.Close)
	return u
}

// got returns the X-Request-Id values path arrived with, and whether it
// arrived at all.
func (u *idUpstream) got(path string) ([]string, bool) {
	v, ok := u.ids.Load(path)
	if !ok {
		return nil, false
	}
	return v.([]string), true
}

// waitAccessLine polls a JSON access log for the line of uri.
func waitAccessLine(t *testing.T, file, uri string) fpLine {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if f, err := os.Open(file); err == nil {
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				var l fpLine
				if json.Unmarshal(sc.Bytes(), &l) == nil && l.str("uri") == uri {
					f.Close()
					return l
				}
			}
			f.Close()
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no access log line for %s", uri)
	return nil
}

// startIDEdge starts an edge with a policy that denies /deny and
// challenges /challenge, a fingerprint log and a JSON access log.
func startIDEdge(t *testing.T, extra string) (e *testEdge, up *idUpstream, fpFile, accessFile string) {
	t.Helper()
	dir := t.TempDir()
	pol := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(pol, []byte(`bots:
  - {name: no-entry, path_regex: ^/deny, action: DENY}
  - {name: prove-it, path_regex: ^/challenge, action: CHALLENGE, challenge: {algorithm: fast, bits: 12}}
  - {name: everyone, path_regex: ., action: ALLOW}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	up = newIDUpstream(t)
	fpFile, accessFile = filepath.Join(dir, "fp.jsonl"), filepath.Join(dir, "access.jsonl")
	e = startEdge(t, extra+"policy: "+pol+"\nlog: {fingerprints: "+fpFile+"}\n"+
		"sites: [{hosts: [localhost], upstream: "+up.URL+", access_log: {path: "+accessFile+", format: json}}]\n")
	return e, up, fpFile, accessFile
}

// TestRequestIDEverywhere: one request has one ID, the same in its
// fingerprint log line, its access log line, the X-Request-Id its upstream
// receives, and on the deny or challenge page the edge answers with (in
// the X-Request-Id header, and in the page for a visitor to quote).
func TestRequestIDEverywhere(t *testing.T) {
	t.Parallel()
	e, up, fpFile, accessFile := startIDEdge(t, "")
	navigate := []string{"Sec-Fetch-Mode", "navigate", "Accept", "text/html"}
	for _, tt := range []struct {
		name, proto, path string
		hdr               []string
		status            int
		page              *regexp.Regexp // where the body shows the ID (${id}), or nil
	}{
		{name: "proxied h1", proto: "h1", path: "/up/1", status: 200},
		{name: "proxied h2", proto: "h2", path: "/up/2", status: 200},
		{name: "proxied h3", proto: "h3", path: "/up/3", status: 200},
		{name: "deny page", proto: "h2", path: "/deny", hdr: navigate, status: 403,
			page: regexp.MustCompile(`<dd><code class="rid">([^<]+)</code></dd>`)},
		{name: "challenge page", proto: "h2", path: "/challenge/page", hdr: navigate, status: 403,
			page: regexp.MustCompile(`<p class="muted">Request ID: <code class="rid">([^<]+)</code></p>`)},
		{name: "challenge for an API client", proto: "h1", path: "/challenge/api", hdr: []string{"Sec-Fetch-Mode", "cors", "Accept", "application/json"},
			status: 401, page: regexp.MustCompile(`"request_id":"([^"]+)"`)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, body := get(t, e.client(t, tt.proto), e.url(tt.path), append(tt.hdr, "User-Agent", "idtest/1.0")...)
			if res.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %.200s", res.StatusCode, tt.status, body)
			}
			id := waitLine(t, fpFile, tt.path).str("request_id")
			if id == "" {
				t.Fatal("no request_id in the fingerprint log line")
			}
			if got := waitAccessLine(t, accessFile, tt.path).str("request_id"); got != id {
				t.Errorf("access log request_id %q, fingerprint log %q", got, id)
			}
			ids, reached := up.got(tt.path)
			if reached != (tt.status == 200) {
				t.Fatalf("reached the upstream: %v, want %v", reached, tt.status == 200)
			}
			if reached && (len(ids) != 1 || ids[0] != id) {
				t.Errorf("upstream X-Request-Id %q, fingerprint log %q", ids, id)
			}
			if tt.page == nil {
				return
			}
			if got := res.Header.Get("X-Request-Id"); got != id {
				t.Errorf("page header X-Request-Id %q, fingerprint log %q", got, id)
			}
			if m := tt.page.FindStringSubmatch(body); m == nil || m[1] != id {
				t.Errorf("the page shows %q, fingerprint log %q:\n%s", m, id, body)
			}
		})
	}
}

// TestRequestIDFromTrustedProxy: a trusted proxy's X-Request-Id names the
// request in the logs and upstream; a well-formed ID sent by anyone else,
// or a malformed one sent by the proxy, is replaced by the edge's own.
func TestRequestIDFromTrustedProxy(t *testing.T) {
	t.Parallel()
	trusted := map[bool]string{false: "", true: "trusted_proxies: [127.0.0.0/8]\n"}
	type edgeLogs struct {
		e              *testEdge
		up             *idUpstream
		fpFile, access string
	}
	edges := map[bool]edgeLogs{}
	for k, extra := range trusted {
		e, up, fp, access := startIDEdge(t, extra)
		edges[k] = edgeLogs{e, up, fp, access}
	}
	for _, tt := range []struct {
		name    string
		trusted bool
		sent    string
		kept    bool
	}{
		{"trusted proxy", true, "lb-7f3a9c-0001", true},
		{"untrusted client", false, "lb-7f3a9c-0001", false},
		{"trusted proxy, malformed", true, "two words", false},
		{"trusted proxy, too long", true, strings.Repeat("a", 129), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			el := edges[tt.trusted]
			path := "/sent/" + strings.ReplaceAll(tt.name, " ", "-")
			if res, _ := get(t, el.e.client(t, "h2"), el.e.url(path), "X-Request-Id", tt.sent); res.StatusCode != 200 {
				t.Fatalf("status %d", res.StatusCode)
			}
			id := waitLine(t, el.fpFile, path).str("request_id")
			if (id == tt.sent) != tt.kept || id == "" {
				t.Errorf("logged request_id %q for a sent %q, want kept: %v", id, tt.sent, tt.kept)
			}
			if got := waitAccessLine(t, el.access, path).str("request_id"); got != id {
				t.Errorf("access log request_id %q, fingerprint log %q", got, id)
			}
			if ids, _ := el.up.got(path); len(ids) != 1 || ids[0] != id {
				t.Errorf("upstream X-Request-Id %q, fingerprint log %q", ids, id)
			}
		})
	}
}

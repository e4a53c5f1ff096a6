package edge

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReasonsThroughEdge sends bad input to a running edge on each
// protocol that can carry it, and to port 80 and to the TLS port in plain
// HTTP: each gets its 4xx (or the upstream's failure its 5xx) with the
// reason and the request's ID on the page, and a fingerprint log line with
// the same ID, status and reason. Nothing panics.
func TestReasonsThroughEdge(t *testing.T) {
	t.Parallel()
	up := newRawUpstream(t)
	dir := t.TempDir()
	fp := filepath.Join(dir, "fp.jsonl")
	logw := &syncBuffer{}
	e := startEdgeLog(t, fmt.Sprintf(`trusted_proxies: [127.0.0.1/32]
log: { fingerprints: %q }
sites:
  - { hosts: [localhost], upstream: %s, max_body_bytes: 16 }
  - { hosts: [down.test], upstream: http://%s }
`, fp, up.URL, closedAddr(t)), logw)

	type result struct {
		status int
		id     string
		body   string
	}
	fromResponse := func(res *http.Response) result {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return result{res.StatusCode, res.Header.Get("X-Request-Id"), string(b)}
	}
	do := func(t *testing.T, proto, method, host, path string, body string, hdr ...string) result {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequest(method, e.url(path), rd)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		res, err := e.client(t, proto).Do(req)
		if err != nil {
			t.Fatalf("%s %s %s: %v", proto, method, path, err)
		}
		return fromResponse(res)
	}
	raw := func(t *testing.T, req string) result {
		t.Helper()
		res := rawTLSSession(t, e, req)
		if len(res) != 1 {
			t.Fatalf("%d answers; want one", len(res))
		}
		return result{res[0].StatusCode, res[0].Header.Get("X-Request-Id"), ""}
	}
	const head = "Host: localhost\r\nUser-Agent: Go-http-client/1.1\r\n"

	type check struct {
		name   string
		send   func(t *testing.T) result
		status int
		reason string
		action string // refused before the policy: DENY; after it, what it decided
	}
	var checks []check
	for _, proto := range []string{"h1", "h2", "h3"} {
		checks = append(checks,
			check{proto + "_trace", func(t *testing.T) result { return do(t, proto, "TRACE", "localhost", "/x", "") },
				405, reasonMethodNotAllowed, "DENY"},
			check{proto + "_bad_path", func(t *testing.T) result { return do(t, proto, "GET", "localhost", "/a/..%2F..%2Fetc/passwd", "") },
				400, reasonBadPath, "DENY"},
			check{proto + "_bad_forwarded_for", func(t *testing.T) result {
				return do(t, proto, "GET", "localhost", "/", "", "X-Forwarded-For", "999.0.0.1")
			}, 400, reasonBadForwardedFor, "DENY"},
			check{proto + "_unknown_site", func(t *testing.T) result { return do(t, proto, "GET", "other.test", "/", "") },
				421, reasonUnknownSite, "DENY"},
			check{proto + "_body_too_large", func(t *testing.T) result {
				return do(t, proto, "POST", "localhost", "/upload", strings.Repeat("x", 1000))
			}, 413, reasonBodyTooLarge, "ALLOW"},
			check{proto + "_upstream_unreachable", func(t *testing.T) result { return do(t, proto, "GET", "down.test", "/", "") },
				502, reasonUpstreamUnreachable, "ALLOW"},
		)
	}
	checks = append(checks,
		check{"h1_ambiguous_length", func(t *testing.T) result {
			return raw(t, "POST /a HTTP/1.1\r\n"+head+"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
		}, 400, reasonAmbiguousLength, "DENY"},
		check{"h1_raw_bad_path", func(t *testing.T) result {
			return raw(t, "GET /a\\..\\b HTTP/1.1\r\n"+head+"Connection: close\r\n\r\n")
		},
			400, reasonBadPath, "DENY"},
		check{"port80_unknown_site", func(t *testing.T) result {
			res, err := http.Get("http://" + e.Addrs().HTTP + "/x") // Host 127.0.0.1:port: no site's
			if err != nil {
				t.Fatal(err)
			}
			return fromResponse(res)
		}, 421, reasonUnknownSite, "DENY"},
		check{"plain_http_on_tls_port", func(t *testing.T) result {
			c, err := net.Dial("tcp", e.Addrs().HTTPS)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second)) // bounds a hang only
			fmt.Fprintf(c, "POST /form HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n")
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			return fromResponse(res)
		}, 400, reasonPlainHTTP, "DENY"},
	)

	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got := c.send(t)
			if got.status != c.status || got.id == "" {
				t.Fatalf("status %d, request id %q; want %d and an id", got.status, got.id, c.status)
			}
			if got.body != "" && c.status < 500 && !strings.Contains(got.body, "reason: "+c.reason) {
				t.Errorf("the page does not name the reason %s: %q", c.reason, got.body)
			}
			l := waitFPLine(t, fp, got.id)
			if l.str("reason") != c.reason || l["status"] != float64(c.status) {
				t.Errorf("log line reason %q, status %v; want %q, %d: %v", l.str("reason"), l["status"], c.reason, c.status, l)
			}
			if l.str("action") != c.action {
				t.Errorf("log line action %q; want %s", l.str("action"), c.action)
			}
		})
	}
	t.Cleanup(func() {
		if strings.Contains(logw.String(), "panic") {
			t.Errorf("the edge panicked:\n%s", logw)
		}
		if heads := up.heads(); len(heads) != 0 {
			t.Errorf("the upstream got %d requests, the first %q", len(heads), requestLine(heads[0]))
		}
	})
}

// waitFPLine polls the fingerprint log for the line of a request ID.
func waitFPLine(t *testing.T, file, id string) fpLine {
	t.Helper()
	var found fpLine
	if !waitFor(t, 10*time.Second, func() bool {
		b, err := os.ReadFile(file)
		if err != nil {
			return false
		}
		for line := range strings.Lines(string(b)) {
			var l fpLine
			if json.Unmarshal([]byte(line), &l) == nil && l.str("request_id") == id {
				found = l
				return true
			}
		}
		return false
	}) {
		t.Fatalf("no fingerprint log line for request %s", id)
	}
	return found
}

// closedAddr is a loopback address where nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

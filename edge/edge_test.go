package edge

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go/http3"

	"github.com/maatproxy/maat/edge/config"
)

// testEdge starts an edge on loopback with the given sites (YAML) and returns
// it with clients for each protocol.
type testEdge struct {
	*Server
	roots *x509.CertPool
	base  string // https://127.0.0.1:port
}

func startEdge(t *testing.T, yamlText string) *testEdge {
	t.Helper()
	return startEdgeLog(t, yamlText, io.Discard)
}

// syncBuffer is a log sink tests can read while the edge writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startEdgeLog(t *testing.T, yamlText string, logw io.Writer) *testEdge {
	t.Helper()
	return startEdgeListen(t, "", yamlText, logw)
}

// startEdgeListen is startEdgeLog with more keys of listen: ("k: v, …").
func startEdgeListen(t *testing.T, listen, yamlText string, logw io.Writer) *testEdge {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte(edgeConfigText(listen, yamlText)))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return startEdgeConfig(t, cfg, logw)
}

// edgeConfigText is the configuration of startEdgeListen: listeners on
// free loopback ports (and the keys of listen), a self-signed certificate
// kept in memory, and yamlText.
func edgeConfigText(listen, yamlText string) string {
	if listen != "" {
		listen = ", " + listen
	}
	return "listen: { https: \"127.0.0.1:0\", http: \"127.0.0.1:0\", admin: \"127.0.0.1:0\"" + listen + " }\n" +
		"tls: { mode: self-signed, cache: \"\" }\n" + yamlText
}

// startEdgeConfig starts an edge with cfg, logging to logw.
func startEdgeConfig(t *testing.T, cfg config.Config, logw io.Writer) *testEdge {
	t.Helper()
	return startEdgeHooks(t, cfg, testHooks{}, logw)
}

// startEdgeHooks is startEdgeConfig with the test's hooks.
func startEdgeHooks(t *testing.T, cfg config.Config, hooks testHooks, logw io.Writer) *testEdge {
	t.Helper()
	s := startServerHooks(t, cfg, hooks, slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelDebug})))
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(s.certs.RootPEM()) {
		t.Fatal("no root PEM from the self-signed CA")
	}
	return &testEdge{Server: s, roots: roots, base: "https://" + s.Addrs().HTTPS}
}

// startServer starts a Server of cfg logging to log (nil: none), shut
// down when the test ends.
func startServer(t *testing.T, cfg config.Config, log *slog.Logger) *Server {
	t.Helper()
	return startServerHooks(t, cfg, testHooks{}, log)
}

// startServerHooks is startServer with the test's hooks.
func startServerHooks(t *testing.T, cfg config.Config, hooks testHooks, log *slog.Logger) *Server {
	t.Helper()
	s, err := newServer(cfg, log, hooks)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := s.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	return s
}

func (e *testEdge) tlsConfig(alpn ...string) *tls.Config {
	return &tls.Config{RootCAs: e.roots, ServerName: "localhost", NextProtos: alpn}
}

// client returns an HTTP client for "h1", "h2" or "h3".
func (e *testEdge) client(t *testing.T, proto string) *http.Client {
	t.Helper()
	var rt http.RoundTripper
	switch proto {
	case "h1":
		rt = &http.Transport{TLSClientConfig: e.tlsConfig("http/1.1"), ForceAttemptHTTP2: false, DisableCompression: true}
	case "h2":
		rt = h2Transport(&http.Transport{TLSClientConfig: e.tlsConfig("h2"), DisableCompression: true})
	case "h3":
		tr := &http3.Transport{TLSClientConfig: e.tlsConfig()}
		t.Cleanup(func() { _ = tr.Close() })
		rt = tr
	}
	return &http.Client{Transport: rt, Timeout: 20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// h2Transport makes tr speak HTTP/2 only, as x/net's http2.Transport
// did before net/http's own took its place.
func h2Transport(tr *http.Transport) *http.Transport {
	tr.Protocols = new(http.Protocols)
	tr.Protocols.SetHTTP2(true)
	return tr
}

func (e *testEdge) url(path string) string { return e.base + path }

// echoUpstream answers with what it received.
func echoUpstream(t *testing.T, name string) *httptest.Server {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Upstream", name)
		for _, k := range []string{"X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host", "X-Real-Ip", "X-Maat-Action", "X-Maat-Weight", "X-Maat-Ja4"} {
			fmt.Fprintf(w, "%s=%s\n", k, strings.Join(r.Header.Values(k), "|"))
		}
		fmt.Fprintf(w, "Host=%s\nPath=%s\nProto=%s\n", r.Host, r.URL.RequestURI(), r.Proto)
		for k := range r.Header {
			if strings.HasPrefix(strings.ToLower(k), "x-maat-") && k != "X-Maat-Action" && k != "X-Maat-Weight" && k != "X-Maat-Ja4" {
				fmt.Fprintf(w, "extra=%s\n", k)
			}
		}
	}))
	t.Cleanup(up.Close)
	return up
}

func get(t *testing.T, c *http.Client, u string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	req.Host = "localhost"
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

func TestProtocolsReachUpstream(t *testing.T) {
	t.Parallel()
	up := echoUpstream(t, "a")
	e := startEdge(t, "sites: [{hosts: [localhost], upstream: "+up.URL+"}]\n")
	for _, tt := range []struct{ proto, want string }{
		{"h1", "HTTP/1.1"}, {"h2", "HTTP/2.0"}, {"h3", "HTTP/3.0"},
	} {
		t.Run(tt.proto, func(t *testing.T) {
			t.Parallel()
			c := e.client(t, tt.proto)
			res, body := get(t, c, e.url("/p?q=1"), "X-Maat-Action", "ALLOW-FORGED", "x-maat-weight", "-100", "X-Maat-Evil", "1",
				"X-Forwarded-For", "198.51.100.7")
			if res.StatusCode != 200 || res.Proto != tt.want {
				t.Fatalf("status %d proto %s, want 200 %s", res.StatusCode, res.Proto, tt.want)
			}
			for _, want := range []string{
				"X-Forwarded-For=127.0.0.1\n", // the client's own value is dropped: loopback is not trusted
				"X-Forwarded-Proto=https\n", "X-Real-Ip=127.0.0.1\n", "Host=localhost\n", "Path=/p?q=1\n",
				"X-Maat-Action=ALLOW\n",
			} {
				if !strings.Contains(body, want) {
					t.Errorf("upstream did not get %q; got:\n%s", want, body)
				}
			}
			if strings.Contains(body, "FORGED") || strings.Contains(body, "-100") || strings.Contains(body, "extra=") {
				t.Errorf("a client-sent X-Maat-* header reached the upstream:\n%s", body)
			}
			if tt.proto != "h3" {
				if got := res.Header.Get("Alt-Svc"); !strings.HasPrefix(got, `h3=":`) {
					t.Errorf("Alt-Svc = %q, want h3 advertised", got)
				}
			}
		})
	}
}

func TestPlainHTTPOnTLSPort(t *testing.T) {
	t.Parallel()
	up := echoUpstream(t, "a")
	e := startEdge(t, "sites: [{hosts: [localhost], upstream: "+up.URL+"}]\n")
	for _, tt := range []struct {
		method string
		status int
		loc    string
	}{
		{"GET", 301, "https://localhost:" + port(e.Addrs().HTTPS) + "/x?y=1"},
		{"POST", 400, ""},
	} {
		c, err := net.Dial("tcp", e.Addrs().HTTPS)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "%s /x?y=1 HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n", tt.method)
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%s: no answer: %v", tt.method, err)
		}
		body, _ := io.ReadAll(res.Body)
		c.Close()
		if res.StatusCode != tt.status || res.Header.Get("Location") != tt.loc || !bytes.Contains(body, []byte("HTTPS")) {
			t.Errorf("%s: %d %q %q", tt.method, res.StatusCode, res.Header.Get("Location"), body)
		}
	}
}

func TestPort80RedirectsAndAdmin(t *testing.T) {
	t.Parallel()
	up := echoUpstream(t, "a")
	e := startEdge(t, "sites: [{hosts: [localhost], upstream: "+up.URL+", hsts: {max_age: 2h}}]\n")
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Get("http://" + e.Addrs().HTTP + "/a?b=c")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	// The Host header is 127.0.0.1:port, which the site table does not know.
	if res.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("unknown host on :80: %d", res.StatusCode)
	}
	req, _ := http.NewRequest("GET", "http://"+e.Addrs().HTTP+"/a?b=c", nil)
	req.Host = "localhost"
	res, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	want := "https://localhost:" + port(e.Addrs().HTTPS) + "/a?b=c"
	if res.StatusCode != http.StatusMovedPermanently || res.Header.Get("Location") != want {
		t.Errorf(":80 → %d %q, want 301 %q", res.StatusCode, res.Header.Get("Location"), want)
	}
	if got := res.Header.Get("Strict-Transport-Security"); got != "" { // HTTPS only
		t.Errorf(":80 sent HSTS %q", got)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		res, err := http.Get("http://" + e.Addrs().Admin + p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Errorf("%s: %d %s", p, res.StatusCode, b)
		}
	}
}

func port(hostport string) string { _, p, _ := net.SplitHostPort(hostport); return p }

func readAll(res *http.Response) string {
	b, _ := io.ReadAll(res.Body)
	return string(b)
}

// newUpstream serves f on loopback and returns its URL.
func newUpstream(t *testing.T, f http.HandlerFunc) string {
	t.Helper()
	up := httptest.NewServer(f)
	t.Cleanup(up.Close)
	return up.URL
}

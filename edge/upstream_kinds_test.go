package edge

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maatproxy/maat/edge/config"
)

// TestUnixSocketUpstream: unix:/path.sock upstreams (Gitea, Forgejo) are
// reached over the socket, with the site's Host and the request's path.
func TestUnixSocketUpstream(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(t.TempDir(), "app.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "socket %s %s %s", r.Host, r.URL.RequestURI(), r.Header.Get("X-Forwarded-Proto"))
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	h := newTestHandler(t, "policy: \"\"\nsites: [{hosts: [localhost], upstream: \"unix:"+sock+"\"}]\n")
	for _, proto := range []string{"h1", "h2", "h3"} {
		res, body := get(t, handlerClient(h, proto), handlerURL("/repo/x?y=1"), "User-Agent", "Go-http-client/1.1")
		if res.StatusCode != 200 || body != "socket localhost /repo/x?y=1 https" {
			t.Errorf("%s: %d %q", proto, res.StatusCode, body)
		}
	}
	if _, err := config.Parse("c.yaml", []byte("tls: {mode: self-signed}\nsites: [{hosts: [a.test], upstream: \"unix:relative.sock\"}]\n")); err == nil {
		t.Error("a relative socket path was accepted")
	}
}

// TestUnixSocketUpstreamNamed: logs name a Unix-socket upstream as
// configured, unix:/path.sock, never by the made-up host its URL carries
// for the transport: in the site line at start, and in upstream_failed
// when the socket is gone.
func TestUnixSocketUpstreamNamed(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(t.TempDir(), "gone.sock")
	yaml := "policy: \"\"\nsites: [{hosts: [localhost], upstream: \"unix:" + sock + "\", routes: [{path: /r/, upstream: \"unix:" + sock + "\"}]}]\n"
	cfg, err := config.Parse("c.yaml", []byte("tls: {mode: self-signed}\n"+yaml))
	if err != nil {
		t.Fatal(err)
	}
	var site strings.Builder
	for _, a := range siteAttrs(&cfg, 0) {
		site.WriteString(a.String() + " ")
	}
	if want := "upstreams=[unix:" + sock + "]"; !strings.Contains(site.String(), want) || strings.Contains(site.String(), ".invalid") {
		t.Errorf("site line %q, want %q", site.String(), want)
	}
	if want := "/r/ → unix:" + sock; !strings.Contains(site.String(), want) {
		t.Errorf("site line %q, want route %q", site.String(), want)
	}
	var logs syncBuffer
	h := newTestHandlerEnv(t, yaml, Env{Log: slog.New(slog.NewJSONHandler(&logs, nil))})
	res, _ := get(t, handlerClient(h, "h1"), handlerURL("/x"), "User-Agent", "Go-http-client/1.1")
	if res.StatusCode != http.StatusBadGateway {
		t.Fatalf("status %d, want 502", res.StatusCode)
	}
	var line map[string]any
	for l := range strings.Lines(logs.String()) {
		if json.Unmarshal([]byte(l), &line) == nil && line["msg"] == "upstream_failed" {
			break
		}
		line = nil
	}
	if line == nil || line["upstream"] != "unix:"+sock {
		t.Errorf("upstream_failed %v, want upstream unix:%s; log:\n%s", line, sock, logs.String())
	}
}

// TestHTTPSUpstream: an https:// upstream is verified (a self-signed one is
// refused with 502), trusted through upstream_tls.ca_file, or, when the
// operator says so, not verified.
func TestHTTPSUpstream(t *testing.T) {
	t.Parallel()
	up := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "tls upstream %s %s", r.Host, r.URL.Path)
	}))
	t.Cleanup(up.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: up.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, tls string
		status    int
	}{
		{"verified against the system roots", "", 502},
		{"ca_file", "upstream_tls: {ca_file: " + ca + ", server_name: example.com}", 200},
		{"insecure_skip_verify", "upstream_tls: {insecure_skip_verify: true}", 200},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			site := "{hosts: [localhost], upstream: " + up.URL + "}"
			if tt.tls != "" {
				site = "{hosts: [localhost], upstream: " + up.URL + ", " + tt.tls + "}"
			}
			h := newTestHandler(t, "policy: \"\"\nsites: ["+site+"]\n")
			res, body := get(t, handlerClient(h, "h2"), handlerURL("/p"), "User-Agent", "Go-http-client/2.0")
			if res.StatusCode != tt.status {
				t.Fatalf("%d %q, want %d", res.StatusCode, body, tt.status)
			}
			if tt.status == 200 && body != "tls upstream localhost /p" {
				t.Errorf("body %q", body)
			}
		})
	}
	// One address, two settings: refused at load.
	_, err := config.Parse("c.yaml", []byte(fmt.Sprintf(`tls: {mode: self-signed}
sites:
  - {hosts: [a.test], upstream: %[1]s, upstream_tls: {insecure_skip_verify: true}}
  - {hosts: [b.test], upstream: %[1]s}
`, up.URL)))
	if err == nil || !strings.Contains(err.Error(), "other TLS settings") {
		t.Errorf("conflicting upstream_tls: %v", err)
	}
}

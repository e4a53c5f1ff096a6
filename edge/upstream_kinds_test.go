package edge

import (
	"encoding/pem"
	"fmt"
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

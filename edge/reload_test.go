package edge

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/maatproxy/maat/certs"
	"github.com/maatproxy/maat/edge/config"
	"github.com/maatproxy/maat/internal/testacme"
)

// reloadText reloads e with the configuration of startEdge and yamlText.
func reloadText(t *testing.T, s *Server, listen, yamlText string) error {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte(edgeConfigText(listen, yamlText)))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return s.Reload(cfg)
}

// readyzOf reads s's /readyz.
func readyzOf(t *testing.T, s *Server) (int, readiness) {
	t.Helper()
	res, err := http.Get("http://" + s.Addrs().Admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var rd readiness
	if err := json.NewDecoder(res.Body).Decode(&rd); err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, rd
}

func certOf(rd readiness, name string) *certStatus {
	for i := range rd.Certs {
		if rd.Certs[i].Name == name {
			return &rd.Certs[i]
		}
	}
	return nil
}

// getHost asks for path on e with the server name and Host name.
func getHost(t *testing.T, e *testEdge, name, path string) (string, error) {
	t.Helper()
	conf := e.tlsConfig("http/1.1")
	conf.ServerName = name
	c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: conf}}
	defer c.CloseIdleConnections()
	req, _ := http.NewRequest("GET", e.url(path), nil)
	req.Host = name
	res, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return fmt.Sprintf("%d %s", res.StatusCode, b), err
}

// TestReloadAddsSiteCertificate: in tls.mode self-signed, a site added by
// a reload is served at once (its name's handshake succeeds and the request
// reaches its upstream) and /readyz lists it, ready; a site removed by the
// next reload gets no certificate and leaves /readyz.
func TestReloadAddsSiteCertificate(t *testing.T) {
	t.Parallel()
	old := echoUpstream(t, "old")
	added := echoUpstream(t, "added")
	e := startEdge(t, "sites: [{hosts: [localhost], upstream: "+old.URL+"}]\n")
	if _, err := getHost(t, e, "added.test", "/"); err == nil {
		t.Fatal("a name not configured was served")
	}
	if err := reloadText(t, e.Server, "", "sites: [{hosts: [localhost], upstream: "+old.URL+"}, {hosts: [added.test], upstream: "+added.URL+"}]\n"); err != nil {
		t.Fatal(err)
	}
	got, err := getHost(t, e, "added.test", "/after-reload")
	if err != nil || !strings.HasPrefix(got, "200 ") || !strings.Contains(got, "Path=/after-reload") {
		t.Fatalf("the added site after the reload: %q, %v", got, err)
	}
	code, rd := readyzOf(t, e.Server)
	if code != http.StatusOK || !slices.Contains(rd.Sites, "added.test") {
		t.Errorf("readyz: %d, sites %v", code, rd.Sites)
	}
	if c := certOf(rd, "added.test"); c == nil || !c.Ready {
		t.Errorf("readyz: the added name's certificate: %+v", c)
	}

	if err := reloadText(t, e.Server, "", "sites: [{hosts: [localhost], upstream: "+old.URL+"}]\n"); err != nil {
		t.Fatal(err)
	}
	if got, err := getHost(t, e, "added.test", "/"); err == nil {
		t.Errorf("a removed site's name is still served: %q", got)
	}
	code, rd = readyzOf(t, e.Server)
	if code != http.StatusOK || slices.Contains(rd.Sites, "added.test") || certOf(rd, "added.test") != nil {
		t.Errorf("readyz after the removal: %d %+v", code, rd)
	}
}

// TestReloadRefusesUncoveredSite: in tls.mode files, a reload that adds a
// site whose name the certificate files do not cover is refused: the
// running configuration stays, and /readyz stays true to it.
func TestReloadRefusesUncoveredSite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, err := certs.New(certs.Config{Hosts: []string{"site.test"}})
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.GetCertificate(&tls.ClientHelloInfo{ServerName: "site.test"})
	if err != nil {
		t.Fatal(err)
	}
	key, err := x509.MarshalPKCS8PrivateKey(leaf.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Certificate[0]}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), 0o600); err != nil {
		t.Fatal(err)
	}
	up := echoUpstream(t, "a")
	text := func(hosts string) string {
		return "listen: { https: \"127.0.0.1:0\", http: \"\", admin: \"127.0.0.1:0\", http3: false }\n" +
			"tls: { mode: files, cert_file: " + certFile + ", key_file: " + keyFile + " }\n" +
			"sites: [{hosts: [" + hosts + "], upstream: " + up.URL + "}]\n"
	}
	cfg, err := config.Parse("test.yaml", []byte(text("site.test")))
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, cfg, nil)
	if code, rd := readyzOf(t, s); code != http.StatusOK {
		t.Fatalf("readyz before the reload: %d %+v", code, rd)
	}
	cfg, err = config.Parse("test.yaml", []byte(text("site.test, other.test")))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Reload(cfg); err == nil || !strings.Contains(err.Error(), "other.test") {
		t.Fatalf("reload adding a name the files do not cover: %v", err)
	}
	if s.Handler().sites.lookup("other.test") != nil {
		t.Error("the refused reload's site is routed")
	}
	code, rd := readyzOf(t, s)
	if code != http.StatusOK || slices.Contains(rd.Sites, "other.test") || certOf(rd, "other.test") != nil {
		t.Errorf("readyz after a refused reload: %d %+v", code, rd)
	}
	if c := certOf(rd, "site.test"); c == nil || !c.Ready {
		t.Errorf("readyz: the covered name: %+v", c)
	}
}

// TestACMEReloadAddsSite: a site added by a reload in tls.mode acme is
// ordered from Pebble at once, without a handshake asking for it; /readyz
// lists it from the reload on and says ready once its certificate is
// there; then the site is served. A site removed by a reload gets no
// certificate any more.
func TestACMEReloadAddsSite(t *testing.T) {
	t.Parallel()
	up := echoUpstream(t, "a")
	held := holdPorts(t)
	httpsPort, httpPort := held.https, held.http
	ca := testacme.Start(t, httpPort, httpsPort, testacme.Options{})
	cache := filepath.Join(t.TempDir(), "certs")
	config := func(hosts string) config.Config {
		cfg, err := config.Parse("acme.yaml", []byte(fmt.Sprintf(`
listen: { https: "127.0.0.1:%d", http: "127.0.0.1:%d", admin: "127.0.0.1:0", http3: false }
tls:
  mode: acme
  cache: %s
  acme: { email: ops@site.test, directory: %q, ca_roots: %q }
sites: [{hosts: [%s], upstream: %s}]
`, httpsPort, httpPort, cache, ca.DirURL, ca.RootsFile, hosts, up.URL)))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	s, err := New(config("site.test"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	s.bound, s.udp0 = held.tcp, held.udp
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	addr := "127.0.0.1:" + strconv.Itoa(httpsPort)
	get := func(name string) (int, error) {
		c := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: ca.Roots, ServerName: name, NextProtos: []string{"http/1.1"}}}}
		defer c.CloseIdleConnections()
		req, _ := http.NewRequest("GET", "https://"+addr+"/reload", nil)
		req.Host = name
		res, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		res.Body.Close()
		return res.StatusCode, nil
	}
	readyFor := func(name string) bool {
		code, rd := readyzOf(t, s)
		c := certOf(rd, name)
		return code == http.StatusOK && c != nil && c.Ready
	}
	if !waitFor(t, 60*time.Second, func() bool { return readyFor("site.test") }) {
		t.Fatal("no certificate for the first site")
	}

	if err := s.Reload(config("site.test, new.site.test")); err != nil {
		t.Fatal(err)
	}
	_, rd := readyzOf(t, s)
	if !slices.Contains(rd.Sites, "new.site.test") || certOf(rd, "new.site.test") == nil {
		t.Errorf("readyz right after the reload does not list the new site: %+v", rd)
	}
	if c := certOf(rd, "new.site.test"); c != nil && !c.Ready && c.Reason == "" {
		t.Errorf("readyz: the new site is not ready and says no reason: %+v", c)
	}
	if !waitFor(t, 60*time.Second, func() bool { return readyFor("new.site.test") }) {
		_, rd := readyzOf(t, s)
		t.Fatalf("the new site's certificate never came: %+v", rd)
	}
	if code, err := get("new.site.test"); err != nil || code != http.StatusOK {
		t.Fatalf("the new site: %d %v", code, err)
	}
	if n := ca.OrdersFor("new.site.test"); n != 1 {
		t.Errorf("orders for the new site: %d, want 1", n)
	}

	if err := s.Reload(config("new.site.test")); err != nil {
		t.Fatal(err)
	}
	if _, err := get("site.test"); err == nil {
		t.Error("a removed site's name is still served")
	}
	if code, rd := readyzOf(t, s); code != http.StatusOK || certOf(rd, "site.test") != nil {
		t.Errorf("readyz after the removal: %d %+v", code, rd)
	}
}

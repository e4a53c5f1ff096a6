package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/maatproxy/maat/internal/testproc"
)

// bodySize is the upstream's answer: 1 KiB, a small page or API answer.
const bodySize = 1024

// userAgent is what the load tools (wrk, h2load: OpenSSL clients) say
// they are, and goUserAgent what the Go clients say: each an honest client
// the default policy allows (honest-clients.yaml), so the edge's ALLOW path
// is measured. A client that names another's stack (curl over Go's TLS)
// is challenged by the default policy's client-lie rule.
const (
	userAgent   = "curl/8.14.1"
	goUserAgent = "Go-http-client/1.1"
)

// front is one TLS proxy under test.
type front struct {
	name string
	addr string // 127.0.0.1:port
	cmd  *exec.Cmd
	done chan error // the process's Wait
	// restart starts the same front again, afresh.
	restart func() (*front, error)
}

// pids returns the process and its children, read now.
func (f *front) pids() []int { return testproc.Family(f.cmd.Process.Pid) }

// writeCert makes a self-signed ECDSA P-256 certificate for localhost, as
// every front serves.
func writeCert(dir string) (certFile, keyFile string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "localhost"},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o644); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

// freePort returns a loopback port free now.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// setup holds what every front shares.
type setup struct {
	dir               string
	certFile, keyFile string
	upstream          string // 127.0.0.1:port of the nginx upstream
}

// start runs a front's command with its output in dir/<name>.log and
// waits until addr answers a request with the upstream's 1 KiB.
func (s *setup) start(ctx context.Context, name, addr string, env []string, argv ...string) (*front, error) {
	logf, err := os.Create(filepath.Join(s.dir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlives the bench
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	f := &front{name: name, addr: addr, cmd: cmd, done: make(chan error, 1)}
	go func() { f.done <- cmd.Wait(); logf.Close() }()
	if err := s.waitReady(ctx, f); err != nil {
		f.stop()
		log, _ := os.ReadFile(logf.Name())
		return nil, fmt.Errorf("%s did not start: %w\n%s", name, err, tail(log, 2000))
	}
	return f, nil
}

// waitReady polls the front until it answers 200 with the upstream's
// body, the process exits, or 20 seconds pass.
func (s *setup) waitReady(ctx context.Context, f *front) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		select {
		case err := <-f.done:
			f.done <- err
			return fmt.Errorf("exited: %v", err)
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-tick.C:
		}
		if f.name == "upstream" {
			last = getOnce(f.addr, false)
		} else {
			last = getOnce(f.addr, true)
		}
		if last == nil {
			return nil
		}
	}
}

// getOnce asks addr for / once and checks the answer.
func getOnce(addr string, useTLS bool) error {
	tr := &http.Transport{TLSClientConfig: clientTLS(nil), DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	scheme := "http"
	if useTLS {
		scheme = "https"
	}
	req, _ := http.NewRequest("GET", scheme+"://"+addr+"/", nil)
	req.Host = "localhost"
	req.Header.Set("User-Agent", goUserAgent)
	res, err := (&http.Client{Transport: tr, Timeout: 2 * time.Second}).Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if res.StatusCode != 200 || len(body) != bodySize {
		return fmt.Errorf("status %d, %d bytes", res.StatusCode, len(body))
	}
	return nil
}

// clientTLS is the clients' TLS configuration. Key share X25519: nginx's
// OpenSSL 3.0 has no post-quantum hybrid, and a Go server would otherwise
// pay for ML-KEM where nginx does not.
func clientTLS(cache tls.ClientSessionCache) *tls.Config {
	return &tls.Config{
		ServerName:         "localhost",
		InsecureSkipVerify: true, // our own self-signed certificate
		NextProtos:         []string{"http/1.1"},
		CurvePreferences:   []tls.CurveID{tls.X25519, tls.CurveP256}, // OpenSSL wants the certificate's curve listed
		ClientSessionCache: cache,
	}
}

// stop ends the front and waits for it.
func (f *front) stop() {
	if f == nil || f.cmd.Process == nil {
		return
	}
	_ = f.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-f.done:
	case <-time.After(10 * time.Second):
		_ = f.cmd.Process.Kill()
		<-f.done
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// startUpstream runs nginx serving the 1 KiB page on keep-alive
// connections that last the whole run.
func (s *setup) startUpstream(ctx context.Context) (*front, error) {
	www := filepath.Join(s.dir, "www")
	if err := os.MkdirAll(www, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(www, "index.html"), bytes.Repeat([]byte("x"), bodySize), 0o644); err != nil {
		return nil, err
	}
	conf := nginxHead(s.dir, "upstream", 1) + fmt.Sprintf(`http {
	access_log off;
	keepalive_requests 10000000;
	keepalive_timeout 600s;
	default_type text/html;
	open_file_cache max=16;
	server {
		listen %s;
		root %s;
	}
}
`, s.upstream, www)
	return s.startNginx(ctx, "upstream", s.upstream, conf)
}

// startNginxFront runs nginx as a TLS front on HTTP/1.1 and HTTP/2, with
// a keep-alive pool to the upstream and its access log on, as a site runs
// it.
func (s *setup) startNginxFront(ctx context.Context) (*front, error) {
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	// keepalive_requests: nginx closes a connection after 1000 requests
	// by default (HTTP/2 too), which the Go fronts do not; the load tools
	// would then measure handshakes, or stop on an HTTP/2 GOAWAY.
	conf := nginxHead(s.dir, "nginx", 0) + fmt.Sprintf(`http {
	access_log %s;
	keepalive_requests 10000000;
	upstream up {
		server %s;
		keepalive 64;
	}
	server {
		listen %s ssl http2;
		server_name localhost;
		ssl_certificate %s;
		ssl_certificate_key %s;
		location / {
			proxy_pass http://up;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
			proxy_set_header Host $host;
			proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
			proxy_set_header X-Forwarded-Proto https;
		}
	}
}
`, filepath.Join(s.dir, "nginx-access.log"), s.upstream, addr, s.certFile, s.keyFile)
	return s.startNginx(ctx, "nginx", addr, conf)
}

// nginxHead is the top of an nginx configuration: workers (0: one per
// core), files under dir, enough descriptors for the idle connections.
func nginxHead(dir, name string, workers int) string {
	w := "auto"
	if workers > 0 {
		w = fmt.Sprint(workers)
	}
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;\n" // workers write the temp directories under dir
	}
	return fmt.Sprintf(`%sworker_processes %s;
daemon off;
pid %s/%s.pid;
error_log %s/%s-error.log warn;
worker_rlimit_nofile 40000;
events { worker_connections 20000; }
`, user, w, dir, name, dir, name)
}

func (s *setup) startNginx(ctx context.Context, name, addr, conf string) (*front, error) {
	path := filepath.Join(s.dir, name+".conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	prefix := filepath.Join(s.dir, name)
	if err := os.MkdirAll(prefix, 0o755); err != nil {
		return nil, err
	}
	return s.start(ctx, name, addr, nil, "nginx", "-p", prefix, "-c", path, "-e", filepath.Join(s.dir, name+"-error.log"))
}

// startCaddy runs Caddy's reverse_proxy with the same certificate, its
// defaults otherwise (HTTP/1.1, HTTP/2 and HTTP/3; no access log).
func (s *setup) startCaddy(ctx context.Context, bin string) (*front, error) {
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(addr)
	home := filepath.Join(s.dir, "caddy")
	conf := fmt.Sprintf(`{
	admin off
	persist_config off
	auto_https off
	default_sni localhost
	storage file_system %s
}
https://localhost:%s {
	bind 127.0.0.1
	tls %s %s
	reverse_proxy %s
}
`, home, port, s.certFile, s.keyFile, s.upstream)
	path := filepath.Join(s.dir, "Caddyfile")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	env := []string{"HOME=" + home, "XDG_DATA_HOME=" + home, "XDG_CONFIG_HOME=" + home}
	return s.start(ctx, "caddy", addr, env, bin, "run", "--config", path, "--adapter", "caddyfile")
}

// startFloor runs gofloor, net/http's TLS server proxying with nothing
// of its own, with the same certificate.
func (s *setup) startFloor(ctx context.Context, bin string) (*front, error) {
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	return s.start(ctx, "gofloor", addr, nil, bin, "-listen", addr, "-upstream", s.upstream, "-cert", s.certFile, "-key", s.keyFile)
}

// startEdge runs the edge as users run it: `edge run` with the default
// policy and the fingerprint log on, the certificate from files; extra is
// more of its configuration (YAML; indented lines go under limits:), or "".
// limits.upstream_conns is 256, more than the load tools have in flight
// (h2load 16 × 10), because nginx and Caddy open to the upstream what
// they need: with the default 8 (a small application's capacity), the
// edge's line made the HTTP/2 run's requests beyond 8 + 64 waiting a 503
// (upstream_queue_share), which measured the line, not the proxy.
func (s *setup) startEdge(ctx context.Context, name, bin, extra string) (*front, error) {
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	state := filepath.Join(s.dir, name)
	if err := os.MkdirAll(state, 0o700); err != nil {
		return nil, err
	}
	conf := fmt.Sprintf(`listen: {https: "%s", http: "", admin: ""}
tls: {mode: files, cert_file: %s, key_file: %s, cache: %s}
challenge: {secret_file: %s/secret}
sites:
  - hosts: [localhost]
    upstream: http://%s
log:
  level: warn
  fingerprints: %s/fp.jsonl
limits:
  upstream_conns: 256
%s`, addr, s.certFile, s.keyFile, state, state, s.upstream, state, extra)
	path := filepath.Join(s.dir, name+".yaml")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	return s.start(ctx, name, addr, nil, bin, "run", "-config", path)
}

// need reports the commands missing from PATH, with the Debian package of
// each.
func need() error {
	var missing []string
	for cmd, pkg := range map[string]string{"nginx": "nginx", "wrk": "wrk", "h2load": "nghttp2-client"} {
		if _, err := exec.LookPath(cmd); err != nil {
			missing = append(missing, cmd+" (Debian package "+pkg+")")
		}
	}
	if len(missing) > 0 {
		return errors.New("peers: missing " + strings.Join(missing, ", ") + "; make bench-peers installs them")
	}
	return nil
}

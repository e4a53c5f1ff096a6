package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"html"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/maatproxy/maat/internal/testattack"
	"github.com/maatproxy/maat/internal/testproc"
)

// front is one front in the run: where it listens, how to tell and solve
// its challenges, and its processes (for their CPU time).
type front struct {
	name string
	addr string // host:port of its TLS listener
	host string // the site's name
	// procs are its processes' IDs (nginx's master and workers, Anubis).
	procs func() []int
	stop  func()
	// isChallenge reports whether an answer is a challenge page a browser
	// solves; solve solves it for p.
	isChallenge func(answer) bool
	solve       func(ctx context.Context, p *person, a answer, timeout time.Duration) error
	// mint, if set, mints person p's pass cookie ("name=value") with the
	// front's secret, for the warm-up.
	mint func(p *person) (string, error)
}

// cpu is the CPU time the front's processes have used.
func (f *front) cpu() time.Duration {
	var sum time.Duration
	for _, pid := range f.procs() {
		if c, err := testproc.CPUOf(pid); err == nil {
			sum += c
		}
	}
	return sum
}

// process is a child process whose exit is watched.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{}
	log    string
}

func startProcess(cmd *exec.Cmd, logPath string) (*process, error) {
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, err
	}
	p := &process{cmd: cmd, exited: make(chan struct{}), log: logPath}
	go func() { _ = cmd.Wait(); lf.Close(); close(p.exited) }()
	return p, nil
}

// stop ends the process: SIGTERM, then SIGKILL after 5 s.
func (p *process) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

func (p *process) tail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 1500 {
		b = b[len(b)-1500:]
	}
	return strings.TrimSpace(string(b))
}

// waitFor polls ok every 50 ms until it holds, the process exits, or
// within passes.
func (p *process) waitFor(ctx context.Context, what string, within time.Duration, ok func() bool) error {
	deadline := time.Now().Add(within)
	for !ok() {
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited: %s", what, p.tail())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %v: %s", what, within, p.tail())
		}
	}
	return nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func listening(addr string) func() bool {
	return func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	}
}

// maatConfig is the edge's configuration: one site (localhost) in front of
// the upstream, the built-in default policy, no fingerprint log; extra
// (YAML) is merged over it, map by map, so that -maat-config can set any
// key (challenge.when, limits…).
func maatConfig(dir string, https, admin int, upstream, extra string) ([]byte, error) {
	b, _, _, err := maatConfigPolicy(dir, https, admin, upstream, extra)
	return b, err
}

// maatConfigPolicy is maatConfig, the policy file it names ("" = the
// built-in default), and the admin listener's address (extra may set it,
// e.g. to profile the edge with listen.admin_pprof).
func maatConfigPolicy(dir string, https, admin int, upstream, extra string) ([]byte, string, string, error) {
	base := map[string]any{
		"listen":    map[string]any{"https": fmt.Sprintf("127.0.0.1:%d", https), "http": "", "admin": fmt.Sprintf("127.0.0.1:%d", admin)},
		"tls":       map[string]any{"mode": "self-signed", "cache": filepath.Join(dir, "cache")},
		"challenge": map[string]any{"secret_file": filepath.Join(dir, "secret")},
		"log":       map[string]any{"level": "warn", "fingerprints": ""},
		"policy":    "",
		"sites":     []any{map[string]any{"hosts": []any{"localhost"}, "upstream": upstream, "compress": false}},
	}
	if strings.TrimSpace(extra) != "" {
		var over map[string]any
		if err := yaml.Unmarshal([]byte(extra), &over); err != nil {
			return nil, "", "", fmt.Errorf("-maat-config: %w", err)
		}
		merge(base, over)
	}
	pol, _ := base["policy"].(string)
	adminAddr, _ := base["listen"].(map[string]any)["admin"].(string)
	b, err := yaml.Marshal(base)
	return b, pol, adminAddr, err
}

// merge sets over's keys in base, merging maps key by key.
func merge(base, over map[string]any) {
	for k, v := range over {
		if bm, ok := base[k].(map[string]any); ok {
			if om, ok := v.(map[string]any); ok {
				merge(bm, om)
				continue
			}
		}
		base[k] = v
	}
}

// startMaat starts the edge binary bin in a new directory under dir; with
// mint, people's passes are minted with its secret.
func startMaat(ctx context.Context, bin, dir, upstream, extra string, mint bool) (*front, error) {
	d, err := os.MkdirTemp(dir, "maat-")
	if err != nil {
		return nil, err
	}
	https, err := freePort()
	if err != nil {
		return nil, err
	}
	admin, err := freePort()
	if err != nil {
		return nil, err
	}
	cfg, pol, adminAddr, err := maatConfigPolicy(d, https, admin, upstream, extra)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(d, "edge.yaml"), cfg, 0o600); err != nil {
		return nil, err
	}
	p, err := startProcess(exec.Command(bin, "run", "-config", filepath.Join(d, "edge.yaml")), filepath.Join(d, "edge.log"))
	if err != nil {
		return nil, err
	}
	healthz := "http://" + adminAddr + "/healthz"
	if err := p.waitFor(ctx, "the edge", 30*time.Second, func() bool {
		res, err := http.Get(healthz)
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	}); err != nil {
		p.stop()
		return nil, err
	}
	f := &front{name: "Maat", addr: fmt.Sprintf("127.0.0.1:%d", https), host: "localhost",
		procs: func() []int { return []int{p.cmd.Process.Pid} }, stop: p.stop,
		isChallenge: func(a answer) bool { _, ok := testattack.ParseChallenge(a.body); return ok },
		solve:       solveMaat,
	}
	if mint {
		secret := filepath.Join(d, "secret")
		if s, ok := findKey(extra, "challenge", "secret_file"); ok {
			secret = s
		}
		if f.mint, err = minter(ctx, secret, pol); err != nil {
			p.stop()
			return nil, fmt.Errorf("minting passes: %w", err)
		}
	}
	return f, nil
}

// findKey returns the string at section.key in the YAML text, if any.
func findKey(text, section, key string) (string, bool) {
	var m map[string]map[string]any
	if yaml.Unmarshal([]byte(text), &m) != nil {
		return "", false
	}
	s, ok := m[section][key].(string)
	return s, ok
}

// solveMaat solves the edge's proof of work as the challenge page's
// solver does, and redeems it for the pass cookie.
func solveMaat(ctx context.Context, p *person, a answer, timeout time.Duration) error {
	c, ok := testattack.ParseChallenge(a.body)
	if !ok {
		return errors.New("maat: not a challenge page")
	}
	target, err := c.Solve(ctx, 28)
	if err != nil {
		return err
	}
	r, err := p.get(ctx, target, timeout)
	if err != nil {
		return err
	}
	if r.status != http.StatusSeeOther || len(r.cookies) == 0 {
		return fmt.Errorf("maat: the solution was answered %d without a cookie", r.status)
	}
	return nil
}

// selfSigned writes a certificate and key for localhost into dir.
func selfSigned(dir string) (cert, key string, err error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		DNSNames: []string{"localhost"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		return "", "", err
	}
	kd, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return "", "", err
	}
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return "", "", err
	}
	return cert, key, os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}), 0o600)
}

// nginxConf is nginx in front of backend: TLS and HTTP/2, with a per-IP
// limit_req of rate requests a second (burst as given) when rate > 0.
func nginxConf(d string, port int, cert, key, backend string, rate, burst int, anubis bool) string {
	limit, zone := "", ""
	if rate > 0 {
		zone = fmt.Sprintf("limit_req_zone $binary_remote_addr zone=ip:16m rate=%dr/s;", rate)
		limit = fmt.Sprintf("limit_req zone=ip burst=%d nodelay; limit_req_status 429;", burst)
	}
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;" // its temporary files are in d
	}
	hdrs := ""
	if anubis {
		hdrs = "proxy_set_header X-Real-IP $remote_addr; proxy_set_header X-Forwarded-For $remote_addr; proxy_set_header X-Forwarded-Proto https;"
	}
	return fmt.Sprintf(`%s
worker_processes 2;
daemon off;
pid %s/nginx.pid;
error_log %s/error.log warn;
events { worker_connections 16384; }
http {
  access_log off;
  client_body_temp_path %s/body; proxy_temp_path %s/proxy; fastcgi_temp_path %s/fcgi;
  uwsgi_temp_path %s/uwsgi; scgi_temp_path %s/scgi;
  %s
  upstream site { server %s; keepalive 64; }
  server {
    listen 127.0.0.1:%d ssl http2;
    server_name localhost;
    ssl_certificate %s; ssl_certificate_key %s;
    location / {
      %s
      proxy_pass http://site; proxy_http_version 1.1; proxy_set_header Connection ""; proxy_set_header Host $host;
      %s
      proxy_read_timeout 60s;
    }
  }
}
`, user, d, d, d, d, d, d, d, zone, backend, port, cert, key, limit, hdrs)
}

// startNginx starts nginx (bin) in a new directory under dir, in front of
// backend ("host:port").
func startNginx(ctx context.Context, bin, dir, backend string, rate, burst int, anubis bool) (*front, error) {
	d, err := os.MkdirTemp(dir, "nginx-")
	if err != nil {
		return nil, err
	}
	cert, key, err := selfSigned(d)
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	conf := filepath.Join(d, "nginx.conf")
	if err := os.WriteFile(conf, []byte(nginxConf(d, port, cert, key, backend, rate, burst, anubis)), 0o600); err != nil {
		return nil, err
	}
	p, err := startProcess(exec.Command(bin, "-p", d, "-c", conf), filepath.Join(d, "stderr.log"))
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	if err := p.waitFor(ctx, "nginx", 20*time.Second, listening(addr)); err != nil {
		p.stop()
		return nil, err
	}
	pid := p.cmd.Process.Pid
	name := fmt.Sprintf("nginx, limit_req %d r/s per IP", rate)
	return &front{name: name, addr: addr, host: "localhost",
		procs: func() []int { return append([]int{pid}, testproc.Children(pid)...) }, stop: p.stop,
		isChallenge: func(answer) bool { return false },
		solve:       func(context.Context, *person, answer, time.Duration) error { return nil },
	}, nil
}

// startAnubis starts Anubis (bin) in front of upstream, with its default
// policy and difficulty, and nginx (nginxBin) in front of it for TLS, as
// Anubis's documentation deploys it.
func startAnubis(ctx context.Context, bin, nginxBin, dir, upstream string, difficulty int) (*front, error) {
	d, err := os.MkdirTemp(dir, "anubis-")
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	metrics, err := freePort()
	if err != nil {
		return nil, err
	}
	var keyb [32]byte
	_, _ = rand.Read(keyb[:])
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "BIND="+addr, "BIND_NETWORK=tcp", "TARGET="+upstream,
		"METRICS_BIND="+fmt.Sprintf("127.0.0.1:%d", metrics), "METRICS_BIND_NETWORK=tcp",
		"DIFFICULTY="+strconv.Itoa(difficulty), "ED25519_PRIVATE_KEY_HEX="+hex.EncodeToString(keyb[:]),
		"SERVE_ROBOTS_TXT=false", "SLOG_LEVEL=ERROR")
	p, err := startProcess(cmd, filepath.Join(d, "anubis.log"))
	if err != nil {
		return nil, err
	}
	if err := p.waitFor(ctx, "Anubis", 30*time.Second, listening(addr)); err != nil {
		p.stop()
		return nil, err
	}
	ng, err := startNginx(ctx, nginxBin, d, addr, 0, 0, true)
	if err != nil {
		p.stop()
		return nil, err
	}
	apid := p.cmd.Process.Pid
	ng.name = "Anubis behind nginx"
	nprocs, nstop := ng.procs, ng.stop
	ng.procs = func() []int { return append(nprocs(), apid) }
	ng.stop = func() { nstop(); p.stop() }
	ng.isChallenge = func(a answer) bool { return strings.Contains(a.body, `id="anubis_challenge"`) }
	ng.solve = solveAnubis
	return ng, nil
}

var anubisChallenge = regexp.MustCompile(`(?s)<script id="anubis_challenge" type="application/json">(.*?)</script>`)

// solveAnubis solves Anubis's proof of work ("fast": SHA-256 of the
// random data and a decimal nonce, whose hex begins with difficulty
// zeros) as its page's script does, and redeems it.
func solveAnubis(ctx context.Context, p *person, a answer, timeout time.Duration) error {
	m := anubisChallenge.FindStringSubmatch(a.body)
	if m == nil {
		return errors.New("anubis: no challenge in the page")
	}
	var c struct {
		Rules struct {
			Difficulty int `json:"difficulty"`
		} `json:"rules"`
		Challenge struct {
			ID         string `json:"id"`
			RandomData string `json:"randomData"`
		} `json:"challenge"`
	}
	if err := json.Unmarshal([]byte(html.UnescapeString(m[1])), &c); err != nil {
		return fmt.Errorf("anubis: the challenge: %w", err)
	}
	if c.Rules.Difficulty > 7 {
		return fmt.Errorf("anubis: difficulty %d, more than a harness spends", c.Rules.Difficulty)
	}
	zeros := strings.Repeat("0", c.Rules.Difficulty)
	var nonce int
	var sum string
	for nonce = 0; ; nonce++ {
		h := sha256.Sum256([]byte(c.Challenge.RandomData + strconv.Itoa(nonce)))
		if sum = hex.EncodeToString(h[:]); strings.HasPrefix(sum, zeros) {
			break
		}
		if nonce&0xffff == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
	}
	q := url.Values{"id": {c.Challenge.ID}, "response": {sum}, "nonce": {strconv.Itoa(nonce)},
		"redir": {"/p/solved"}, "elapsedTime": {"200"}}
	r, err := p.get(ctx, "/.within.website/x/cmd/anubis/api/pass-challenge?"+q.Encode(), timeout)
	if err != nil {
		return err
	}
	if r.status/100 != 3 {
		return fmt.Errorf("anubis: the solution was answered %d: %.200s", r.status, r.body)
	}
	return nil
}

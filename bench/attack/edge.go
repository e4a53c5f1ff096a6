package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/maatproxy/maat/internal/testattack"
	"golang.org/x/crypto/bcrypt"
)

// buildEdge returns the edge binary to attack: -bin, or ./cmd/edge of -src
// built into dir.
func buildEdge(ctx context.Context, o options, dir string, stderr io.Writer) (string, error) {
	if o.bin != "" {
		return filepath.Abs(o.bin)
	}
	bin := filepath.Join(dir, "edge")
	fmt.Fprintf(stderr, "building %s/cmd/edge …\n", o.src)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/edge")
	cmd.Dir = o.src
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/edge in %s: %w", o.src, err)
	}
	return bin, nil
}

// edgeProc is one edge process, serving one site in front of an upstream.
type edgeProc struct {
	cmd    *exec.Cmd
	exited chan struct{}
	dir    string // its configuration, certificate cache and log
	https  string // host:port, TCP and UDP
	admin  string // host:port
	http   string // host:port of the port-80 listener, if its configuration has one
	tls    *tls.Config
	log    *os.File
}

// authPath is the site's path behind basic auth, for
// testattack.AuthUser with authPassword.
const (
	authPath     = "/admin/"
	authPassword = "correct horse battery staple"
)

// edgeConfig is the edge's configuration: one site, its upstream, a route
// behind basic auth, HTTP/3, the admin listener; the limits are the
// edge's defaults unless extra sets them. It says nothing an edge from
// before the bounds would not read.
func edgeConfig(https, admin int, dir, upstream, authHash, extra string) string {
	return fmt.Sprintf(`listen: { https: "127.0.0.1:%d", http: "", admin: "127.0.0.1:%d" }
tls: { mode: self-signed, cache: %q }
challenge: { secret_file: %q }
log: { level: warn, fingerprints: "" }
policy: ""
sites:
  - hosts: [localhost]
    upstream: %s
    compress: false
    routes:
      - { path: %s, upstream: %s, basic_auth: { users: { %s: %q } } }
%s
`, https, admin, filepath.Join(dir, "cache"), filepath.Join(dir, "secret"), upstream,
		authPath, upstream, testattack.AuthUser, authHash, extra)
}

// startEdge writes a configuration into a new directory under dir and
// starts bin on it, and returns once its admin listener says it is healthy.
func startEdge(ctx context.Context, o options, bin, dir, upstream string, stderr io.Writer) (*edgeProc, error) {
	return launchEdge(ctx, o, bin, dir, stderr, func(d string, p ports, hash string) (string, error) {
		return edgeConfig(p.https, p.admin, d, upstream, hash, o.extra), nil
	})
}

// ports are an edge's listeners' ports.
type ports struct{ https, admin, http int }

// launchEdge starts bin in a new directory d under dir, on the
// configuration write returns for d, free ports and the bcrypt hash of
// authPassword, and returns once its admin listener says it is healthy.
func launchEdge(ctx context.Context, o options, bin, dir string, stderr io.Writer,
	write func(d string, p ports, authHash string) (string, error)) (*edgeProc, error) {
	d, err := os.MkdirTemp(dir, "edge-")
	if err != nil {
		return nil, err
	}
	var p ports
	if p.https, err = freePort(true); err != nil {
		return nil, err
	}
	if p.admin, err = freePort(false); err != nil {
		return nil, err
	}
	if p.http, err = freePort(false); err != nil {
		return nil, err
	}
	// At bcrypt's default cost, as htpasswd -B and most tools write it.
	hash, err := bcrypt.GenerateFromPassword([]byte(authPassword), bcrypt.DefaultCost)
	if err != nil {
		return nil, err
	}
	text, err := write(d, p, string(hash))
	if err != nil {
		return nil, err
	}
	cfg := filepath.Join(d, "edge.yaml")
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(d, "edge.log"))
	if err != nil {
		return nil, err
	}
	e := &edgeProc{exited: make(chan struct{}), dir: d, log: logf,
		https: fmt.Sprintf("127.0.0.1:%d", p.https), admin: fmt.Sprintf("127.0.0.1:%d", p.admin),
		http: fmt.Sprintf("127.0.0.1:%d", p.http)}
	e.cmd = exec.Command(bin, "run", "-config", cfg)
	e.cmd.Stdout, e.cmd.Stderr = logf, logf
	if o.verbose {
		e.cmd.Stdout, e.cmd.Stderr = io.MultiWriter(logf, stderr), io.MultiWriter(logf, stderr)
	}
	if err := e.cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	go func() { _ = e.cmd.Wait(); close(e.exited) }() // e.stop waits for it
	if err := e.waitHealthy(ctx, 30*time.Second); err != nil {
		e.stop()
		return nil, err
	}
	roots := x509.NewCertPool()
	if pem, err := os.ReadFile(filepath.Join(d, "cache", "maat-local-ca.pem")); err == nil && roots.AppendCertsFromPEM(pem) {
		e.tls = &tls.Config{RootCAs: roots, ServerName: "localhost"}
	} else {
		// An edge that keeps its local CA elsewhere: this is loopback.
		e.tls = &tls.Config{InsecureSkipVerify: true, ServerName: "localhost"}
	}
	return e, nil
}

func (e *edgeProc) waitHealthy(ctx context.Context, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+e.admin+"/healthz", nil)
		if res, err := http.DefaultClient.Do(req); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-e.exited:
			return fmt.Errorf("the edge exited: %s", e.logTail())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the edge was not healthy after %v: %s", within, e.logTail())
		}
	}
}

// stop ends the edge: SIGTERM, and SIGKILL if it has not exited after 3 s.
func (e *edgeProc) stop() {
	_ = e.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-e.exited:
	case <-time.After(3 * time.Second):
		_ = e.cmd.Process.Kill()
		<-e.exited
	}
	e.log.Close()
}

// logTail is the end of the edge's log.
func (e *edgeProc) logTail() string {
	b, _ := os.ReadFile(e.log.Name())
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// freePort returns a loopback TCP port that is free, and free on UDP too
// if udp.
func freePort(udp bool) (int, error) {
	for range 20 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ok := true
		if udp {
			u, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
			if err != nil {
				ok = false
			} else {
				u.Close()
			}
		}
		ln.Close()
		if ok {
			return port, nil
		}
	}
	return 0, errors.New("no free port")
}

// procStats reads the process's resident memory (VmRSS) and CPU time
// (user and system) from /proc.
func procStats(pid int) (rss int64, cpu time.Duration, err error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			rss = kb << 10
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// The fields after the command name, which is in parentheses and may
	// hold spaces: state is field 3, utime 14, stime 15.
	_, rest, ok := bytes.Cut(stat, []byte(") "))
	f := strings.Fields(string(rest))
	if !ok || len(f) < 13 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: unexpected %q", pid, stat)
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	const ticks = 100 // USER_HZ, sysconf(_SC_CLK_TCK) on Linux
	return rss, time.Duration(utime+stime) * time.Second / ticks, nil
}

package main

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as the edge binary: with EDGE_TEST_MAIN=1 it runs
// main, so the signal tests drive a real process without a separate build.
func TestMain(m *testing.M) {
	if os.Getenv("EDGE_TEST_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// lockedBuffer is a process's standard error, read by the test while the
// process writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type proc struct {
	cmd    *exec.Cmd
	stderr *lockedBuffer
	done   chan error
}

// waitLog polls the process's log for a JSON line with msg and returns it.
func (p *proc) waitLog(t *testing.T, msg string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for _, line := range strings.Split(p.stderr.String(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == msg {
				return m
			}
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("the edge exited (%v) before logging %s:\n%s", err, msg, p.stderr)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("no %s in the log:\n%s", msg, p.stderr)
	return nil
}

func startEdgeProcess(t *testing.T, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "EDGE_TEST_MAIN=1")
	p := &proc{cmd: cmd, stderr: &lockedBuffer{}, done: make(chan error, 1)}
	cmd.Stderr = p.stderr
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	return p
}

func insecureClient() *http.Client {
	return &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true}}
}

func fetch(c *http.Client, url string) (int, string, error) {
	req, _ := http.NewRequest("GET", url, nil)
	req.Host = "site.test"
	res, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header.Get("X-Upstream") + string(b), nil
}

// slowUpstream answers /slow only when release is closed.
func slowUpstream(t *testing.T, name string, release <-chan struct{}, entered chan<- struct{}) *httptest.Server {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Upstream", name)
		if r.URL.Path == "/slow" {
			entered <- struct{}{}
			<-release
		}
		fmt.Fprint(w, " ok")
	}))
	t.Cleanup(up.Close)
	return up
}

func writeConfig(t *testing.T, path, https, admin, up, route string) {
	t.Helper()
	cfg := fmt.Sprintf(`listen: { https: %q, http: "", admin: %q, http3: false }
tls: { mode: self-signed, cache: "" }
timeouts: { drain: 10s }
sites:
  - hosts: [site.test]
    upstream: %s
    routes: [{ path: /r/, upstream: %s }]
`, https, admin, up, route)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestReloadAndDrainBySignal(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	entered := make(chan struct{}, 4)
	a := slowUpstream(t, "a", release, entered)
	b := slowUpstream(t, "b", release, entered)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "edge.yaml")
	// Port 0: the edge says in its log where it listens.
	writeConfig(t, cfgPath, "127.0.0.1:0", "127.0.0.1:0", a.URL, a.URL)
	p := startEdgeProcess(t, "run", "-config", cfgPath)
	https, _ := p.waitLog(t, "listening")["https"].(string)
	c := insecureClient()
	base := "https://" + https

	if _, who, err := fetch(c, base+"/r/x"); err != nil || !strings.HasPrefix(who, "a") {
		t.Fatalf("before reload /r/ → %q, %v", who, err)
	}
	// An in-flight request across the reload.
	inflight := make(chan string, 1)
	go func() {
		code, who, err := fetch(c, base+"/slow")
		inflight <- fmt.Sprint(code, who, err)
	}()
	<-entered

	writeConfig(t, cfgPath, "127.0.0.1:0", "127.0.0.1:0", a.URL, b.URL)
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	switched := false
	for i := 0; i < 100 && !switched; i++ {
		_, who, err := fetch(c, base+"/r/x")
		switched = err == nil && strings.HasPrefix(who, "b")
		time.Sleep(20 * time.Millisecond)
	}
	if !switched {
		t.Fatalf("SIGHUP did not apply the new route; stderr:\n%s", p.stderr)
	}
	// A broken file on SIGHUP keeps the running configuration.
	if err := os.WriteFile(cfgPath, []byte("sites: [{hosts: [x], upstream: ftp://nope, bogus: 1}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Process.Signal(syscall.SIGHUP)
	p.waitLog(t, "reload_failed")
	if _, who, err := fetch(c, base+"/r/x"); err != nil || !strings.HasPrefix(who, "b") {
		t.Fatalf("after a bad reload /r/ → %q, %v", who, err)
	}

	// SIGTERM: stop accepting, let the in-flight request finish, exit 0.
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	refused := false
	for i := 0; i < 100 && !refused; i++ {
		conn, err := net.DialTimeout("tcp", https, 200*time.Millisecond)
		if err != nil {
			refused = true
			break
		}
		conn.Close()
		time.Sleep(20 * time.Millisecond)
	}
	if !refused {
		t.Error("still accepting connections after SIGTERM")
	}
	select {
	case err := <-p.done:
		t.Fatalf("exited before the in-flight request finished: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if got := <-inflight; got != "200a ok<nil>" {
		t.Errorf("in-flight request across reload and SIGTERM: %q", got)
	}
	select {
	case err := <-p.done:
		if err != nil {
			t.Errorf("exit after drain: %v; stderr:\n%s", err, p.stderr)
		}
		p.done <- nil // for Cleanup
	case <-time.After(10 * time.Second):
		t.Fatal("did not exit after draining")
	}
}

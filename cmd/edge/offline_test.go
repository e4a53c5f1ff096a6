package main

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// connRecorder is a loopback listener that counts the connections made to
// it and closes each at once.
type connRecorder struct {
	ln      net.Listener
	mu      sync.Mutex
	from    []string // the client address of each connection, in the order accepted
	probes  int      // how many of them others made
	changed *sync.Cond
}

func newConnRecorder(t *testing.T) *connRecorder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &connRecorder{ln: ln}
	r.changed = sync.NewCond(&r.mu)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			from := c.RemoteAddr().String()
			c.Close()
			r.mu.Lock()
			r.from = append(r.from, from)
			r.changed.Broadcast()
			r.mu.Unlock()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return r
}

func (r *connRecorder) addr() string { return r.ln.Addr().String() }

// others returns how many connections were made to r, but its own probes:
// it connects once itself and waits until the listener has accepted that
// connection, so that every earlier one (queued before it) is counted.
func (r *connRecorder) others(t *testing.T) int {
	t.Helper()
	c, err := net.DialTimeout("tcp", r.addr(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	probe := c.LocalAddr().String()
	c.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	for !slices.Contains(r.from, probe) {
		r.changed.Wait()
	}
	r.probes++
	return slices.Index(r.from, probe) + 1 - r.probes
}

// TestConfigCheckOffline: `edge config check -offline` on a configuration
// whose Redis, ACME directory and upstream are listeners that record
// connections exits 0, lists what it skipped, and makes no connection to
// any of them; without -offline the same check reaches Redis and the ACME
// directory, and warns that neither answers as such.
func TestConfigCheckOffline(t *testing.T) {
	t.Parallel()
	redis, acmeDir, upstream := newConnRecorder(t), newConnRecorder(t), newConnRecorder(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "edge.yaml")
	text := `listen: { https: "127.0.0.1:0", http: "127.0.0.1:0", admin: "localhost:0" }
tls: { mode: acme, cache: ` + filepath.Join(dir, "state") + `, acme: { email: ops@example.org, directory: "http://` + acmeDir.addr() + `/dir" } }
store: { kind: redis, url: "redis://` + redis.addr() + `/0" }
challenge: { secret_file: ` + filepath.Join(dir, "state", "secret") + ` }
log: { fingerprints: "" }
sites: [{ hosts: [a.example], upstream: "http://` + upstream.addr() + `" }]
`
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := edgeRun(t, "", "config", "check", "-offline", cfg)
	if code != 0 {
		t.Fatalf("config check -offline: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"skipped:\n", "store.url: Redis at " + redis.addr() + " is not pinged",
		"tls.acme.directory: the ACME directory http://" + acmeDir.addr() + "/dir is not fetched",
		`listen.admin: the host name "localhost" is not looked up (DNS)`, cfg + ": ok"} {
		if !strings.Contains(out, want) {
			t.Errorf("config check -offline says:\n%s\nwithout %q", out, want)
		}
	}
	if errOut != "" {
		t.Errorf("config check -offline warns: %s", errOut)
	}
	for name, r := range map[string]*connRecorder{"redis": redis, "acme": acmeDir, "upstream": upstream} {
		if n := r.others(t); n != 0 {
			t.Errorf("config check -offline connected %d times to the %s listener", n, name)
		}
	}

	out, errOut, code = edgeRun(t, "", "config", "check", cfg)
	if code != 0 || strings.Contains(out, "skipped:") {
		t.Fatalf("config check: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"edge: warning: store.url: Redis does not answer", "edge: warning: tls.acme.directory: the ACME directory http://" + acmeDir.addr() + "/dir does not answer"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("config check warns:\n%s\nwithout %q", errOut, want)
		}
	}
	if redis.others(t) == 0 || acmeDir.others(t) == 0 {
		t.Error("config check reached neither Redis nor the ACME directory")
	}
}

package main

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
)

// TestHealth: edge health exits 0 with the running edge's readiness, and
// 1 with a clear message where no admin listener answers.
func TestHealth(t *testing.T) {
	t.Parallel()
	up := slowUpstream(t, "a", nil, nil)
	dir := t.TempDir()
	cfg := writeFile(t, dir, "edge.yaml", fmt.Sprintf(`listen: { https: "127.0.0.1:0", http: "", admin: "127.0.0.1:0", http3: false }
tls: { mode: self-signed, cache: %q }
log: { fingerprints: off }
sites:
  - hosts: [site.test]
    upstream: %s
`, filepath.Join(dir, "state"), up.URL))
	p := startEdgeProcess(t, "run", cfg)
	admin, _ := p.waitLog(t, "listening")["admin"].(string)
	if admin == "" {
		t.Fatalf("no admin address logged: %s", p.stderr)
	}
	out, errOut, code := edgeRun(t, "", "health", "-addr", admin)
	if code != 0 || !strings.Contains(out, "site.test") && !strings.Contains(strings.ToLower(out), "ready") {
		t.Errorf("health of a running edge: exit %d, %q %q", code, out, errOut)
	}
	p.stop(t)

	l, err := net.Listen("tcp", "127.0.0.1:0") // a free port, closed: nobody answers
	if err != nil {
		t.Fatal(err)
	}
	free := l.Addr().String()
	l.Close()
	out, errOut, code = edgeRun(t, "", "health", "-addr", free)
	if code != 1 || !strings.Contains(errOut, "does not answer") {
		t.Errorf("health with nothing listening: exit %d, %q %q", code, out, errOut)
	}
}

package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/maatproxy/maat/internal/testenv"
)

// TestTrust: after the edge's first start, edge trust prints the local CA
// that the edge's certificate chains to; -install -root puts it into a
// system tree with the real update-ca-certificates; without root,
// -install is refused politely; before any start there is no CA to print.
func TestTrust(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	up := slowUpstream(t, "a", nil, nil)
	cfg := writeFile(t, dir, "edge.yaml", fmt.Sprintf(`listen: { https: "127.0.0.1:0", http: "", admin: "", http3: false }
tls: { mode: self-signed, cache: %q }
log: { fingerprints: off }
sites: [{ hosts: [site.test], upstream: %s }]
`, filepath.Join(dir, "state"), up.URL))

	_, errOut, code := edgeRun(t, "", "trust", cfg)
	if code != 1 || !strings.Contains(errOut, "edge: no local CA in "+filepath.Join(dir, "state")+" yet: start the edge once") {
		t.Errorf("before the first start: exit %d, %s", code, errOut)
	}

	p := startEdgeProcess(t, "run", cfg)
	https, _ := p.waitLog(t, "listening")["https"].(string)
	pem, errOut, code := edgeRun(t, "", "trust", cfg)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(pem)) {
		t.Fatalf("not PEM: %q", pem)
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", https,
		&tls.Config{RootCAs: roots, ServerName: "site.test"})
	if err != nil {
		t.Fatalf("the edge's certificate does not verify with the printed CA: %v", err)
	}
	conn.Close()
	p.stop(t)

	t.Run("install into a tree", func(t *testing.T) {
		t.Parallel()
		testenv.NeedCommand(t, "update-ca-certificates")
		testenv.NeedCommand(t, "openssl")
		root := t.TempDir()
		out, errOut, code := edgeRun(t, "", "trust", "-install", "-root", root, cfg)
		if code != 0 || !strings.Contains(out, "ran update-ca-certificates") {
			t.Fatalf("exit %d: %s %s", code, out, errOut)
		}
		bundle, err := os.ReadFile(filepath.Join(root, "etc/ssl/certs/ca-certificates.crt"))
		if err != nil || !strings.Contains(string(bundle), strings.TrimSpace(pem)) {
			t.Errorf("the bundle lacks the CA (%v):\n%s", err, bundle)
		}
	})
	t.Run("install without root", func(t *testing.T) {
		t.Parallel()
		cmd := exec.Command(os.Args[0], "trust", "-install", cfg)
		cmd.Env = append(os.Environ(), "EDGE_TEST_MAIN=1")
		if os.Geteuid() == 0 {
			// As nobody, who may not even read the test's files: the
			// refusal must come first.
			asNobody(t, cmd)
		}
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "edge: installing a CA into the system's store needs root: run sudo edge trust -install") {
			t.Errorf("%v: %s", err, out)
		}
	})
}

// asNobody makes cmd run the test binary as user nobody, from a
// directory nobody may read (the test binary's own directory is closed to
// other users), and returns that directory.
func asNobody(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "edge-nobody-") // not t.TempDir: its parent is closed to others
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "edge")
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd.Path, cmd.Args[0] = exe, exe
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	return dir
}

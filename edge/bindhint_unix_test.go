//go:build unix

package edge

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestBindPrivilegedPortHint binds port 80 as the Server does, without
// the privilege to: the error carries the hint. Run as root, the test runs
// itself again as the user nobody (from a copy of its binary nobody may
// execute).
func TestBindPrivilegedPortHint(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:80")
	if err == nil {
		ln.Close()
		if os.Geteuid() != 0 || os.Getenv("EDGE_TEST_BIND_CHILD") != "" {
			t.Skip("this process may bind port 80 (CAP_NET_BIND_SERVICE or ip_unprivileged_port_start); TestBindHint covers the hint")
		}
		asNobody(t, "TestBindPrivilegedPortHint")
		return
	}
	if !errors.Is(err, syscall.EACCES) {
		t.Skipf("port 80 is not refused for want of a privilege: %v", err)
	}
	s := &Server{}
	_, err = s.listenTCP("127.0.0.1:80")
	if !errors.Is(err, syscall.EACCES) || !strings.Contains(err.Error(), "AmbientCapabilities=CAP_NET_BIND_SERVICE") {
		t.Errorf("listen 127.0.0.1:80: %v, want EACCES with the hint", err)
	}
}

// asNobody runs the test named run again in a process of the user nobody
// (uid and gid 65534), and fails if it fails or skips.
func asNobody(t *testing.T, run string) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "edge.test")
	data, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) { // t.TempDir makes them 0700
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, "-test.run=^"+run+"$", "-test.v")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "EDGE_TEST_BIND_CHILD=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+run) {
		t.Errorf("as nobody: %v\n%s", err, out)
	}
}

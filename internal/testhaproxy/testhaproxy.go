// Package testhaproxy runs real HAProxy (Debian's haproxy package) in TCP
// mode on loopback for tests: the L4 balancer that sends the PROXY
// protocol (https://www.haproxy.org/download/2.6/doc/proxy-protocol.txt)
// in front of what a test serves.
//
// Tests that use it need the program (internal/testenv.NeedCommand: skipped
// without it, failed with CI=true); `make test` installs it.
package testhaproxy

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maatproxy/maat/internal/testenv"
)

// Config is what a test chooses of HAProxy's configuration: one TCP
// frontend that passes every connection to one backend.
type Config struct {
	// Frontend holds more lines of the frontend section (unique-id-format,
	// …).
	Frontend []string
	// Backend holds the lines of the backend section: balance, options and
	// the servers ("server s1 127.0.0.1:8443 send-proxy-v2 check").
	Backend []string
}

// Start runs HAProxy with cfg until the test ends and returns the
// frontend's address, where clients connect. The frontend's socket is made
// here and handed to HAProxy as fd 3, so there is no port to race for; it
// listens on 127.0.0.1 and accepts connections from any loopback address.
func Start(t testing.TB, cfg Config) net.Addr {
	t.Helper()
	bin := testenv.NeedCommand(t, "haproxy")
	front, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { front.Close() })
	frontFile, err := front.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { frontFile.Close() })
	text := fmt.Sprintf(`global
    maxconn 256
defaults
    mode tcp
    timeout connect 5s
    timeout client 30s
    timeout server 30s
frontend fe
    bind fd@3
%s    default_backend be
backend be
%s`, indent(cfg.Frontend), indent(cfg.Backend))
	path := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer // read after Wait
	cmd := exec.Command(bin, "-db", "-f", path)
	cmd.ExtraFiles = []*os.File{frontFile}
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("haproxy.cfg:\n%s\nhaproxy said:\n%s", text, out.String())
		}
	})
	return front.Addr()
}

func indent(lines []string) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString("    ")
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}

package edge

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/maatproxy/maat/internal/testenv"
	"github.com/maatproxy/maat/internal/testnet"
)

// TestUnknownSNI: a TLS hello whose server name no site serves is refused
// in the handshake with the alert unrecognized_name (RFC 6066, section 3),
// not internal_error, and shows no certificate; the log says why. A
// request whose Host no site serves, over a connection opened for a site's
// name, is answered 421. As docs/configuration.md says (sites).
func TestUnknownSNI(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	e := startEdgeLog(t, "policy: \"\"\nsites: [{hosts: [localhost, a.test], upstream: "+echoUpstream(t, "a").URL+"}]\n", &logs)
	addr := e.Addrs().HTTPS

	// crypto/tls's client reports a received alert by its text only (an
	// unexported type): "internal error" before, "unrecognized name" now.
	_, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "unknown.test", RootCAs: e.roots})
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "remote error" || oe.Err.Error() != "tls: unrecognized name" {
		t.Errorf("handshake for unknown.test: %v; want the alert unrecognized_name", err)
	}
	// The edge logs after it sent the alert, which the client may read
	// first: wait for the line.
	if !testnet.WaitFor(t, 10*time.Second, func() bool {
		l := logs.String()
		return strings.Contains(l, "refused with the TLS alert unrecognized_name") && strings.Contains(l, "sni=unknown.test")
	}) {
		t.Errorf("the log does not say why:\n%s", logs.String())
	}
	c, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "a.test", RootCAs: e.roots})
	if err != nil {
		t.Fatalf("handshake for a.test: %v", err)
	}
	c.Close()

	// A real client: curl, by name with --resolve.
	curl := testenv.NeedCommand(t, "curl")
	_, port, _ := net.SplitHostPort(addr)
	run := func(name string, args ...string) (string, int) {
		cmd := exec.Command(curl, append([]string{"-sS", "-k", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "20",
			"--resolve", name + ":" + port + ":127.0.0.1", "https://" + name + ":" + port + "/"}, args...)...)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		return string(out), code
	}
	if out, code := run("unknown.test"); code != 35 || !strings.Contains(strings.ToLower(out), "unrecognized name") {
		t.Errorf("curl https://unknown.test: exit %d, %q; want exit 35 (TLS handshake) and the alert unrecognized name", code, out)
	}
	if out, code := run("a.test", "-H", "Host: other.test"); code != 0 || !strings.HasSuffix(out, fmt.Sprint(http.StatusMisdirectedRequest)) {
		t.Errorf("curl https://a.test with Host other.test: exit %d, %q; want 421", code, out)
	}
	if out, code := run("a.test"); code != 0 || !strings.HasSuffix(out, "200") {
		t.Errorf("curl https://a.test: exit %d, %q; want 200", code, out)
	}
}

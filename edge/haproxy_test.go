package edge

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maatproxy/maat/internal/testclient"
	"github.com/maatproxy/maat/internal/testhaproxy"
)

// TestHAProxyInFront puts real HAProxy in TCP mode, with send-proxy-v2 and
// health checks that send the PROXY header too, in front of two edges
// (listen.proxy_protocol: true, trusted_proxies: [127.0.0.1/32]), as the
// README's "Several nodes" configures them. A client connects to HAProxy
// from its own loopback address, 127.0.0.5: whichever edge serves it logs
// that address and the JA4 of the ClientHello the client sent, which
// HAProxy passed on untouched, and tells the upstream the address.
func TestHAProxyInFront(t *testing.T) {
	t.Parallel()
	const client = "127.0.0.5"
	up := newRawUpstream(t)
	roots := x509.NewCertPool()
	var servers []string
	fps := map[string]string{} // edge's address → its fingerprint log
	for i := range 2 {
		fp := filepath.Join(t.TempDir(), "fp.jsonl")
		e := startEdgeListen(t, "proxy_protocol: true, http3: false",
			"trusted_proxies: [127.0.0.1/32]\nlog: {fingerprints: "+fp+"}\nsites: [{hosts: [localhost], upstream: "+up.URL+"}]\n", io.Discard)
		roots.AppendCertsFromPEM(e.certs.RootPEM()) // each node has its own self-signed CA
		servers = append(servers, fmt.Sprintf("server edge%d %s send-proxy-v2 check inter 500ms check-send-proxy", i, e.Addrs().HTTPS))
		fps[e.Addrs().HTTPS] = fp
	}
	front := testhaproxy.Start(t, testhaproxy.Config{Backend: append([]string{"balance roundrobin"}, servers...)})

	served := map[string]int{}
	for i := range 4 {
		path := fmt.Sprintf("/through-haproxy/%d", i)
		hello := getThrough(t, front.String(), client, roots, path)
		var line fpLine
		var by string
		if !waitFor(t, 10*time.Second, func() bool {
			for addr, fp := range fps {
				for _, l := range fpLines(t, fp) {
					if l.str("path") == path {
						line, by = l, addr
						return true
					}
				}
			}
			return false
		}) {
			t.Fatalf("no edge logged %s", path)
		}
		served[by]++
		if got := line.str("remote_ip"); got != client {
			t.Errorf("%s: the edge at %s logged remote_ip %q, want the client's %s", path, by, got, client)
		}
		checkJA4(t, line, hello)
	}
	if len(served) != 2 {
		t.Errorf("requests served per edge: %v; want HAProxy to use both", served)
	}
	for _, h := range up.heads() {
		if !strings.Contains(h, "X-Real-Ip: "+client+"\r\n") {
			t.Errorf("the upstream was not told the client's address:\n%s", h)
		}
	}
}

// getThrough sends a GET for path through the balancer at front, from the
// loopback address local, and returns the bytes the client wrote first:
// its ClientHello records, for the test to fingerprint.
func getThrough(t *testing.T, front, local string, roots *x509.CertPool, path string) []byte {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 10 * time.Second}
	raw, err := d.Dial("tcp", front)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.SetDeadline(time.Now().Add(20 * time.Second))
	rec := testclient.NewRecorder(raw, 1<<17)
	c := tls.Client(rec, &tls.Config{RootCAs: roots, ServerName: "localhost", NextProtos: []string{"http/1.1"}})
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: localhost\r\nUser-Agent: Go-http-client/1.1\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatalf("%s through HAProxy: %v", path, err)
	}
	res, err := http.ReadResponse(bufioReader(c), nil)
	if err != nil {
		t.Fatalf("%s through HAProxy: %v", path, err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("%s through HAProxy: %d", path, res.StatusCode)
	}
	return rec.Written()
}

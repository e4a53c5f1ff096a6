package edge

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// The HTTP/2 path rests on these behaviours (server_tcp.go, serveH2),
// each pinned here or beside:
//   - x/net's ServeConn serves HTTP/2 on the tapped TLS connection and sets
//     Request.TLS from its ConnectionState, so the handler sees a TLS
//     request (scheme, X-Forwarded-Proto, the JA4 under the tap);
//   - it does not speak HTTP/1 on that connection;
//   - the HTTP/1 server does not take an h2c preface on a TLS connection
//     that negotiated http/1.1;
//   - a SETTINGS_HEADER_TABLE_SIZE mid-connection leaves every header
//     block whole (TestH2HeaderTableSizeMidConnection), which Go 1.26's
//     net/http server does not.

// TestH2Served: a request over ALPN h2 is served as HTTP/2, with
// the connection's TLS state, JA4 and HTTP/2 fingerprint.
func TestH2Served(t *testing.T) {
	t.Parallel()
	up := echoUpstream(t, "site")
	fp := filepath.Join(t.TempDir(), "fp.jsonl")
	e := startEdge(t, "policy: \"\"\nlog: {fingerprints: "+fp+"}\nsites: [{hosts: [localhost], upstream: "+up.URL+"}]\n")
	req, _ := http.NewRequest("GET", e.url("/pin"), nil)
	req.Host = "localhost"
	req.Header.Set("User-Agent", "Go-http-client/1.1")
	res, err := e.client(t, "h2").Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.ProtoMajor != 2 || res.StatusCode != 200 {
		t.Fatalf("got %s %d, want HTTP/2 200:\n%s", res.Proto, res.StatusCode, body)
	}
	for _, want := range []string{"X-Forwarded-Proto=https\n", "Path=/pin\n"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("upstream saw no %q:\n%s", want, body)
		}
	}
	if !strings.Contains(string(body), "X-Maat-Ja4=t13") {
		t.Errorf("upstream got no JA4 of a TCP TLS 1.3 client:\n%s", body)
	}
	var rec struct {
		Proto string `json:"proto"`
		JA4   string `json:"ja4"`
		H2FP  string `json:"h2fp"`
		HFP   string `json:"hfp"`
		TLS   string `json:"tls_version"`
	}
	if !waitFor(t, 20*time.Second, func() bool {
		b, _ := os.ReadFile(fp)
		line, _, _ := strings.Cut(string(b), "\n")
		return line != "" && json.Unmarshal([]byte(line), &rec) == nil
	}) {
		t.Fatal("no fingerprint log line")
	}
	if rec.Proto != "HTTP/2.0" || rec.JA4 == "" || rec.H2FP == "" || !strings.HasPrefix(rec.HFP, "h2") || rec.TLS == "" {
		t.Errorf("log line %+v: want HTTP/2.0 with ja4, h2fp, an h2 hfp and the TLS version", rec)
	}
}

// TestH2ConnRefusesHTTP1: a connection that negotiated h2 and sends an
// HTTP/1.1 request gets no HTTP/1 answer.
func TestH2ConnRefusesHTTP1(t *testing.T) {
	t.Parallel()
	up := echoUpstream(t, "site")
	e := startEdge(t, "policy: \"\"\nsites: [{hosts: [localhost], upstream: "+up.URL+"}]\n")
	c, err := tls.Dial("tcp", e.Addrs().HTTPS, e.tlsConfig("h2"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(c)
	if strings.Contains(string(got), "HTTP/1.") {
		t.Fatalf("an h2 connection answered HTTP/1: %q", got)
	}
}

// TestH1RefusesH2CPreface: on a connection that negotiated http/1.1 (or
// nothing), the HTTP/2 preface is not taken up: h2c is refused on TLS.
func TestH1RefusesH2CPreface(t *testing.T) {
	t.Parallel()
	up := echoUpstream(t, "site")
	e := startEdge(t, "policy: \"\"\nsites: [{hosts: [localhost], upstream: "+up.URL+"}]\n")
	for _, alpn := range [][]string{{"http/1.1"}, nil} {
		c, err := tls.Dial("tcp", e.Addrs().HTTPS, e.tlsConfig(alpn...))
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
			t.Fatal(err)
		}
		fr := http2.NewFramer(io.Discard, bufio.NewReader(c))
		if f, err := fr.ReadFrame(); err == nil && f.Header().Type == http2.FrameSettings {
			t.Errorf("ALPN %q: the preface was answered with HTTP/2 SETTINGS", alpn)
		}
		c.Close()
	}
}

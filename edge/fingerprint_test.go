package edge

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"golang.org/x/net/http2"

	"github.com/maatproxy/maat/internal/testclient"
	"github.com/maatproxy/maat/internal/testenv"
	"github.com/maatproxy/maat/tlsfp"
)

// fpLine is a fingerprint log line as other tools read it.
type fpLine map[string]any

func (l fpLine) str(k string) string { s, _ := l[k].(string); return s }

// waitLine polls the fingerprint log for the line of path.
func waitLine(t *testing.T, file, path string) fpLine {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		f, err := os.Open(file)
		if err == nil {
			sc := bufio.NewScanner(f)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				var l fpLine
				if json.Unmarshal(sc.Bytes(), &l) == nil && l.str("path") == path {
					f.Close()
					return l
				}
			}
			f.Close()
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no fingerprint log line for %s", path)
	return nil
}

// relay forwards loopback connections to the edge and records what each
// client sent first: the ClientHello records as they left the client.
type relay struct {
	ln   net.Listener
	mu   sync.Mutex
	seen [][]byte
}

func newRelay(t *testing.T, target string) *relay {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go r.forward(c, target)
		}
	}()
	return r
}

func (r *relay) forward(c net.Conn, target string) {
	defer c.Close()
	u, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer u.Close()
	rec := testclient.NewRecorder(u, 1<<17)
	go func() { _, _ = io.Copy(c, u); c.Close() }()
	_, _ = io.Copy(rec, c)
	r.mu.Lock()
	r.seen = append(r.seen, rec.Written())
	r.mu.Unlock()
}

// last returns the records of the most recent finished connection.
func (r *relay) last(t *testing.T) []byte {
	t.Helper()
	for range 100 {
		r.mu.Lock()
		n := len(r.seen)
		var b []byte
		if n > 0 {
			b = r.seen[n-1]
			r.seen = nil
		}
		r.mu.Unlock()
		if b != nil {
			return b
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("relay saw no connection")
	return nil
}

func checkJA4(t *testing.T, line fpLine, hello []byte) *tlsfp.Fingerprint {
	t.Helper()
	h, err := tlsfp.ParseRecords(hello)
	if err != nil {
		t.Fatalf("client-side hello does not parse: %v", err)
	}
	want := h.Fingerprint(false)
	for k, v := range map[string]string{"ja4": want.JA4, "ja4_r": want.JA4R, "ja4_o": want.JA4O, "ja4_ro": want.JA4RO} {
		if got := line.str(k); got != v {
			t.Errorf("logged %s = %q, client-side hello gives %q", k, got, v)
		}
	}
	return want
}

func startLoggingEdge(t *testing.T, upstream string) (*testEdge, string) {
	t.Helper()
	fp := filepath.Join(t.TempDir(), "fp.jsonl")
	e := startEdge(t, "log: {fingerprints: "+fp+"}\nsites: [{hosts: [localhost], upstream: "+upstream+"}]\n")
	return e, fp
}

func TestJA4EndToEnd(t *testing.T) {
	t.Parallel()
	up := echoUpstream(t, "a")
	e, fpFile := startLoggingEdge(t, up.URL)
	rl := newRelay(t, e.Addrs().HTTPS)
	_, rport, _ := net.SplitHostPort(rl.ln.Addr().String())

	t.Run("curl", func(t *testing.T) {
		curl := testenv.NeedCommand(t, "curl")
		for _, v := range []string{"--http1.1", "--http2"} {
			path := "/ja4/curl" + strings.TrimPrefix(v, "--http")
			out, err := exec.Command(curl, "-sk", v, "--max-time", "10", "-o", "/dev/null",
				"https://localhost:"+rport+path).CombinedOutput()
			if err != nil {
				t.Fatalf("curl %s: %v %s", v, err, out)
			}
			line := waitLine(t, fpFile, path)
			checkJA4(t, line, rl.last(t))
			// curl as it comes (ALPN h2 and http/1.1) is in the known-client table.
			if f := line.str("client_family"); v == "--http2" && f != "curl" {
				t.Errorf("curl's JA4 %s is family %q, want curl", line.str("ja4"), f)
			}
		}
	})
	t.Run("go", func(t *testing.T) {
		// A stock Go client: ALPN h2 and http/1.1, Go's default hello.
		tr := &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: e.roots, ServerName: "localhost"},
			ForceAttemptHTTP2: true,
			DisableKeepAlives: true,
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return net.Dial("tcp", rl.ln.Addr().String())
			},
		}
		res, _ := get(t, &http.Client{Transport: tr}, e.url("/ja4/go"))
		if res.StatusCode == 0 {
			t.Fatal("no response")
		}
		line := waitLine(t, fpFile, "/ja4/go")
		checkJA4(t, line, rl.last(t))
		if f := line.str("client_family"); f != "go" {
			t.Errorf("Go's client is family %q, want go", f)
		}
	})
	for _, p := range testclient.Parrots() {
		if p.Name != "HelloChrome_133" && p.Name != "HelloFirefox_120" && p.Name != "HelloSafari_16_0" && p.Name != "HelloIOS_14" {
			continue
		}
		t.Run(p.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			conn, rec, err := testclient.Dial(ctx, e.Addrs().HTTPS, p.ID, "localhost")
			if err != nil {
				t.Fatalf("handshake: %v", err)
			}
			defer conn.Close()
			path := "/ja4/" + p.Name
			req, _ := http.NewRequest("GET", "https://localhost"+path, nil)
			var res *http.Response
			if conn.ConnectionState().NegotiatedProtocol == "h2" {
				// x/net's deprecated client: net/http's own speaks HTTP/2
				// over TLS only on a crypto/tls *tls.Conn, not utls's.
				//lint:ignore SA1019 a utls connection is not a *tls.Conn
				cc, err := (&http2.Transport{}).NewClientConn(conn)
				if err != nil {
					t.Fatal(err)
				}
				res, err = cc.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
			} else {
				if err := req.Write(conn); err != nil {
					t.Fatal(err)
				}
				if res, err = http.ReadResponse(bufio.NewReader(conn), req); err != nil {
					t.Fatal(err)
				}
			}
			res.Body.Close()
			line := waitLine(t, fpFile, path)
			checkJA4(t, line, rec.Hello())
			if p.Family == "chrome" && line.str("client_family") != "chrome" {
				t.Errorf("the utls Chrome parrot is family %q, want chrome", line.str("client_family"))
			}
		})
	}
	t.Run("h3", func(t *testing.T) {
		// What tlsfp computes from quic-go's hello, seen by a plain quic-go
		// server, must be what the edge logged for the same client.
		var seen *tlsfp.Fingerprint
		var mu sync.Mutex
		srvTLS := e.certs.TLSConfig().Clone()
		srvTLS.NextProtos = []string{http3.NextProtoH3}
		srvTLS.GetConfigForClient = func(chi *tls.ClientHelloInfo) (*tls.Config, error) {
			fp, err := tlsfp.FromClientHelloInfo(chi, true)
			mu.Lock()
			seen = fp
			mu.Unlock()
			return nil, err
		}
		ln, err := quic.ListenAddr("127.0.0.1:0", srvTLS, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			c, err := ln.Accept(context.Background())
			if err == nil {
				_ = c.CloseWithError(0, "")
			}
		}()
		cliTLS := e.tlsConfig()
		cliTLS.NextProtos = []string{http3.NextProtoH3}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if c, err := quic.DialAddr(ctx, ln.Addr().String(), cliTLS, nil); err == nil {
			_ = c.CloseWithError(0, "")
		}
		get(t, e.client(t, "h3"), e.url("/ja4/h3"))
		line := waitLine(t, fpFile, "/ja4/h3")
		mu.Lock()
		defer mu.Unlock()
		if seen == nil || !strings.HasPrefix(line.str("ja4"), "q") || line.str("ja4") != seen.JA4 || line.str("ja4_o") != seen.JA4O {
			t.Errorf("HTTP/3 JA4 logged %q/%q, computed from the same client's hello %+v", line.str("ja4"), line.str("ja4_o"), seen)
		}
		if line.str("proto") != "HTTP/3.0" {
			t.Errorf("proto %q", line.str("proto"))
		}
	})
}

package edge

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/quic-go/http3"

	"github.com/maatproxy/maat/internal/testclient"
	"github.com/maatproxy/maat/internal/testenv"
	"github.com/maatproxy/maat/tlsfp"
)

// firstHelloJA4 is the JA4 of the first ClientHello dial sends to a loopback
// TLS server behind tlsfp's listener: what a client's full handshake
// shows, before any session to resume.
func firstHelloJA4(t *testing.T, dial func(addr string)) string {
	t.Helper()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := tlsfp.NewListener(tcp, tlsfp.Config{})
	defer ln.Close()
	conf, err := testclient.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- ""
			return
		}
		defer c.Close()
		tc := tls.Server(c, conf)
		_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
		_ = tc.Handshake()
		ja4 := ""
		if fp := tlsfp.ConnOf(c).Fingerprint(); fp != nil {
			ja4 = fp.JA4
		}
		got <- ja4
	}()
	dial(tcp.Addr().String())
	ja4 := <-got
	if ja4 == "" {
		t.Fatal("no fingerprint of the client's first hello")
	}
	return ja4
}

// resumePolicy allows the JA4s of the clients' full handshakes, counts
// /rate/ in one bucket per JA4 (a burst of two) and denies the rest: a
// client judged by another JA4 when it resumes its session is denied, and
// a RATE bucket split by resumption lets a third request through.
func resumePolicy(ja4s ...string) string {
	return `bots:
  - name: by-ja4
    path_regex: ^/rate/
    action: RATE
    rate: { key: ja4, per_second: 0.001, burst: 2 }
  - name: known
    ja4: ["` + strings.Join(ja4s, `", "`) + `"]
    action: ALLOW
  - { name: others, path_regex: ".", action: DENY }
`
}

// TestResumedSessionSameDecisions: real clients that resume their TLS
// session (curl in one process, Go with a ClientSessionCache, over TCP and
// QUIC) send a ClientHello with pre_shared_key, whose JA4 (FoxIO's, as
// logged) is not their full handshake's. The policy judges every
// connection of a session by the full handshake's JA4: the allow rule
// written for it holds on resumed connections, and a RATE bucket keyed by
// JA4 is not split.
func TestResumedSessionSameDecisions(t *testing.T) {
	t.Parallel()
	curl := testenv.NeedCommand(t, "curl")
	goConf := func() *tls.Config {
		return &tls.Config{InsecureSkipVerify: true, ServerName: "localhost", NextProtos: []string{"http/1.1"},
			ClientSessionCache: tls.NewLRUClientSessionCache(4)}
	}
	curlJA4 := firstHelloJA4(t, func(addr string) {
		_, port, _ := net.SplitHostPort(addr)
		_ = exec.Command(curl, "-sk", "--http1.1", "--max-time", "10", "--resolve", "localhost:"+port+":127.0.0.1",
			"https://localhost:"+port+"/").Run()
	})
	goJA4 := firstHelloJA4(t, func(addr string) {
		if c, err := tls.Dial("tcp", addr, goConf()); err == nil {
			c.Close()
		}
	})
	// The decisions are the same with the tickets' JA4 and without
	// (fingerprints.ticket_ja4: the standard path is crypto/tls's tickets).
	for _, tickets := range []bool{true, false} {
		t.Run(fmt.Sprintf("ticket_ja4 %t", tickets), func(t *testing.T) {
			t.Parallel()
			resumedSameDecisions(t, curl, tickets, curlJA4, goJA4, goConf)
		})
	}
}

func resumedSameDecisions(t *testing.T, curl string, tickets bool, curlJA4, goJA4 string, goConf func() *tls.Config) {
	up := newCountingUpstream(t)
	fpFile := filepath.Join(t.TempDir(), "fp.jsonl")
	e := startEdge(t, fmt.Sprintf("log: {fingerprints: %s}\nfingerprints: {ticket_ja4: %t}\npolicy: %s\nsites: [{hosts: [localhost], upstream: %s}]\n",
		fpFile, tickets, writePolicy(t, "resume.yaml", resumePolicy(curlJA4, goJA4)), up.URL))
	port := port(e.Addrs().HTTPS)

	// curl in one process, each request on a connection of its own
	// (Connection: close), resuming the session of the first.
	curlGet := func(t *testing.T, paths ...string) []int {
		args := []string{"-sk", "--http1.1", "--max-time", "10", "-H", "Connection: close",
			"--resolve", "localhost:" + port + ":127.0.0.1", "-w", "%{http_code} %{num_connects}\n"}
		for _, p := range paths {
			args = append(args, "-o", "/dev/null", "https://localhost:"+port+p)
		}
		out, err := exec.Command(curl, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("curl: %v %s", err, out)
		}
		var codes []int
		for l := range strings.Lines(string(out)) {
			var code, conns int
			if _, err := fmt.Sscan(l, &code, &conns); err != nil {
				t.Fatalf("curl output %q: %v", out, err)
			}
			if conns != 1 {
				t.Fatalf("curl reused a connection: %q", out)
			}
			codes = append(codes, code)
		}
		return codes
	}
	// Go's client with a session cache, a connection per request.
	goGet := func(t *testing.T, proto string, paths ...string) []int {
		conf := goConf()
		var codes []int
		for _, p := range paths {
			var rt http.RoundTripper
			if proto == "h3" {
				tr := &http3.Transport{TLSClientConfig: conf}
				defer tr.Close()
				rt = tr
			} else {
				rt = &http.Transport{TLSClientConfig: conf, DisableKeepAlives: true}
			}
			resp, err := (&http.Client{Transport: rt, Timeout: 10 * time.Second}).Get("https://localhost:" + port + p)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if tr, ok := rt.(*http3.Transport); ok {
				_ = tr.Close()
			}
			codes = append(codes, resp.StatusCode)
		}
		return codes
	}
	for _, tt := range []struct {
		name  string
		get   func(t *testing.T, paths ...string) []int
		known string // the JA4 of its full handshake, which the policy allows; "": QUIC, not in the policy
	}{
		{"curl", curlGet, curlJA4},
		{"go", func(t *testing.T, paths ...string) []int { return goGet(t, "h1", paths...) }, goJA4},
		{"go h3", func(t *testing.T, paths ...string) []int { return goGet(t, "h3", paths...) }, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// Not parallel: one RATE bucket per client's JA4 here.
			base := "/" + strings.ReplaceAll(tt.name, " ", "-")
			if got := tt.get(t, base+"/a", base+"/b", base+"/c"); tt.known != "" && fmt.Sprint(got) != "[200 200 200]" {
				t.Errorf("known client, three connections of one session: %v, want [200 200 200]", got)
			}
			if got := tt.get(t, "/rate"+base+"/a", "/rate"+base+"/b", "/rate"+base+"/c"); fmt.Sprint(got) != "[200 200 429]" {
				t.Errorf("RATE by ja4 with a burst of two, three connections of one session: %v, want [200 200 429]", got)
			}
			first := waitLine(t, fpFile, base+"/a")
			if tt.known != "" && first.str("ja4") != tt.known {
				t.Errorf("full handshake logged with ja4 %s, want %s", first.str("ja4"), tt.known)
			}
			if _, ok := first["resumed"]; ok || first.str("ja4_session") != "" {
				t.Errorf("full handshake logged with resumed %v, ja4_session %q", first["resumed"], first.str("ja4_session"))
			}
			for _, p := range []string{"/b", "/c"} {
				l := waitLine(t, fpFile, base+p)
				if l.str("ja4") == first.str("ja4") || !strings.HasPrefix(l.str("ja4"), first.str("ja4")[:4]) {
					t.Errorf("%s: resumed connection logged with ja4 %s; want FoxIO's of its own hello, not the full handshake's %s",
						base+p, l.str("ja4"), first.str("ja4"))
				}
				if l["resumed"] != true || l.str("ja4_session") != first.str("ja4") {
					t.Errorf("%s: logged resumed %v, ja4_session %q; want true and the full handshake's %s",
						base+p, l["resumed"], l.str("ja4_session"), first.str("ja4"))
				}
			}
		})
	}
}

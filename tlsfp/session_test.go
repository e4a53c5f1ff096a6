package tlsfp

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os/exec"
	"testing"
	"time"

	utls "github.com/refraction-networking/utls"

	"github.com/maatproxy/maat/internal/testenv"
)

// seenConn is what a session server saw of one connection.
type seenConn struct {
	fp      *Fingerprint
	resumed bool
	err     error
}

// startSessionServer runs a crypto/tls server behind NewListener on
// loopback, with SessionConfig for each connection if tickets is set (else
// base as it is), answering one HTTP/1.1 request per connection with a page
// that loads two more, and closing the connection after it.
func startSessionServer(t *testing.T, base *tls.Config, tickets bool) (string, <-chan seenConn) {
	t.Helper()
	out := make(chan seenConn, 16)
	addr := acceptLoopback(t, func(raw net.Conn) {
		conf := base
		if tickets {
			conf = SessionConfig(base, ConnOf(raw))
		}
		tc := tls.Server(raw, conf)
		_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
		err := tc.Handshake()
		if err == nil {
			br := bufio.NewReader(tc)
			for {
				l, err := br.ReadString('\n')
				if err != nil || l == "\r\n" {
					break
				}
			}
			body := "<html><body><script src=/s.js></script><img src=/i.png></body></html>"
			fmt.Fprintf(tc, "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
		}
		out <- seenConn{fp: ConnOf(raw).Fingerprint(), resumed: tc.ConnectionState().DidResume, err: err}
	})
	return addr, out
}

// goGet sends one request on a connection of its own with a Go TLS client
// and reads the answer to the end, session tickets included.
func goGet(t *testing.T, addr string, conf *tls.Config) {
	t.Helper()
	c, err := tls.Dial("tcp", addr, conf)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	readAnswer(t, c)
}

func readAnswer(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	for {
		if _, err := c.Read(buf); err != nil {
			return
		}
	}
}

// utlsGet is goGet with a utls parrot.
func utlsGet(t *testing.T, addr string, conf *utls.Config, id utls.ClientHelloID) {
	t.Helper()
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	c := utls.UClient(raw, conf, id)
	if err := c.HandshakeContext(t.Context()); err != nil {
		t.Fatal(err)
	}
	readAnswer(t, c)
}

// resumingClient is a real client that resumes its TLS 1.3 session on
// its next connections to the same server: run makes three connections.
type resumingClient struct {
	name   string
	family string // the known-client family of its full handshake
	run    func(t *testing.T, addr string)
}

func resumingClients() []resumingClient {
	type client = resumingClient
	cs := []client{
		{"curl", "curl", func(t *testing.T, addr string) {
			curl := testenv.NeedCommand(t, "curl")
			_, port, _ := net.SplitHostPort(addr)
			u := "https://localhost:" + port
			out, err := exec.Command(curl, "-sk", "--http1.1", "--max-time", "10", "--resolve", "localhost:"+port+":127.0.0.1",
				u+"/a", u+"/b", u+"/c").CombinedOutput()
			if err != nil {
				t.Fatalf("curl: %v %s", err, out)
			}
		}},
		{"go ClientSessionCache", "go", func(t *testing.T, addr string) {
			conf := &tls.Config{InsecureSkipVerify: true, ServerName: "localhost", NextProtos: []string{"http/1.1"},
				ClientSessionCache: tls.NewLRUClientSessionCache(4)}
			for range 3 {
				goGet(t, addr, conf)
			}
		}},
		{"chromium", "chrome", func(t *testing.T, addr string) {
			chromium := testenv.NeedCommand(t, "chromium")
			_, port, _ := net.SplitHostPort(addr)
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			// The page loads two more resources; the server closes every
			// connection after one answer, so each comes on a new one.
			out, err := exec.CommandContext(ctx, chromium, "--disable-http2", "--headless", "--no-sandbox", "--disable-gpu",
				"--no-first-run", "--ignore-certificate-errors", "--disable-background-networking",
				"--disable-component-update", "--disable-sync", "--user-data-dir="+t.TempDir(), "--dump-dom",
				"https://localhost:"+port+"/").CombinedOutput()
			if err != nil {
				t.Fatalf("chromium: %v %s", err, out)
			}
		}},
	}
	for _, id := range []utls.ClientHelloID{utls.HelloChrome_100_PSK, utls.HelloChrome_112_PSK_Shuf,
		utls.HelloChrome_114_Padding_PSK_Shuf, utls.HelloChrome_115_PQ_PSK} {
		cs = append(cs, client{"utls " + id.Str(), "chrome", func(t *testing.T, addr string) {
			conf := &utls.Config{InsecureSkipVerify: true, ServerName: "localhost",
				ClientSessionCache: utls.NewLRUClientSessionCache(4), OmitEmptyPsk: true}
			for range 3 {
				utlsGet(t, addr, conf, id)
			}
		}})
	}
	return cs
}

// TestResumingClients: real clients resume their TLS 1.3 session with a
// hello that carries pre_shared_key, whose JA4 (FoxIO's) is not their full
// handshake's. JA4Session and Client are the full handshake's, with
// tickets that carry the JA4 (SessionConfig) and without (from the hello,
// leaving pre_shared_key and early_data out); and the handshakes are the
// same either way (a differential of SessionConfig against crypto/tls's
// own tickets: each connection completes, the same ones resume).
func TestResumingClients(t *testing.T) {
	t.Parallel()
	base := serverConfig(t)
	for _, c := range resumingClients() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var resumed [2][]bool
			for i, tickets := range []bool{false, true} {
				addr, out := startSessionServer(t, base, tickets)
				c.run(t, addr)
				var conns []seenConn
				for range 3 {
					select {
					case s := <-out:
						conns = append(conns, s)
					case <-time.After(30 * time.Second): // bounds a hang only
						t.Fatalf("tickets %t: %d connections, want 3", tickets, len(conns))
					}
				}
				// The first full handshake (Chromium may open two
				// connections before it has a ticket).
				var full seenConn
				for _, s := range conns {
					if !s.resumed && s.err == nil {
						full = s
						break
					}
				}
				if full.fp == nil {
					t.Fatalf("tickets %t: no full handshake", tickets)
				}
				if full.fp.Client.Family != c.family {
					t.Errorf("full handshake %s: known client %+v, want family %s", full.fp.JA4, full.fp.Client, c.family)
				}
				for j, s := range conns {
					resumed[i] = append(resumed[i], s.resumed)
					if s.err != nil {
						t.Fatalf("tickets %t, connection %d: %v", tickets, j, s.err)
					}
					if !s.resumed {
						continue
					}
					if !s.fp.Resumption || s.fp.JA4 == full.fp.JA4 {
						t.Errorf("tickets %t, connection %d resumed: Resumption %t, JA4 %s (the full handshake's: %s); want pre_shared_key counted",
							tickets, j, s.fp.Resumption, s.fp.JA4, full.fp.JA4)
					}
					if s.fp.JA4Session != full.fp.JA4 || s.fp.Client != full.fp.Client {
						t.Errorf("tickets %t, connection %d resumed: JA4Session %s %+v, want the full handshake's %s %+v",
							tickets, j, s.fp.JA4Session, s.fp.Client, full.fp.JA4, full.fp.Client)
					}
				}
				if !conns[1].resumed && !conns[2].resumed {
					t.Errorf("tickets %t: no connection resumed", tickets)
				}
			}
			if fmt.Sprint(resumed[0]) != fmt.Sprint(resumed[1]) {
				t.Errorf("resumed connections with crypto/tls's tickets %v, with SessionConfig's %v", resumed[0], resumed[1])
			}
		})
	}
}

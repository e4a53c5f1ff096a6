package edge

// The parking of idle HTTP/1.1 connections through a running edge: what
// only the Server's wiring of edge/internal/park shows (the package's own
// tests hold the rest).

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/maatproxy/maat/edge/config"
	"github.com/maatproxy/maat/edge/internal/park"
	"github.com/maatproxy/maat/httpfp"
)

// parkEdge starts an edge whose idle HTTP/1 connections park after
// 50 ms, waiting on goroutines when noPoll, in front of an upstream that
// answers with the fingerprints the edge sent it.
func parkEdge(t *testing.T, extra string, noPoll bool) *testEdge {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s ja4=%s hfp=%s", r.URL.Path, r.Header.Get("X-Maat-Ja4"), r.Header.Get("X-Maat-Hfp"))
	}))
	t.Cleanup(up.Close)
	cfg, err := config.Parse("test.yaml", []byte(edgeConfigText("", extra+
		"policy: \"\"\nsites: [{hosts: [localhost], upstream: "+up.URL+", compress: false}]\n")))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Limits.ParkAfter = config.Duration(50 * time.Millisecond)
	cfg.Demo = true // the fingerprints sent upstream
	return startEdgeHooks(t, cfg, testHooks{parkNoPoll: noPoll}, io.Discard)
}

// h1Requested opens an HTTP/1.1 connection to e, makes a request on it,
// and returns the connection with the answer's body.
func h1Requested(t *testing.T, e *testEdge) (*tls.Conn, *bufio.Reader, string) {
	t.Helper()
	c, err := tls.Dial("tcp", e.Addrs().HTTPS, e.tlsConfig("http/1.1"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(c)
	return c, br, h1Get(t, c, br, "/x")
}

// h1Get sends a GET of path on c and returns the body of its answer, a 200.
func h1Get(t *testing.T, c *tls.Conn, br *bufio.Reader, path string) string {
	t.Helper()
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: localhost\r\nUser-Agent: Go-http-client/1.1\r\n\r\n", path)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("%s: %d %q, %v", path, res.StatusCode, body, err)
	}
	return string(body)
}

func waitParked(t *testing.T, e *testEdge, n int64) {
	t.Helper()
	if !waitFor(t, 10*time.Second, func() bool { return e.Server.park.Parked() == n }) {
		t.Fatalf("parked connections: %d, want %d", e.Server.park.Parked(), n)
	}
}

// TestParkedKeepsFingerprints: a request on a connection that parked and
// woke carries the connection's fingerprints upstream as the first
// request did: the TLS hello's (JA4) and the header tap's.
func TestParkedKeepsFingerprints(t *testing.T) {
	t.Parallel()
	e := parkEdge(t, "", false)
	c, br, first := h1Requested(t, e)
	if !strings.HasPrefix(first, "/x ja4=t13") || strings.HasSuffix(first, "hfp=") {
		t.Fatalf("the first request's fingerprints upstream: %q", first)
	}
	waitParked(t, e, 1)
	if again := h1Get(t, c, br, "/x"); again != first {
		t.Fatalf("after parking, the fingerprints upstream: %q, want %q", again, first)
	}
}

// TestParkedCountsAgainstClient: a parked connection still counts against
// limits.conns_per_client, so parking is no way around the cap.
func TestParkedCountsAgainstClient(t *testing.T) {
	t.Parallel()
	e := parkEdge(t, "limits: {conns_per_client: 2}\n", false)
	for range 2 {
		h1Requested(t, e)
	}
	waitParked(t, e, 2)
	c, err := tls.Dial("tcp", e.Addrs().HTTPS, e.tlsConfig("http/1.1"))
	if err == nil {
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "GET /x HTTP/1.1\r\nHost: localhost\r\nUser-Agent: Go-http-client/1.1\r\n\r\n")
		_, err = c.Read(make([]byte, 1))
	}
	if err == nil || !strings.Contains(err.Error(), "EOF") && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("a third connection past conns_per_client 2: %v, want it hung up on", err)
	}
}

// TestServerShutdownClosesParked: the Server's Shutdown closes parked
// connections at once, as net/http closes idle ones, and does not wait
// for them until it times out.
func TestServerShutdownClosesParked(t *testing.T) {
	t.Parallel()
	for _, noPoll := range []bool{false, true} {
		t.Run(map[bool]string{false: "poller", true: "goroutines"}[noPoll], func(t *testing.T) {
			t.Parallel()
			e := parkEdge(t, "", noPoll)
			_, br, _ := h1Requested(t, e)
			waitParked(t, e, 1)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := e.Server.Shutdown(ctx); err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
			if _, err := br.ReadByte(); err != io.EOF {
				t.Fatalf("the parked connection after Shutdown: read %v, want EOF", err)
			}
		})
	}
}

// TestReloadParkAfter: limits.park_after follows a reload, as every limit
// does: after a reload to 0s, a connection goes to net/http unwrapped, and
// after one back to 50ms, a connection parks.
func TestReloadParkAfter(t *testing.T) {
	t.Parallel()
	e := parkEdge(t, "", false)
	cfg := e.Server.base
	cfg.Limits.ParkAfter = 0
	if err := e.Server.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if c, ok := e.Server.park.Wrap(httpfp.NewConn(a, httpfp.H1, httpfp.Config{})).(*park.Conn); ok {
		t.Fatalf("after a reload to park_after 0s, a connection is wrapped to park: %T", c)
	}
	cfg.Limits.ParkAfter = config.Duration(50 * time.Millisecond)
	if err := e.Server.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	h1Requested(t, e)
	waitParked(t, e, 1)
}

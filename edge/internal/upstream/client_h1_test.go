package upstream

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/maatproxy/maat/internal/testnet"
)

const okAnswer = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"

// smuggled is an answer an upstream sends past the one asked for: it must
// never reach the client of the next request.
const smuggled = "HTTP/1.1 200 OK\r\nContent-Length: 8\r\nX-Smuggled: yes\r\n\r\nsmuggled"

const getReq = "GET /%d HTTP/1.1\r\nHost: localhost\r\nUser-Agent: curl/8.5.0\r\n\r\n"

// newTestTransport returns a Transport with the edge's default bounds, o's
// where set, closed when t ends.
func newTestTransport(t *testing.T, o Options) *Transport {
	t.Helper()
	if o.Conns == 0 {
		o.Conns = 32
	}
	if o.Streams == 0 {
		o.Streams = 1024
	}
	if o.Queue == 0 {
		o.Queue = 10 * time.Second
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = 5 * time.Second
	}
	if o.FailPause == 0 {
		o.FailPause = 10 * time.Second
	}
	tr := New(o)
	t.Cleanup(tr.Close)
	return tr
}

// newTestPool returns tr's pool of the upstream URLs us.
func newTestPool(t *testing.T, tr *Transport, us ...string) *Pool {
	t.Helper()
	urls := make([]*url.URL, len(us))
	for i, s := range us {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		urls[i] = u
	}
	return tr.NewPool(urls)
}

// exchange sends the request raw to pool through tr, as the edge does a
// common exchange (CommonRequest, Pick), within ctx.
func exchange(t *testing.T, ctx context.Context, tr *Transport, pool *Pool, raw string) (*http.Response, error) {
	t.Helper()
	in, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
	if err != nil {
		t.Fatal(err)
	}
	route := &Route{Pool: pool, Client: netip.MustParseAddr("192.0.2.1")}
	in = in.WithContext(WithRoute(ctx, route))
	if !Common(in, pool) {
		t.Fatalf("not a common exchange:\n%s", raw)
	}
	out := new(http.Request)
	CommonRequest(out, in)
	out.URL = route.Pick(in.URL, time.Now())
	return tr.RoundTrip(out)
}

// get is exchange of raw, whose answer must come: its status and body.
func get(t *testing.T, tr *Transport, pool *Pool, raw string) (*http.Response, string) {
	t.Helper()
	res, err := exchange(t, context.Background(), tr, pool, raw)
	if err != nil {
		t.Fatalf("%q: %v", raw, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%q: body: %v", raw, err)
	}
	return res, string(b)
}

// TestClientFraming: answers an upstream frames wrongly or oddly, through
// the own client. Each case sends two requests: the first meets the odd
// answer; the second must get its own, never bytes left over from the
// first (response splitting, desync).
func TestClientFraming(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		first  testnet.Answer
		fails  bool   // the first exchange fails (the edge's 502)
		body   string // of the first answer, when it does not fail
		header string // a field of the first answer ("K: v"), or ""
		gone   string // a field that must be gone once RemoveHopHeaders ran
		conns  int64  // connections the upstream sees for both requests
	}{
		{name: "plain", first: testnet.Answer{Raw: okAnswer}, body: "ok", conns: 1},
		{name: "TE and CL both: chunked wins, connection not trusted again",
			first: testnet.Answer{Raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n3\r\nabc\r\n0\r\n\r\n" + smuggled},
			body:  "abc", conns: 2},
		{name: "body longer than its Content-Length",
			first: testnet.Answer{Raw: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" + smuggled},
			body:  "ok", conns: 2},
		{name: "two Content-Lengths that differ",
			first: testnet.Answer{Raw: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 10\r\n\r\nok" + smuggled},
			fails: true, conns: 2},
		{name: "unknown transfer coding",
			first: testnet.Answer{Raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"},
			fails: true, conns: 2},
		{name: "obs-fold is folded into one line",
			first: testnet.Answer{Raw: "HTTP/1.1 200 OK\r\nX-Folded: a\r\n b\r\nContent-Length: 2\r\n\r\nok"},
			body:  "ok", header: "X-Folded: a b", conns: 1},
		{name: "bare LF line ends",
			first: testnet.Answer{Raw: "HTTP/1.1 200 OK\nContent-Length: 2\n\nok"},
			body:  "ok", conns: 1},
		{name: "header larger than the bound",
			first: testnet.Answer{Raw: "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("a", maxHeaderBytes+10) + "\r\nContent-Length: 2\r\n\r\nok"},
			fails: true, conns: 2},
		{name: "Connection names a hop-by-hop header",
			first: testnet.Answer{Raw: "HTTP/1.1 200 OK\r\nConnection: X-Hop\r\nX-Hop: secret\r\nX-Kept: yes\r\nContent-Length: 2\r\n\r\nok"},
			body:  "ok", header: "X-Kept: yes", gone: "X-Hop", conns: 1},
		{name: "Connection: close is honoured",
			first: testnet.Answer{Raw: "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"},
			body:  "ok", conns: 2},
		{name: "body to the end of the connection",
			first: testnet.Answer{Raw: "HTTP/1.1 200 OK\r\n\r\nuntil close", HangUp: true},
			body:  "until close", conns: 2},
		{name: "HTTP/1.0 answer without keep-alive",
			first: testnet.Answer{Raw: "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"},
			body:  "ok", conns: 2},
		{name: "switching protocols unasked",
			first: testnet.Answer{Raw: "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n"},
			fails: true, conns: 2},
		{name: "too many 1xx",
			first: testnet.Answer{Raw: strings.Repeat("HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n", 7) + okAnswer},
			fails: true, conns: 2},
		{name: "trailers pass",
			first: testnet.Answer{Raw: "HTTP/1.1 200 OK\r\nTrailer: X-Sum\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-Sum: 42\r\n\r\n"},
			body:  "ok", header: "X-Sum: 42", conns: 1},
		{name: "closed without an answer",
			first: testnet.Answer{HangUp: true},
			fails: true, conns: 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			up := testnet.NewScripted(t, func(n int, _ string) testnet.Answer {
				if n == 0 {
					return tt.first
				}
				return testnet.Answer{Raw: okAnswer}
			}, nil)
			tr := newTestTransport(t, Options{})
			pool := newTestPool(t, tr, up.URL)
			res, err := exchange(t, context.Background(), tr, pool, fmt.Sprintf(getReq, 1))
			if tt.fails {
				if err == nil {
					res.Body.Close()
					t.Fatalf("first: %d, want the exchange to fail", res.StatusCode)
				}
			} else {
				if err != nil {
					t.Fatalf("first: %v", err)
				}
				b, err := io.ReadAll(res.Body)
				res.Body.Close()
				if err != nil || res.StatusCode != 200 || string(b) != tt.body {
					t.Errorf("first: %d %q (%v), want 200 %q", res.StatusCode, b, err, tt.body)
				}
				RemoveHopHeaders(res.Header)
				if tt.header != "" {
					k, v, _ := strings.Cut(tt.header, ": ")
					if got := res.Header.Get(k) + res.Trailer.Get(k); got != v {
						t.Errorf("%s: %q, want %q", k, got, v)
					}
				}
				if tt.gone != "" && res.Header.Get(tt.gone) != "" {
					t.Errorf("%s is left", tt.gone)
				}
			}
			res, body := get(t, tr, pool, fmt.Sprintf(getReq, 2))
			if res.StatusCode != 200 || body != "ok" || res.Header.Get("X-Smuggled") != "" {
				t.Errorf("second: %d %q %v: not its own answer", res.StatusCode, body, res.Header)
			}
			if n := up.Conns(); n != tt.conns {
				t.Errorf("the upstream saw %d connections, want %d", n, tt.conns)
			}
		})
	}
}

// TestClientLateBytesNotReadAsAnswer: bytes an upstream sends after its
// answer, while the connection is idle, are never read as the answer to
// the next request; the connection is dropped.
func TestClientLateBytesNotReadAsAnswer(t *testing.T) {
	t.Parallel()
	late := make(chan struct{})
	up := testnet.NewScripted(t, func(n int, _ string) testnet.Answer {
		if n == 0 {
			return testnet.Answer{Raw: okAnswer, Late: smuggled}
		}
		return testnet.Answer{Raw: "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecond"}
	}, late)
	tr := newTestTransport(t, Options{})
	pool := newTestPool(t, tr, up.URL)
	if res, body := get(t, tr, pool, fmt.Sprintf(getReq, 1)); res.StatusCode != 200 || body != "ok" {
		t.Fatalf("first: %d %q", res.StatusCode, body)
	}
	close(late)
	// The late bytes are on their way; once the idle connection holds
	// them, a request must not take it.
	if !testnet.WaitFor(t, 5*time.Second, func() bool { return idleHolds(tr, up.URL) }) {
		t.Fatal("the late bytes never reached the idle connection")
	}
	if res, body := get(t, tr, pool, fmt.Sprintf(getReq, 2)); res.StatusCode != 200 || body != "second" {
		t.Errorf("second: %d %q, want its own answer", res.StatusCode, body)
	}
	if n := up.Conns(); n != 2 {
		t.Errorf("the upstream saw %d connections, want 2", n)
	}
}

// idleHolds reports whether an idle connection of tr's own client to up
// has bytes waiting (peeked without taking the connection).
func idleHolds(tr *Transport, up string) bool {
	addr := strings.TrimPrefix(up, "http://")
	tr.fast.mu.Lock()
	defer tr.fast.mu.Unlock()
	for _, pc := range tr.fast.idle[addr] {
		if !pc.quiet() {
			return true
		}
	}
	return false
}

// TestClientStaleConnectionRetried: an idle connection the upstream has
// closed meanwhile costs the next request nothing: it is sent on a new
// one.
func TestClientStaleConnectionRetried(t *testing.T) {
	t.Parallel()
	up := testnet.NewScripted(t, func(n int, _ string) testnet.Answer {
		return testnet.Answer{Raw: okAnswer, HangUp: n == 0}
	}, nil)
	tr := newTestTransport(t, Options{})
	pool := newTestPool(t, tr, up.URL)
	for i := range 3 {
		if res, body := get(t, tr, pool, fmt.Sprintf(getReq, i)); res.StatusCode != 200 || body != "ok" {
			t.Fatalf("request %d: %d %q", i, res.StatusCode, body)
		}
	}
	if n := up.Conns(); n != 2 {
		t.Errorf("the upstream saw %d connections, want 2", n)
	}
}

// TestClientRequestHead: the head the client writes is the one the stock
// transport writes for the same request: Host first, fields in the order
// of their names, hop-by-hop fields named by Connection removed
// (CommonRequest), no body framing for a request without a body.
func TestClientRequestHead(t *testing.T) {
	t.Parallel()
	up := testnet.NewScripted(t, func(int, string) testnet.Answer { return testnet.Answer{Raw: okAnswer} }, nil)
	tr := newTestTransport(t, Options{})
	pool := newTestPool(t, tr, up.URL)
	res, _ := get(t, tr, pool, "GET /a%20b?q=1&r=%2F HTTP/1.1\r\nHost: localhost\r\nUser-Agent: curl/8.5.0\r\n"+
		"Connection: keep-alive, X-Hop\r\nX-Hop: secret\r\nKeep-Alive: timeout=5\r\nTE: trailers\r\nAccept:  */*  \r\n\r\n")
	if res.StatusCode != 200 {
		t.Fatalf("%d", res.StatusCode)
	}
	head := up.Requests()[0]
	lines := strings.Split(strings.TrimSuffix(head, "\r\n\r\n"), "\r\n")
	if lines[0] != "GET /a%20b?q=1&r=%2F HTTP/1.1" || lines[1] != "Host: localhost" {
		t.Errorf("request line and Host:\n%s", head)
	}
	names := []string{}
	for _, l := range lines[2:] {
		k, _, _ := strings.Cut(l, ":")
		names = append(names, k)
	}
	for i := 1; i < len(names); i++ {
		if names[i-1] >= names[i] {
			t.Errorf("fields not in name order: %v", names)
		}
	}
	for _, gone := range []string{"X-Hop", "Keep-Alive", "Connection", "Content-Length", "Transfer-Encoding"} {
		if strings.Contains(head, "\r\n"+gone+":") {
			t.Errorf("%s sent upstream:\n%s", gone, head)
		}
	}
	for _, kept := range []string{"Te: trailers", "Accept: */*", "User-Agent: curl/8.5.0"} {
		if !strings.Contains(head, "\r\n"+kept+"\r\n") {
			t.Errorf("%q missing:\n%s", kept, head)
		}
	}
}

// TestClientTakesOnlyTheCommonExchange: requests with a body, a protocol
// switch, a method that is not idempotent or an https:// address go
// through http.Transport.
func TestClientTakesOnlyTheCommonExchange(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, raw, url string
		want           bool
	}{
		{"GET", "GET / HTTP/1.1\r\nHost: x\r\n\r\n", "http://u/", true},
		{"HEAD", "HEAD / HTTP/1.1\r\nHost: x\r\n\r\n", "http://u/", true},
		{"OPTIONS", "OPTIONS / HTTP/1.1\r\nHost: x\r\n\r\n", "http://u/", true},
		{"POST without a body", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", "http://u/", false},
		{"DELETE", "DELETE / HTTP/1.1\r\nHost: x\r\n\r\n", "http://u/", false},
		{"GET with a body", "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nab", "http://u/", false},
		{"GET chunked", "GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "http://u/", false},
		{"websocket", "GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", "http://u/", false},
		{"https upstream", "GET / HTTP/1.1\r\nHost: x\r\n\r\n", "https://u/", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(tt.raw)))
			if err != nil {
				t.Fatal(err)
			}
			out := r.Clone(r.Context()) // as ReverseProxy builds it
			if r.ContentLength == 0 {
				out.Body = nil
			}
			out.URL, _ = out.URL.Parse(tt.url)
			if got := fastPath(out); got != tt.want {
				t.Errorf("fastPath = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestClientWaitsBounded: an upstream that never answers is cut after
// Options.HeaderTimeout (the edge's 504); a client that leaves while the
// edge waits ends the exchange at once, and neither connection is used
// again.
func TestClientWaitsBounded(t *testing.T) {
	t.Parallel()
	never := make(chan struct{})
	up := testnet.NewScripted(t, func(n int, _ string) testnet.Answer {
		if n < 2 {
			return testnet.Answer{Late: okAnswer} // after the test
		}
		return testnet.Answer{Raw: okAnswer}
	}, never)
	t.Cleanup(func() { close(never) }) // before the upstream's own cleanup waits for its goroutines
	tr := newTestTransport(t, Options{HeaderTimeout: 300 * time.Millisecond})
	pool := newTestPool(t, tr, up.URL)
	start := time.Now()
	if _, err := exchange(t, context.Background(), tr, pool, fmt.Sprintf(getReq, 1)); !isTimeout(err) {
		t.Errorf("an upstream that never answers: %v, want a timeout", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("answered after %v", d)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := exchange(t, ctx, tr, pool, fmt.Sprintf(getReq, 2))
		done <- err
	}()
	if !testnet.WaitFor(t, 5*time.Second, func() bool { return len(up.Requests()) == 2 }) {
		t.Fatal("the second request never reached the upstream")
	}
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Error("an exchange whose client left went on to an answer")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the exchange went on after the client left")
	}
	if res, body := get(t, tr, pool, fmt.Sprintf(getReq, 3)); res.StatusCode != 200 || body != "ok" {
		t.Errorf("after: %d %q", res.StatusCode, body)
	}
	if n := up.Conns(); n != 3 {
		t.Errorf("the upstream saw %d connections, want 3 (none reused after a cut exchange)", n)
	}
}

// TestClientAnswersWithoutBody: a HEAD's answer announces a length it does
// not carry, a 204 and a 304 carry none; each leaves its connection ready
// for the next request.
func TestClientAnswersWithoutBody(t *testing.T) {
	t.Parallel()
	up := testnet.NewScripted(t, func(n int, _ string) testnet.Answer {
		switch n {
		case 0:
			return testnet.Answer{Raw: "HTTP/1.1 200 OK\r\nContent-Length: 5000\r\nContent-Type: text/html\r\n\r\n"}
		case 1:
			return testnet.Answer{Raw: "HTTP/1.1 204 No Content\r\n\r\n"}
		case 2:
			return testnet.Answer{Raw: "HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n"}
		}
		return testnet.Answer{Raw: okAnswer}
	}, nil)
	tr := newTestTransport(t, Options{})
	pool := newTestPool(t, tr, up.URL)
	for i, tt := range []struct {
		raw    string
		status int
		body   string
	}{
		{"HEAD /a HTTP/1.1\r\nHost: localhost\r\nUser-Agent: curl/8.5.0\r\n\r\n", 200, ""},
		{fmt.Sprintf(getReq, 2), 204, ""},
		{"GET /c HTTP/1.1\r\nHost: localhost\r\nUser-Agent: curl/8.5.0\r\nIf-None-Match: \"x\"\r\n\r\n", 304, ""},
		{fmt.Sprintf(getReq, 4), 200, "ok"},
	} {
		if res, body := get(t, tr, pool, tt.raw); res.StatusCode != tt.status || body != tt.body {
			t.Errorf("request %d: %d %q, want %d %q", i, res.StatusCode, body, tt.status, tt.body)
		}
	}
	if n := up.Conns(); n != 1 {
		t.Errorf("the upstream saw %d connections, want 1", n)
	}
}

// TestClientCloseDuringRead: a body closed from another goroutine while a
// Read waits on the upstream (a spill's drainer reads as the handler
// closes) ends that Read at once, and its connection is closed, never
// given back to the idle ones for another request.
func TestClientCloseDuringRead(t *testing.T) {
	t.Parallel()
	late := make(chan struct{})
	defer close(late)
	up := testnet.NewScripted(t, func(int, string) testnet.Answer {
		return testnet.Answer{Raw: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nfirst", Late: "_rest"}
	}, late)
	c := &h1Client{dial: (&net.Dialer{}).DialContext, maxHeaderBytes: 1 << 20, maxIdle: 4, idleTimeout: time.Minute}
	defer c.Close()
	req := httptest.NewRequest(http.MethodGet, up.URL+"/", nil)
	req.RequestURI, req.Body = "", nil
	res, err := c.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(res.Body) // "first", then waits for the rest
		read <- err
	}()
	// The Read is waiting once the first five bytes are taken; Close must
	// end it however far it got.
	if err := res.Body.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-read:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end the Read under way")
	}
	c.mu.Lock()
	idle := len(c.idle[strings.TrimPrefix(up.URL, "http://")])
	c.mu.Unlock()
	if idle != 0 {
		t.Errorf("%d idle connections after a closed body, want 0", idle)
	}
}

// TestClientHeaderTimeoutNotRetried: an answer whose head does not come
// within Options.HeaderTimeout fails after that one wait (the edge's 504),
// and the request is not sent again: the upstream may be working on it (a
// GET can still cost it dearly), and a second try would double the wait.
// The first request leaves a pooled connection, so the timed-out one goes
// out on a reused connection, where a stale one is retried.
func TestClientHeaderTimeoutNotRetried(t *testing.T) {
	t.Parallel()
	never := make(chan struct{})
	up := testnet.NewScripted(t, func(n int, _ string) testnet.Answer {
		if n == 0 {
			return testnet.Answer{Raw: okAnswer}
		}
		return testnet.Answer{Late: okAnswer} // after the test
	}, never)
	t.Cleanup(func() { close(never) })
	tr := newTestTransport(t, Options{HeaderTimeout: 200 * time.Millisecond})
	pool := newTestPool(t, tr, up.URL)
	if res, _ := get(t, tr, pool, fmt.Sprintf(getReq, 0)); res.StatusCode != 200 {
		t.Fatalf("first request: %d", res.StatusCode)
	}
	if _, err := exchange(t, context.Background(), tr, pool, fmt.Sprintf(getReq, 1)); !isTimeout(err) {
		t.Errorf("an answer whose head never comes: %v, want a timeout", err)
	}
	if got := up.Requests(); len(got) != 2 {
		t.Errorf("the upstream saw %d requests, want 2 (the timed-out one once)", len(got))
	}
}

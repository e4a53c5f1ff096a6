package edge

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
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// scriptedUpstream answers each request with the bytes its script gives,
// written as they are: the upstream misbehaves exactly as a test says.
type scriptedUpstream struct {
	URL   string
	conns atomic.Int64 // connections accepted
	mu    sync.Mutex
	heads []string
}

// answer is what a scripted upstream sends for request n (from 0, over all
// connections) arriving as the conn-th request of its connection: raw
// bytes, then late bytes once the test's late channel closes (nil: none),
// then it closes the connection if hangUp.
type answer struct {
	raw    string
	late   string
	hangUp bool
}

func newScriptedUpstream(t *testing.T, script func(n int, head string) answer, late <-chan struct{}) *scriptedUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &scriptedUpstream{URL: "http://" + ln.Addr().String()}
	var wg sync.WaitGroup
	var open sync.Map
	t.Cleanup(func() {
		ln.Close()
		open.Range(func(k, _ any) bool { k.(net.Conn).Close(); return true })
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.conns.Add(1)
			open.Store(c, true)
			wg.Go(func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					_ = c.SetDeadline(time.Now().Add(20 * time.Second))
					head, err := readHead(br)
					if err != nil {
						return
					}
					u.mu.Lock()
					n := len(u.heads)
					u.heads = append(u.heads, head)
					u.mu.Unlock()
					a := script(n, head)
					if _, err := io.WriteString(c, a.raw); err != nil {
						return
					}
					if a.late != "" {
						<-late
						if _, err := io.WriteString(c, a.late); err != nil {
							return
						}
					}
					if a.hangUp {
						return
					}
				}
			})
		}
	})
	return u
}

func (u *scriptedUpstream) requests() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.heads...)
}

const okAnswer = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"

// smuggled is an answer an upstream sends past the one asked for: it must
// never reach the client of the next request.
const smuggled = "HTTP/1.1 200 OK\r\nContent-Length: 8\r\nX-Smuggled: yes\r\n\r\nsmuggled"

func clientSite(up string) string {
	return "policy: \"\"\nsites: [{hosts: [localhost], compress: false, upstream: " + up + "}]\n"
}

const getReq = "GET /%d HTTP/1.1\r\nHost: localhost\r\nUser-Agent: curl/8.5.0\r\n\r\n"

// TestClientFraming: answers an upstream frames wrongly or oddly, through
// the edge's own upstream client. Each case sends two requests: the first
// meets the odd answer; the second must get its own, never bytes left over
// from the first (response splitting, desync).
func TestClientFraming(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		first  answer
		status int    // of the first request
		body   string // of the first request, when 200
		header string // a header of the first answer the client must see ("K: v"), or ""
		gone   string // a header the client must not see
		conns  int64  // connections the upstream sees for both requests
	}{
		{name: "plain", first: answer{raw: okAnswer}, status: 200, body: "ok", conns: 1},
		{name: "TE and CL both: chunked wins, connection not trusted again",
			first:  answer{raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n3\r\nabc\r\n0\r\n\r\n" + smuggled},
			status: 200, body: "abc", conns: 2},
		{name: "body longer than its Content-Length",
			first:  answer{raw: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" + smuggled},
			status: 200, body: "ok", conns: 2},
		{name: "two Content-Lengths that differ",
			first:  answer{raw: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 10\r\n\r\nok" + smuggled},
			status: 502, conns: 2},
		{name: "unknown transfer coding",
			first:  answer{raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"},
			status: 502, conns: 2},
		{name: "obs-fold is folded into one line",
			first:  answer{raw: "HTTP/1.1 200 OK\r\nX-Folded: a\r\n b\r\nContent-Length: 2\r\n\r\nok"},
			status: 200, body: "ok", header: "X-Folded: a b", conns: 1},
		{name: "bare LF line ends",
			first:  answer{raw: "HTTP/1.1 200 OK\nContent-Length: 2\n\nok"},
			status: 200, body: "ok", conns: 1},
		{name: "header larger than the bound",
			first:  answer{raw: "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("a", maxUpstreamHeaderBytes+10) + "\r\nContent-Length: 2\r\n\r\nok"},
			status: 502, conns: 2},
		{name: "Connection names a hop-by-hop header",
			first:  answer{raw: "HTTP/1.1 200 OK\r\nConnection: X-Hop\r\nX-Hop: secret\r\nX-Kept: yes\r\nContent-Length: 2\r\n\r\nok"},
			status: 200, body: "ok", header: "X-Kept: yes", gone: "X-Hop", conns: 1},
		{name: "Connection: close is honoured",
			first:  answer{raw: "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"},
			status: 200, body: "ok", conns: 2},
		{name: "body to the end of the connection",
			first:  answer{raw: "HTTP/1.1 200 OK\r\n\r\nuntil close", hangUp: true},
			status: 200, body: "until close", conns: 2},
		{name: "HTTP/1.0 answer without keep-alive",
			first:  answer{raw: "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"},
			status: 200, body: "ok", conns: 2},
		{name: "switching protocols unasked",
			first:  answer{raw: "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n"},
			status: 502, conns: 2},
		{name: "too many 1xx",
			first:  answer{raw: strings.Repeat("HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n", 7) + okAnswer},
			status: 502, conns: 2},
		{name: "trailers pass",
			first:  answer{raw: "HTTP/1.1 200 OK\r\nTrailer: X-Sum\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-Sum: 42\r\n\r\n"},
			status: 200, body: "ok", header: "X-Sum: 42", conns: 1},
		{name: "closed without an answer",
			first:  answer{hangUp: true},
			status: 502, conns: 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			up := newScriptedUpstream(t, func(n int, _ string) answer {
				if n == 0 {
					return tt.first
				}
				return answer{raw: okAnswer}
			}, nil)
			h := newTestHandler(t, clientSite(up.URL))
			w := serveRaw(t, h, fmt.Sprintf(getReq, 1))
			res := w.Result()
			code := w.Code
			if code < 200 && strings.Contains(w.Body.String(), "<code>upstream_error</code>") {
				code = http.StatusBadGateway // httptest's recorder keeps the 1xx passed on before the error page
			}
			if code != tt.status {
				t.Fatalf("first: %d %q, want %d", w.Code, w.Body, tt.status)
			}
			if tt.status == 200 && w.Body.String() != tt.body {
				t.Errorf("first body %q, want %q", w.Body, tt.body)
			}
			if tt.header != "" {
				k, v, _ := strings.Cut(tt.header, ": ")
				if got := res.Header.Get(k) + res.Trailer.Get(k); got != v {
					t.Errorf("%s: %q, want %q", k, got, v)
				}
			}
			if tt.gone != "" && res.Header.Get(tt.gone) != "" {
				t.Errorf("%s reached the client", tt.gone)
			}
			w2 := serveRaw(t, h, fmt.Sprintf(getReq, 2))
			if w2.Code != 200 || w2.Body.String() != "ok" || w2.Header().Get("X-Smuggled") != "" {
				t.Errorf("second: %d %q %v: not its own answer", w2.Code, w2.Body, w2.Header())
			}
			if n := up.conns.Load(); n != tt.conns {
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
	up := newScriptedUpstream(t, func(n int, _ string) answer {
		if n == 0 {
			return answer{raw: okAnswer, late: smuggled}
		}
		return answer{raw: "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecond"}
	}, late)
	h := newTestHandler(t, clientSite(up.URL))
	if w := serveRaw(t, h, fmt.Sprintf(getReq, 1)); w.Code != 200 || w.Body.String() != "ok" {
		t.Fatalf("first: %d %q", w.Code, w.Body)
	}
	close(late)
	// The late bytes are on their way; once the idle connection holds
	// them, a request must not take it.
	if !waitFor(t, 5*time.Second, func() bool { return idleHolds(h, up.URL) }) {
		t.Fatal("the late bytes never reached the idle connection")
	}
	w := serveRaw(t, h, fmt.Sprintf(getReq, 2))
	if w.Code != 200 || w.Body.String() != "second" {
		t.Errorf("second: %d %q, want its own answer", w.Code, w.Body)
	}
	if n := up.conns.Load(); n != 2 {
		t.Errorf("the upstream saw %d connections, want 2", n)
	}
}

// idleHolds reports whether an idle upstream connection of h to up has
// bytes waiting (peeked without taking the connection).
func idleHolds(h *Handler, up string) bool {
	addr := strings.TrimPrefix(up, "http://")
	h.h1.mu.Lock()
	defer h.h1.mu.Unlock()
	for _, pc := range h.h1.idle[addr] {
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
	up := newScriptedUpstream(t, func(n int, _ string) answer {
		return answer{raw: okAnswer, hangUp: n == 0}
	}, nil)
	h := newTestHandler(t, clientSite(up.URL))
	for i := range 3 {
		if w := serveRaw(t, h, fmt.Sprintf(getReq, i)); w.Code != 200 || w.Body.String() != "ok" {
			t.Fatalf("request %d: %d %q", i, w.Code, w.Body)
		}
	}
	if n := up.conns.Load(); n != 2 {
		t.Errorf("the upstream saw %d connections, want 2", n)
	}
}

// TestClientRequestHead: the head the client writes is the one the stock
// transport writes for the same request: Host first, fields in the order
// of their names, hop-by-hop fields named by Connection removed, no body
// framing for a request without a body.
func TestClientRequestHead(t *testing.T) {
	t.Parallel()
	up := newRawUpstream(t)
	h := newTestHandler(t, clientSite(up.URL))
	w := serveRaw(t, h, "GET /a%20b?q=1&r=%2F HTTP/1.1\r\nHost: localhost\r\nUser-Agent: curl/8.5.0\r\n"+
		"Connection: keep-alive, X-Hop\r\nX-Hop: secret\r\nKeep-Alive: timeout=5\r\nTE: trailers\r\nAccept:  */*  \r\n\r\n")
	if w.Code != 200 {
		t.Fatalf("%d %q", w.Code, w.Body)
	}
	head := up.heads()[0]
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

// TestClientCarriesHTTP2Requests: a GET over HTTP/2 reaches the upstream
// through the edge's own client (its connection is then idle in its
// pool), and 103 Early Hints pass to the client.
func TestClientCarriesHTTP2Requests(t *testing.T) {
	t.Parallel()
	up := newScriptedUpstream(t, func(int, string) answer {
		return answer{raw: "HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n" + okAnswer}
	}, nil)
	e := startEdge(t, clientSite(up.URL))
	for _, proto := range []string{"h2", "http/1.1"} {
		c, err := tls.Dial("tcp", e.Addrs().HTTPS, e.tlsConfig(proto))
		if err != nil {
			t.Fatal(err)
		}
		var got []int
		if proto == "h2" {
			res, _ := get(t, e.client(t, "h2"), e.url("/"), "User-Agent", "curl/8.5.0")
			got = append(got, res.StatusCode)
		} else {
			_, _ = io.WriteString(c, fmt.Sprintf(getReq, 1))
			br := bufio.NewReader(c)
			for {
				res, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, res.StatusCode)
				if res.StatusCode >= 200 {
					break
				}
			}
			if len(got) != 2 || got[0] != 103 {
				t.Errorf("HTTP/1.1 client got %v, want [103 200]", got)
			}
		}
		c.Close()
		if got[len(got)-1] != 200 {
			t.Errorf("%s: %v", proto, got)
		}
	}
	h := e.Handler()
	addr := strings.TrimPrefix(up.URL, "http://")
	h.h1.mu.Lock()
	idle := len(h.h1.idle[addr])
	h.h1.mu.Unlock()
	if idle == 0 || up.conns.Load() != 1 {
		t.Errorf("%d idle connections in the edge's client, %d made: the requests did not share its pool", idle, up.conns.Load())
	}
}

// TestClientWaitsBounded: an upstream that never answers is cut after
// timeouts.upstream_header (504); a client that leaves while the edge
// waits ends the exchange at once, and neither connection is used again.
func TestClientWaitsBounded(t *testing.T) {
	t.Parallel()
	never := make(chan struct{})
	up := newScriptedUpstream(t, func(n int, _ string) answer {
		if n < 2 {
			return answer{late: okAnswer} // after the test
		}
		return answer{raw: okAnswer}
	}, never)
	t.Cleanup(func() { close(never) }) // before the upstream's own cleanup waits for its goroutines
	h := newTestHandler(t, "timeouts: {upstream_header: 300ms}\n"+clientSite(up.URL))
	start := time.Now()
	if w := serveRaw(t, h, fmt.Sprintf(getReq, 1)); w.Code != http.StatusGatewayTimeout {
		t.Errorf("an upstream that never answers: %d, want 504", w.Code)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("answered after %v", d)
	}

	r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(fmt.Sprintf(getReq, 2))))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r = r.WithContext(ctx)
	r.RemoteAddr = "127.0.0.1:40000"
	done := make(chan int)
	w := httptest.NewRecorder()
	go func() { h.ServeHTTP(w, r); done <- w.Code }()
	if !waitFor(t, 5*time.Second, func() bool { return len(up.requests()) == 2 }) {
		t.Fatal("the second request never reached the upstream")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the exchange went on after the client left")
	}
	if w := serveRaw(t, h, fmt.Sprintf(getReq, 3)); w.Code != 200 || w.Body.String() != "ok" {
		t.Errorf("after: %d %q", w.Code, w.Body)
	}
	if n := up.conns.Load(); n != 3 {
		t.Errorf("the upstream saw %d connections, want 3 (none reused after a cut exchange)", n)
	}
}

// TestTLSResumption: the edge's listener path (the ClientHello reader, the
// recording of the first bytes, the handshake in handleTLS) keeps session
// resumption working: a client back with its ticket resumes, on HTTP/1.1
// and HTTP/2, and its requests still carry the fingerprint of the new
// hello.
func TestTLSResumption(t *testing.T) {
	t.Parallel()
	up := newRawUpstream(t)
	e := startEdge(t, clientSite(up.URL))
	for _, proto := range []string{"http/1.1", "h2"} {
		t.Run(proto, func(t *testing.T) {
			t.Parallel()
			conf := e.tlsConfig(proto)
			conf.ClientSessionCache = tls.NewLRUClientSessionCache(4)
			for i, want := range []bool{false, true, true} {
				c, err := tls.Dial("tcp", e.Addrs().HTTPS, conf)
				if err != nil {
					t.Fatal(err)
				}
				// A request, whose answer also brings the TLS 1.3 tickets.
				if proto == "h2" {
					// net/http's HTTP/2 client on this very connection.
					tr := h2Transport(&http.Transport{DialTLSContext: func(context.Context, string, string) (net.Conn, error) { return c, nil }})
					req, _ := http.NewRequest("GET", "https://localhost/", nil)
					req.Header.Set("User-Agent", "curl/8.5.0")
					res, err := tr.RoundTrip(req)
					if err != nil {
						t.Fatal(err)
					}
					_, _ = io.Copy(io.Discard, res.Body)
					res.Body.Close()
					if res.StatusCode != 200 {
						t.Errorf("connection %d: %d", i, res.StatusCode)
					}
					tr.CloseIdleConnections()
				} else {
					_, _ = io.WriteString(c, fmt.Sprintf(getReq, i))
					res, err := http.ReadResponse(bufio.NewReader(c), nil)
					if err != nil {
						t.Fatal(err)
					}
					_, _ = io.Copy(io.Discard, res.Body)
					if res.StatusCode != 200 {
						t.Errorf("connection %d: %d", i, res.StatusCode)
					}
				}
				if got := c.ConnectionState().DidResume; got != want {
					t.Errorf("connection %d resumed: %v, want %v", i, got, want)
				}
				c.Close()
			}
		})
	}
}

// TestClientAnswersWithoutBody: a HEAD's answer announces a length it does
// not carry, a 204 and a 304 carry none; each leaves its connection ready
// for the next request.
func TestClientAnswersWithoutBody(t *testing.T) {
	t.Parallel()
	up := newScriptedUpstream(t, func(n int, _ string) answer {
		switch n {
		case 0:
			return answer{raw: "HTTP/1.1 200 OK\r\nContent-Length: 5000\r\nContent-Type: text/html\r\n\r\n"}
		case 1:
			return answer{raw: "HTTP/1.1 204 No Content\r\n\r\n"}
		case 2:
			return answer{raw: "HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n"}
		}
		return answer{raw: okAnswer}
	}, nil)
	h := newTestHandler(t, clientSite(up.URL))
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
		w := serveRaw(t, h, tt.raw)
		if w.Code != tt.status || w.Body.String() != tt.body {
			t.Errorf("request %d: %d %q, want %d %q", i, w.Code, w.Body, tt.status, tt.body)
		}
	}
	if n := up.conns.Load(); n != 1 {
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
	up := newScriptedUpstream(t, func(int, string) answer {
		return answer{raw: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nfirst", late: "_rest"}
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
// within timeouts.upstream_header is a 504 after that one wait, and the
// request is not sent again: the upstream may be working on it (a GET can
// still cost it dearly), and a second try would double the wait. The
// first request leaves a pooled connection, so the timed-out one goes out
// on a reused connection, where a stale one is retried.
func TestClientHeaderTimeoutNotRetried(t *testing.T) {
	t.Parallel()
	never := make(chan struct{})
	up := newScriptedUpstream(t, func(n int, _ string) answer {
		if n == 0 {
			return answer{raw: okAnswer}
		}
		return answer{late: okAnswer} // after the test
	}, never)
	t.Cleanup(func() { close(never) })
	h := newTestHandler(t, "timeouts: {upstream_header: 200ms}\n"+clientSite(up.URL))
	if w := serveRaw(t, h, fmt.Sprintf(getReq, 0)); w.Code != 200 {
		t.Fatalf("first request: %d", w.Code)
	}
	if w := serveRaw(t, h, fmt.Sprintf(getReq, 1)); w.Code != http.StatusGatewayTimeout {
		t.Errorf("an answer whose head never comes: %d, want 504", w.Code)
	}
	if got := up.requests(); len(got) != 2 {
		t.Errorf("the upstream saw %d requests, want 2 (the timed-out one once)", len(got))
	}
}

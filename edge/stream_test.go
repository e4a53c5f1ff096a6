package edge

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/websocket"
)

func TestWebsocketEcho(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(websocket.Handler(func(ws *websocket.Conn) { _, _ = io.Copy(ws, ws) }))
	t.Cleanup(up.Close)
	e := startEdge(t, "sites: [{hosts: [localhost], upstream: "+up.URL+"}]\n")
	conn, err := tls.Dial("tcp", e.Addrs().HTTPS, e.tlsConfig("http/1.1"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	wcfg, _ := websocket.NewConfig("wss://localhost/ws", "https://localhost/")
	ws, err := websocket.NewClient(wcfg, conn)
	if err != nil {
		t.Fatalf("websocket handshake through the edge: %v", err)
	}
	for i := range 3 {
		msg := "ping " + strconv.Itoa(i)
		if err := websocket.Message.Send(ws, msg); err != nil {
			t.Fatal(err)
		}
		var got string
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		if err := websocket.Message.Receive(ws, &got); err != nil || got != msg {
			t.Fatalf("echo %d: %q, %v", i, got, err)
		}
	}
}

// sseUpstream sends three events, each only after the client has read the
// one before (the test says so on the returned channel).
func sseUpstream(t *testing.T) (url string, next chan<- struct{}) {
	t.Helper()
	ch := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			fmt.Fprintf(w, "data: event %d\n\n", i)
			w.(http.Flusher).Flush()
			select {
			case <-ch: // the client saw this event before the next one exists
			case <-time.After(10 * time.Second):
				return
			}
		}
	}))
	t.Cleanup(up.Close)
	return up.URL, ch
}

// readEvents reads sseUpstream's events with c, one by one.
func readEvents(t *testing.T, c *http.Client, u string, next chan<- struct{}) {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	req.Host = "localhost"
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	br := bufio.NewReader(res.Body)
	for i := range 3 {
		line, err := br.ReadString('\n')
		if err != nil || line != "data: event "+strconv.Itoa(i)+"\n" {
			t.Fatalf("event %d: %q, %v", i, line, err)
		}
		_, _ = br.ReadString('\n')
		next <- struct{}{}
	}
}

// TestServerSentEventsStream: events reach an HTTP/1.1 and an HTTP/3
// client one by one; TestServerSentEventsThroughEdge checks HTTP/2 through
// a real edge, whose writers the Handler's flushes must reach.
func TestServerSentEventsStream(t *testing.T) {
	t.Parallel()
	up, next := sseUpstream(t)
	h := newTestHandler(t, "sites: [{hosts: [localhost], upstream: "+up+"}]\n")
	for _, proto := range []string{"h1", "h3"} {
		t.Run(proto, func(t *testing.T) {
			readEvents(t, handlerClient(h, proto), handlerURL("/events"), next)
		})
	}
}

func TestServerSentEventsThroughEdge(t *testing.T) {
	t.Parallel()
	up, next := sseUpstream(t)
	e := startEdge(t, "sites: [{hosts: [localhost], upstream: "+up+"}]\n")
	readEvents(t, e.client(t, "h2"), e.url("/events"), next)
}

// zeros is an endless reader that costs no memory.
type zeros struct{ left int64 }

func (z *zeros) Read(p []byte) (int, error) {
	if z.left == 0 {
		return 0, io.EOF
	}
	n := int64(len(p))
	if n > z.left {
		n = z.left
	}
	clear(p[:n])
	z.left -= n
	return int(n), nil
}

func TestLargeUploadStreamsWithBoundedMemory(t *testing.T) {
	// Not parallel: it watches this process's heap.
	const size = 1 << 30
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		fmt.Fprint(w, n)
	}))
	t.Cleanup(up.Close)
	h := newTestHandler(t, "sites: [{hosts: [localhost], upstream: "+up.URL+"}]\n")

	var peak atomic.Uint64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	go func() {
		for ctx.Err() == nil {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	req, _ := http.NewRequest("POST", handlerURL("/upload"), &zeros{left: size})
	req.Host = "localhost"
	req.ContentLength = size
	c := handlerClient(h, "h1")
	c.Timeout = 2 * time.Minute
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	cancel()
	if res.StatusCode != 200 || strings.TrimSpace(string(body)) != strconv.Itoa(size) {
		t.Fatalf("upload: %d %q", res.StatusCode, body)
	}
	if grew := int64(peak.Load()) - int64(base); grew > 64<<20 {
		t.Errorf("heap grew by %d MiB during a 1 GiB upload; bodies must stream", grew>>20)
	}
}

// streamsUpstream serves streams that stay open until the test ends:
// /events (server-sent events: one event, then quiet), /ws (a websocket
// echo) and /poll (a long poll: the head and one byte of the body, then
// quiet); anything else is answered "ok".
func streamsUpstream(t *testing.T) *httptest.Server {
	t.Helper()
	done := make(chan struct{})
	ws := websocket.Handler(func(ws *websocket.Conn) { _, _ = io.Copy(ws, ws) })
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ws":
			ws.ServeHTTP(w, r)
			return
		case "/events":
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: hi\n\n")
		case "/poll":
			w.Header().Set("Content-Type", "text/plain")
			_, _ = io.WriteString(w, "o") // chunked: the edge passes each piece on
		default:
			_, _ = io.WriteString(w, "ok")
			return
		}
		w.(http.Flusher).Flush()
		select {
		case <-done:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(up.Close)
	t.Cleanup(func() { close(done) }) // first: the streams end, then the server
	return up
}

// streamClient is a client for streams that stay open: each waits at most
// 20s for its answer's head, and as long as the test runs for the rest
// (http.Client.Timeout would end it).
func streamClient(e *testEdge) *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: e.tlsConfig("http/1.1"),
		ResponseHeaderTimeout: 20 * time.Second, DisableCompression: true}}
}

// openEvents opens an event stream and reads its first event (want); the
// stream stays open until the test ends. The rest is read from br.
func openEvents(t *testing.T, c *http.Client, u, want string) (res *http.Response, br *bufio.Reader, err error) {
	t.Helper()
	return openEventsMethod(t, c, "GET", u, want)
}

// openEventsMethod is openEvents with a method: a POST carries a body, and
// goes to the upstream through http.Transport.
func openEventsMethod(t *testing.T, c *http.Client, method, u, want string) (res *http.Response, br *bufio.Reader, err error) {
	t.Helper()
	var body io.Reader
	if method == "POST" {
		body = strings.NewReader("a body")
	}
	req, _ := http.NewRequest(method, u, body)
	req.Host = "localhost"
	req.Header.Set("User-Agent", "Go-http-client/1.1")
	if res, err = c.Do(req); err != nil {
		return nil, nil, err
	}
	t.Cleanup(func() { res.Body.Close() })
	if res.StatusCode != 200 {
		return res, nil, nil
	}
	br = bufio.NewReader(res.Body)
	if line, err := br.ReadString('\n'); err != nil || line != want {
		return nil, nil, fmt.Errorf("first event: %q, %v", line, err)
	}
	_, _ = br.ReadString('\n')
	return res, br, nil
}

// openWebsocket opens a websocket on /ws through e and checks its echo;
// it stays open until the test ends.
func openWebsocket(t *testing.T, e *testEdge) (*websocket.Conn, error) {
	t.Helper()
	conn, err := tls.Dial("tcp", e.Addrs().HTTPS, e.tlsConfig("http/1.1"))
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { conn.Close() })
	wcfg, _ := websocket.NewConfig("wss://localhost/ws", "https://localhost/")
	wcfg.Header = http.Header{"User-Agent": {"Go-http-client/1.1"}}
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	ws, err := websocket.NewClient(wcfg, conn)
	if err != nil {
		return nil, err
	}
	return ws, echo(ws)
}

// echo checks that a websocket echoes a message.
func echo(ws *websocket.Conn) error {
	_ = ws.SetDeadline(time.Now().Add(20 * time.Second))
	defer ws.SetDeadline(time.Time{})
	var got string
	if err := websocket.Message.Send(ws, "ping"); err != nil {
		return err
	}
	if err := websocket.Message.Receive(ws, &got); err != nil || got != "ping" {
		return fmt.Errorf("echo: %q, %v", got, err)
	}
	return nil
}

// TestStreamsHoldNoSlot: websockets and server-sent events hold none of
// limits.upstream_conns: with 4 connections to the upstream, 10 of each
// stay open (event streams asked for with a GET, on the edge's own client,
// and with a POST, on http.Transport), and plain requests beside them are
// answered as usual, on either client.
func TestStreamsHoldNoSlot(t *testing.T) {
	t.Parallel()
	up := streamsUpstream(t)
	e := startEdge(t, "limits: {upstream_conns: 4, upstream_queue: 5s}\npolicy: \"\"\n"+
		"sites: [{hosts: [localhost], upstream: "+up.URL+"}]\n")
	c, sc := e.client(t, "h2"), streamClient(e)
	for i := range 10 {
		if res, _, err := openEvents(t, sc, e.url("/events"), "data: hi\n"); err != nil || res.StatusCode != 200 {
			t.Fatalf("event stream %d: %v %v", i, res, err)
		}
		if _, err := openWebsocket(t, e); err != nil {
			t.Fatalf("websocket %d: %v", i, err)
		}
		if res, _, err := openEventsMethod(t, sc, "POST", e.url("/events"), "data: hi\n"); err != nil || res.StatusCode != 200 {
			t.Fatalf("event stream %d asked for with a POST: %v %v", i, res, err)
		}
	}
	for i := range 8 {
		res, body := get(t, c, e.url("/plain"), "User-Agent", "Go-http-client/1.1")
		if res.StatusCode != 200 || body != "ok" {
			t.Fatalf("plain request %d beside 30 streams: %d %q", i, res.StatusCode, body)
		}
		req, _ := http.NewRequest("POST", e.url("/plain"), strings.NewReader("a body"))
		req.Host = "localhost"
		req.Header.Set("User-Agent", "Go-http-client/1.1")
		res, err := c.Do(req)
		if err != nil {
			t.Fatalf("plain POST %d beside 30 streams: %v", i, err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || string(b) != "ok" {
			t.Fatalf("plain POST %d beside 30 streams: %d %q", i, res.StatusCode, b)
		}
	}
	pool := e.Handler().sites.lookup("localhost").routes[0].pool
	if n := pool.State()[0].Streams; n != 30 {
		t.Errorf("%d streams counted, want 30", n)
	}
}

// TestStreamsBounded: beyond limits.upstream_streams, a new stream is
// answered 503 with Retry-After, an event stream and a websocket alike;
// once one ends, a new one opens.
func TestStreamsBounded(t *testing.T) {
	t.Parallel()
	up := streamsUpstream(t)
	e := startEdge(t, "limits: {upstream_conns: 4, upstream_streams: 2}\npolicy: \"\"\n"+
		"sites: [{hosts: [localhost], upstream: "+up.URL+"}]\n")
	c, sc := e.client(t, "h2"), streamClient(e)
	first, _, err := openEvents(t, sc, e.url("/events"), "data: hi\n")
	if err != nil || first.StatusCode != 200 {
		t.Fatalf("first stream: %v %v", first, err)
	}
	if _, err := openWebsocket(t, e); err != nil {
		t.Fatalf("second stream: %v", err)
	}
	res, _, err := openEvents(t, sc, e.url("/events"), "data: hi\n")
	if err != nil || res.StatusCode != 503 || res.Header.Get("Retry-After") == "" {
		t.Fatalf("a third event stream: %v %v, want 503 with Retry-After", res, err)
	}
	if _, err := openWebsocket(t, e); !errors.Is(err, websocket.ErrBadStatus) {
		t.Fatalf("a third stream, a websocket: %v, want its handshake refused", err)
	}
	if res, body := get(t, c, e.url("/plain"), "User-Agent", "Go-http-client/1.1"); res.StatusCode != 200 || body != "ok" {
		t.Fatalf("a plain request beside the streams: %d %q", res.StatusCode, body)
	}
	first.Body.Close()
	pool := e.Handler().sites.lookup("localhost").routes[0].pool
	if !waitFor(t, 20*time.Second, func() bool { return pool.State()[0].Streams == 1 }) {
		t.Fatalf("a closed stream still counted: %d", pool.State()[0].Streams)
	}
	if res, _, err := openEvents(t, sc, e.url("/events"), "data: hi\n"); err != nil || res.StatusCode != 200 {
		t.Fatalf("a stream after one ended: %v %v", res, err)
	}
}

// TestUpstreamWaitsBounded: an answer whose upstream sends nothing for
// timeouts.upstream_read is cut, on either client (a GET and a POST);
// an answer whose head does not come within timeouts.upstream_header is a
// 504, and its request reached the upstream once. Websockets and
// server-sent events, quiet for longer meanwhile, go on.
func TestUpstreamWaitsBounded(t *testing.T) {
	t.Parallel()
	next := make(chan struct{}) // the event stream's second event
	done := make(chan struct{})
	var heads atomic.Int64 // requests for /head
	echoWS := websocket.Handler(func(ws *websocket.Conn) { _, _ = io.Copy(ws, ws) })
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		wait := func(ch chan struct{}) {
			select {
			case <-ch:
			case <-done:
			case <-r.Context().Done():
			}
		}
		switch r.URL.Path {
		case "/ws":
			echoWS.ServeHTTP(w, r)
			return
		case "/events":
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: 0\n\n")
			w.(http.Flusher).Flush()
			wait(next)
			_, _ = io.WriteString(w, "data: 1\n\n")
		case "/stall":
			w.Header().Set("Content-Type", "text/plain")
			_, _ = io.WriteString(w, "o")
		case "/head":
			heads.Add(1)
			wait(done)
			return
		}
		w.(http.Flusher).Flush()
		wait(done)
	}))
	t.Cleanup(up.Close)
	t.Cleanup(func() { close(done) })
	e := startEdge(t, "timeouts: {upstream_header: 300ms, upstream_read: 300ms}\npolicy: \"\"\n"+
		"sites: [{hosts: [localhost], upstream: "+up.URL+"}]\n")
	c := e.client(t, "h2")
	c.Timeout = 0                                                      // the test bounds each wait itself
	events, br, err := openEvents(t, c, e.url("/events"), "data: 0\n") // quiet from now on
	if err != nil || events.StatusCode != 200 {
		t.Fatalf("event stream: %v %v", events, err)
	}
	ws, err := openWebsocket(t, e)
	if err != nil {
		t.Fatalf("websocket: %v", err)
	}

	do := func(method, path string) (*http.Response, []byte, error) {
		var body io.Reader
		if method == "POST" {
			body = strings.NewReader("a body: http.Transport carries it")
		}
		req, _ := http.NewRequest(method, e.url(path), body)
		req.Host = "localhost"
		req.Header.Set("User-Agent", "Go-http-client/1.1")
		type result struct {
			res  *http.Response
			body []byte
			err  error
		}
		ch := make(chan result, 1)
		go func() {
			res, err := c.Do(req)
			if err != nil {
				ch <- result{err: err}
				return
			}
			b, err := io.ReadAll(res.Body)
			res.Body.Close()
			ch <- result{res, b, err}
		}()
		select {
		case r := <-ch:
			return r.res, r.body, r.err
		case <-time.After(20 * time.Second):
			t.Fatalf("%s %s: no answer, nor an end, after 20s", method, path)
			return nil, nil, nil
		}
	}
	for _, method := range []string{"GET", "POST"} {
		if res, body, err := do(method, "/stall"); err == nil {
			t.Errorf("%s of an answer whose upstream went quiet: %d %q, want it cut", method, res.StatusCode, body)
		}
		before := heads.Load()
		if res, _, err := do(method, "/head"); err != nil || res.StatusCode != http.StatusGatewayTimeout {
			t.Errorf("%s of an answer whose head never comes: %v %v, want 504", method, res, err)
		}
		if n := heads.Load() - before; n != 1 {
			t.Errorf("%s whose head timed out reached the upstream %d times, want once", method, n)
		}
	}

	// Both streams have been quiet for longer than upstream_read, the
	// time it took to cut /stall.
	if err := echo(ws); err != nil {
		t.Errorf("a websocket quiet past upstream_read: %v", err)
	}
	close(next)
	got := make(chan string, 1)
	go func() {
		line, err := br.ReadString('\n')
		got <- fmt.Sprintf("%q %v", line, err)
	}()
	select {
	case line := <-got:
		if want := fmt.Sprintf("%q %v", "data: 1\n", nil); line != want {
			t.Errorf("an event stream quiet past upstream_read, its next event: %s, want %s", line, want)
		}
	case <-time.After(20 * time.Second):
		t.Error("an event stream quiet past upstream_read never got its next event")
	}
}

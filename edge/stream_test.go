package edge

import (
	"bufio"
	"context"
	"crypto/tls"
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

package edge

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go/http3"
	"golang.org/x/net/websocket"
)

// confUpstream is the conformance suite's upstream: one http.Handler that
// scripts each behaviour by path, served three ways — plain HTTP/1.1 on
// loopback (what the edge and nginx proxy to), and over TLS as HTTP/1.1,
// HTTP/2 and HTTP/3, which the clients reach directly: the reference
// answers. Paths that take an id ({id}) let the test and the upstream meet:
// the client tells it that it read an event, the upstream tells the test
// that it saw the client go away.
type confUpstream struct {
	plain  *httptest.Server // http://, for the proxies
	direct *httptest.Server // https://, HTTP/1.1 and HTTP/2
	h3addr string           // UDP, HTTP/3 over the direct server's certificate

	mu      sync.Mutex
	acks    map[string]chan struct{} // /sse/{id}: the client read the last event
	verdict map[string]string        // /sse/{id}: how the events went out
	aborted map[string]chan struct{} // /hold/{id}: closed when the request's context ends
	hits    map[string]int           // /count/{id}: requests seen
}

// confPiece is the unit of the scripted bodies.
const confPiece = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ\n"

// confBody is n bytes of a recognizable pattern.
func confBody(n int) string {
	return strings.Repeat(confPiece, n/len(confPiece)+1)[:n]
}

func newConfUpstream(t *testing.T) *confUpstream {
	t.Helper()
	u := &confUpstream{acks: map[string]chan struct{}{}, verdict: map[string]string{},
		aborted: map[string]chan struct{}{}, hits: map[string]int{}}
	u.plain = httptest.NewServer(u)
	t.Cleanup(u.plain.Close)
	u.direct = httptest.NewUnstartedServer(u)
	u.direct.EnableHTTP2 = true
	u.direct.StartTLS()
	t.Cleanup(u.direct.Close)

	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h3 := &http3.Server{Handler: u, TLSConfig: http3.ConfigureTLSConfig(&tls.Config{Certificates: u.direct.TLS.Certificates})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = h3.Serve(udp) // returns when closed
	}()
	t.Cleanup(func() { _ = h3.Close(); _ = udp.Close(); <-done })
	u.h3addr = udp.LocalAddr().String()
	return u
}

// ack tells /sse/{id} that the client read the event it sent last.
func (u *confUpstream) ack(id string) {
	select {
	case u.ackChan(id) <- struct{}{}:
	case <-time.After(confWait):
	}
}

func (u *confUpstream) ackChan(id string) chan struct{} {
	u.mu.Lock()
	defer u.mu.Unlock()
	ch, ok := u.acks[id]
	if !ok {
		ch = make(chan struct{})
		u.acks[id] = ch
	}
	return ch
}

// abortedChan is closed when /hold/{id} sees its request's context end.
func (u *confUpstream) abortedChan(id string) chan struct{} {
	u.mu.Lock()
	defer u.mu.Unlock()
	ch, ok := u.aborted[id]
	if !ok {
		ch = make(chan struct{})
		u.aborted[id] = ch
	}
	return ch
}

func (u *confUpstream) sseVerdict(id string) string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.verdict[id]
}

func (u *confUpstream) hitCount(id string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.hits[id]
}

// confWait bounds every wait of the suite: long enough for a loaded
// machine, only reached when something hangs.
const confWait = 10 * time.Second

// ServeHTTP answers by the path's first segment; see each case.
func (u *confUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	seg := strings.Split(strings.TrimPrefix(r.URL.Path, "/"), "/")
	arg := func(i int) string {
		if i < len(seg) {
			return seg[i]
		}
		return ""
	}
	h := w.Header()
	f, _ := w.(http.Flusher)
	switch seg[0] {
	case "fixed": // /fixed/N: N bytes with their Content-Length
		n, _ := strconv.Atoi(arg(1))
		h.Set("Content-Type", "text/plain; charset=utf-8")
		h.Set("Content-Length", strconv.Itoa(n))
		h.Set("ETag", `"fixed-`+arg(1)+`"`)
		h.Set("Cache-Control", "max-age=60")
		h.Add("Set-Cookie", "a=1; Path=/")
		h.Add("Set-Cookie", "b=2; Path=/; HttpOnly")
		io.WriteString(w, confBody(n))
	case "chunked": // three pieces, each flushed: no length known
		h.Set("Content-Type", "text/plain")
		for _, p := range []string{"one\n", "two\n", "three\n"} {
			io.WriteString(w, p)
			f.Flush()
		}
	case "slow": // /slow/D/NAME: NAME after D (headers late)
		d, _ := time.ParseDuration(arg(1))
		time.Sleep(d) // only makes the answer slow
		h.Set("Content-Type", "text/plain")
		h.Set("Content-Length", strconv.Itoa(len(arg(2))))
		io.WriteString(w, arg(2))
	case "dribble": // five pieces, some time apart (the body late)
		h.Set("Content-Type", "text/plain")
		for i := range 5 {
			fmt.Fprintf(w, "piece %d\n", i)
			f.Flush()
			time.Sleep(20 * time.Millisecond) // only makes the body slow
		}
	case "echo": // what came: method, path, the X-Test field, the body, the X-Sum trailer
		body, err := io.ReadAll(r.Body)
		h.Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "%s %s x-test=%q body=%d:%q err=%v trailer=%q\n", r.Method, r.URL.RequestURI(), r.Header.Get("X-Test"), len(body), body, err, r.Trailer.Get("X-Sum"))
	case "early": // 103 Early Hints, then the answer
		h.Add("Link", "</style.css>; rel=preload; as=style")
		w.WriteHeader(http.StatusEarlyHints)
		h.Del("Link")
		h.Set("Content-Type", "text/html")
		io.WriteString(w, "<p>after the hints</p>\n")
	case "trailers": // a chunked body with trailers announced and sent
		h.Set("Content-Type", "text/plain")
		h.Set("Trailer", "X-Checksum, X-Count")
		io.WriteString(w, "body before trailers\n")
		f.Flush()
		h.Set("X-Checksum", "abc123")
		h.Set("X-Count", "1")
	case "status": // /status/204, /status/304
		n, _ := strconv.Atoi(arg(1))
		h.Set("ETag", `"v1"`)
		h.Set("Cache-Control", "no-cache")
		w.WriteHeader(n)
	case "close": // the upstream closes after its answer
		if r.ProtoMajor == 1 { // a connection-specific field: none in HTTP/2 and HTTP/3 (RFC 9113 §8.2.2, RFC 9114 §4.2)
			h.Set("Connection", "close")
		}
		h.Set("Content-Type", "text/plain")
		h.Set("Content-Length", "6")
		io.WriteString(w, "close\n")
	case "sse": // /sse/{id}: three events, each once the client read the last
		u.sse(w, arg(1))
	case "reset": // /reset/fixed, /reset/chunked: the upstream dies mid-body
		h.Set("Content-Type", "text/plain")
		if arg(1) == "fixed" {
			h.Set("Content-Length", "1000")
		}
		io.WriteString(w, confBody(100))
		f.Flush()
		panic(http.ErrAbortHandler) // net/http closes the connection (HTTP/2, HTTP/3: resets the stream)
	case "hold": // /hold/{id}: part of a body, then waits for the client to go
		h.Set("Content-Type", "text/plain")
		io.WriteString(w, "first part\n")
		f.Flush()
		select {
		case <-r.Context().Done():
			close(u.abortedChan(arg(1)))
		case <-time.After(3 * confWait):
		}
	case "count": // /count/{id}/D: counted, then answered after D
		u.mu.Lock()
		u.hits[arg(1)]++
		u.mu.Unlock()
		d, _ := time.ParseDuration(arg(2))
		time.Sleep(d) // only makes the answer slow
		io.WriteString(w, "counted\n")
	case "ws":
		websocket.Handler(func(ws *websocket.Conn) { _, _ = io.Copy(ws, ws) }).ServeHTTP(w, r)
	default:
		h.Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "%s %s\n", r.Method, r.URL.Path)
	}
}

func (u *confUpstream) sse(w http.ResponseWriter, id string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	verdict := "3 events, each sent after the client read the one before"
	ack := u.ackChan(id)
	for i := range 3 {
		fmt.Fprintf(w, "id: %d\ndata: event %d\n\n", i, i)
		w.(http.Flusher).Flush()
		select {
		case <-ack:
		case <-time.After(confWait):
			verdict = fmt.Sprintf("the client never read event %d", i)
		}
		if !strings.HasPrefix(verdict, "3") {
			break
		}
	}
	u.mu.Lock()
	u.verdict[id] = verdict
	u.mu.Unlock()
}

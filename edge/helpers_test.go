package edge

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// newTestHandler builds a Handler from a configuration's sites (YAML),
// standing alone (zero Env), closed when the test ends.
func newTestHandler(t testing.TB, yamlText string) *Handler {
	t.Helper()
	cfg, err := ParseConfig("test.yaml", []byte("tls: { mode: self-signed, cache: \"\" }\n"+yamlText))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	h, err := NewHandler(cfg, Env{})
	if err != nil {
		t.Fatalf("NewHandler: %v", err)
	}
	t.Cleanup(h.Close)
	return h
}

// serveRaw sends one request, written as it would arrive on the wire
// (request line and header fields), to h as net/http's server would
// parse it, from a client at 127.0.0.1, and returns the recorded response.
func serveRaw(t testing.TB, h http.Handler, raw string) *httptest.ResponseRecorder {
	t.Helper()
	r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
	if err != nil {
		t.Fatalf("bad test request %q: %v", raw, err)
	}
	r.RemoteAddr = "127.0.0.1:40000"
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// rawUpstream is an upstream that records, byte for byte, the request line
// and header fields of every request it receives, and answers 200 "ok" —
// or 101 to a request that asks to switch protocols, as an h2c server
// would.
type rawUpstream struct {
	URL string
	mu  sync.Mutex
	got []string // request heads, in order
	ch  chan string
}

func newRawUpstream(t testing.TB) *rawUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &rawUpstream{URL: "http://" + ln.Addr().String(), ch: make(chan string, 64)}
	var wg sync.WaitGroup
	var conns sync.Map
	t.Cleanup(func() {
		ln.Close()
		conns.Range(func(k, _ any) bool { k.(net.Conn).Close(); return true })
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Store(c, true)
			wg.Go(func() { u.serve(c) })
		}
	})
	return u
}

func (u *rawUpstream) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		var head bytes.Buffer
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			head.WriteString(line)
			if line == "\r\n" {
				break
			}
		}
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(head.Bytes())))
		if err != nil {
			return
		}
		if req.ContentLength > 0 {
			if _, err := io.CopyN(io.Discard, br, req.ContentLength); err != nil {
				return
			}
		} else if len(req.TransferEncoding) > 0 {
			if _, err := io.Copy(io.Discard, httputil.NewChunkedReader(br)); err != nil {
				return
			}
			for { // the trailer section, up to its empty line
				line, err := br.ReadString('\n')
				if err != nil {
					return
				}
				if line == "\r\n" {
					break
				}
			}
		}
		u.mu.Lock()
		u.got = append(u.got, head.String())
		u.mu.Unlock()
		select {
		case u.ch <- head.String():
		default:
		}
		if req.Header.Get("Upgrade") != "" {
			_, _ = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+req.Header.Get("Upgrade")+"\r\n\r\n")
			return
		}
		if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"); err != nil {
			return
		}
	}
}

// heads returns the request heads received so far.
func (u *rawUpstream) heads() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.got...)
}

// requestLine returns the first line of a request head.
func requestLine(head string) string {
	line, _, _ := strings.Cut(head, "\r\n")
	return line
}

// waitFor polls cond until it holds or d has passed, and reports whether
// it held; the caller asserts what it needs.
func waitFor(t testing.TB, d time.Duration, cond func() bool) bool {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

func bufioReader(r io.Reader) *bufio.Reader { return bufio.NewReader(r) }

// h2Client writes raw HTTP/2 frames on a TLS connection (the attacks
// net/http's client would never send) and reads and drops what the server
// sends, so that the server is never blocked on a full socket.
type h2Client struct {
	*http2.Framer
	mu  sync.Mutex
	buf bytes.Buffer
	enc *hpack.Encoder
}

func newH2Client(t testing.TB, c net.Conn) *h2Client {
	t.Helper()
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	h := &h2Client{Framer: http2.NewFramer(c, c)}
	h.enc = hpack.NewEncoder(&h.buf)
	if err := h.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			f, err := h.ReadFrame()
			if err != nil {
				return
			}
			if sf, ok := f.(*http2.SettingsFrame); ok && !sf.IsAck() {
				h.mu.Lock()
				_ = h.WriteSettingsAck()
				h.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { c.Close(); <-done })
	return h
}

// headers sends a request's HEADERS frame on stream id.
func (h *h2Client) headers(id uint32, method, path string, endStream bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.buf.Reset()
	for _, f := range [][2]string{{":method", method}, {":scheme", "https"}, {":authority", "localhost"}, {":path", path}, {"user-agent", "curl/8.5.0"}} {
		_ = h.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	_ = h.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: h.buf.Bytes(), EndStream: endStream, EndHeaders: true})
}

// WriteRSTStream resets a stream (under the writer's lock).
func (h *h2Client) WriteRSTStream(id uint32, code http2.ErrCode) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.Framer.WriteRSTStream(id, code)
}

package edge

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/maatproxy/maat/edge/config"
	"github.com/maatproxy/maat/geo"
	"github.com/maatproxy/maat/internal/testnet"
)

// newTestHandler builds a Handler from a configuration's sites (YAML),
// standing alone (zero Env), closed when the test ends.
func newTestHandler(t testing.TB, yamlText string) *Handler {
	t.Helper()
	return newTestHandlerEnv(t, yamlText, Env{})
}

// newTestHandlerEnv is newTestHandler with what the Handler is given. As
// New does for a Server, it opens the fingerprint log (log.fingerprints) and
// the geo databases (geo:) the configuration names, unless env has them.
func newTestHandlerEnv(t testing.TB, yamlText string, env Env) *Handler {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte("tls: { mode: self-signed, cache: \"\" }\n"+yamlText))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	if env.FPLog == nil && cfg.Log.Fingerprints != "" {
		w, err := newFPLog(&cfg, randomBytes(32))
		if err != nil {
			t.Fatalf("fingerprint log: %v", err)
		}
		t.Cleanup(func() { _ = w.Close() }) // after the Handler's: LIFO
		env.FPLog = w
	}
	if env.Geo == nil && cfg.Geo != (config.GeoConfig{}) {
		if env.Geo, err = geo.Open(geo.Config{ASNDB: cfg.Geo.ASNDB, CountryDB: cfg.Geo.CountryDB}); err != nil {
			t.Fatalf("geo: %v", err)
		}
	}
	h, err := NewHandler(cfg, env)
	if err != nil {
		t.Fatalf("NewHandler: %v", err)
	}
	t.Cleanup(h.Close)
	return h
}

// handlerClient returns an HTTP client whose requests h serves in memory,
// without a socket, as the Server hands requests to its Handler: over TLS,
// from 127.0.0.1, in proto ("h1", "h2" or "h3"; the request's Proto and
// ALPN say which). Responses stream: a body arrives as the Handler writes
// and flushes it, and closing it is the client going away. Redirects are
// not followed.
func handlerClient(h http.Handler, proto string) *http.Client {
	ht := &handlerTransport{h: h, alpn: proto}
	switch proto {
	case "h1":
		ht.proto, ht.major, ht.alpn, ht.ua = "HTTP/1.1", 1, "http/1.1", "Go-http-client/1.1"
	case "h2":
		ht.proto, ht.major, ht.ua = "HTTP/2.0", 2, "Go-http-client/2.0"
	case "h3":
		ht.proto, ht.major, ht.ua = "HTTP/3.0", 3, "quic-go HTTP/3"
	default:
		panic("handlerClient: unknown protocol " + proto)
	}
	return &http.Client{Transport: ht, Timeout: 20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// handlerURL is the URL of path on the site the handler tests serve.
func handlerURL(path string) string { return "https://localhost" + path }

// handlerTransport is handlerClient's RoundTripper.
type handlerTransport struct {
	h               http.Handler
	proto, alpn, ua string
	major           int
}

func (ht *handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	r := req.Clone(ctx)
	r.RequestURI = req.URL.RequestURI()
	u, err := url.ParseRequestURI(r.RequestURI)
	if err != nil {
		cancel()
		return nil, err
	}
	r.URL = u
	if r.Host == "" {
		r.Host = req.URL.Host
	}
	r.Proto, r.ProtoMajor, r.ProtoMinor = ht.proto, ht.major, 0
	if ht.major == 1 {
		r.ProtoMinor = 1
	}
	r.RemoteAddr = "127.0.0.1:40000"
	r.TLS = &tls.ConnectionState{Version: tls.VersionTLS13, HandshakeComplete: true, ServerName: "localhost", NegotiatedProtocol: ht.alpn}
	if _, ok := r.Header["User-Agent"]; !ok {
		r.Header.Set("User-Agent", ht.ua)
	}
	if r.Body == nil {
		r.Body = http.NoBody
	}
	w := newStreamWriter()
	w.bodyless = r.Method == http.MethodHead
	go func() {
		defer cancel() // as a server ends a request's context when its handler returns
		defer w.finish()
		ht.h.ServeHTTP(w, r)
	}()
	<-w.headSent
	size := int64(-1)
	if cl, err := strconv.ParseInt(w.sent.Get("Content-Length"), 10, 64); err == nil {
		size = cl
	}
	return &http.Response{
		Status: fmt.Sprintf("%d %s", w.status, http.StatusText(w.status)), StatusCode: w.status,
		Proto: ht.proto, ProtoMajor: ht.major, ProtoMinor: r.ProtoMinor,
		Header: w.sent, Body: &streamBody{PipeReader: w.pr, cancel: cancel}, ContentLength: size, Request: req,
	}, nil
}

// streamWriter is a ResponseWriter whose body a client reads as it is
// written (an io.Pipe: a write waits for the reader). It can flush, not
// hijack. The body of an answer to HEAD is dropped, as net/http does.
type streamWriter struct {
	bodyless bool
	hdr      http.Header
	sent     http.Header // a copy of hdr when the head was sent
	status   int
	headSent chan struct{}
	pr       *io.PipeReader
	pw       *io.PipeWriter
}

func newStreamWriter() *streamWriter {
	pr, pw := io.Pipe()
	return &streamWriter{hdr: http.Header{}, headSent: make(chan struct{}), pr: pr, pw: pw}
}

func (w *streamWriter) Header() http.Header { return w.hdr }

// WriteHeader sends the head; informational (1xx) heads are dropped.
func (w *streamWriter) WriteHeader(code int) {
	if w.sent != nil || code < 200 {
		return
	}
	w.status, w.sent = code, w.hdr.Clone()
	close(w.headSent)
}

// Write sends body bytes; like net/http, the first one sniffs a
// Content-Type the handler did not set.
func (w *streamWriter) Write(p []byte) (int, error) {
	if w.sent == nil {
		if _, ok := w.hdr["Content-Type"]; !ok && len(p) > 0 && w.hdr.Get("Content-Encoding") == "" {
			w.hdr.Set("Content-Type", http.DetectContentType(p))
		}
		w.WriteHeader(http.StatusOK)
	}
	if w.bodyless {
		return len(p), nil
	}
	return w.pw.Write(p)
}

func (w *streamWriter) Flush() { w.WriteHeader(http.StatusOK) }

// finish ends the response when the handler has returned.
func (w *streamWriter) finish() {
	w.WriteHeader(http.StatusOK)
	_ = w.pw.Close()
}

// streamBody is a streamed response's body; closing it before the end is
// the client going away: the handler's writes fail and its context ends.
type streamBody struct {
	*io.PipeReader
	cancel context.CancelFunc
}

func (b *streamBody) Close() error {
	b.cancel()
	return b.PipeReader.Close()
}

// tlsRequest reads raw (request line and header fields, and a body) as the
// Server's HTTP/1.1 listener hands a request over TLS to its Handler, from
// 127.0.0.1.
func tlsRequest(t testing.TB, raw string) *http.Request {
	t.Helper()
	r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
	if err != nil {
		t.Fatalf("bad test request %q: %v", raw, err)
	}
	r.RemoteAddr = "127.0.0.1:40000"
	r.TLS = &tls.ConnectionState{Version: tls.VersionTLS13, HandshakeComplete: true, ServerName: "localhost", NegotiatedProtocol: "http/1.1"}
	return r
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

// readHead reads a request head, byte for byte, up to its empty line.
func readHead(br *bufio.Reader) (string, error) { return testnet.ReadHead(br) }

func (u *rawUpstream) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		head, err := readHead(br)
		if err != nil {
			return
		}
		req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(head)))
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
		u.got = append(u.got, head)
		u.mu.Unlock()
		select {
		case u.ch <- head:
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
	return testnet.WaitFor(t, d, cond)
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
	for _, f := range [][2]string{{":method", method}, {":scheme", "https"}, {":authority", "localhost"}, {":path", path}, {"user-agent", "Go-http-client/2.0"}} {
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

// writePolicy writes a policy file named name with text in a new
// directory and returns its path.
func writePolicy(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

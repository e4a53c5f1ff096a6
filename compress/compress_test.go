package compress

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// text returns n bytes of text that compresses about as well as a web page:
// words of a made-up vocabulary, drawn with Zipf's law, in lines of
// varying length, the same every time.
func text(n int) []byte {
	r := rand.New(rand.NewPCG(9, 9))
	vocab := make([]string, 2000)
	for i := range vocab {
		w := make([]byte, 2+r.IntN(9))
		for j := range w {
			w[j] = byte('a' + r.IntN(26))
		}
		vocab[i] = string(w)
	}
	zipf := rand.NewZipf(r, 1.1, 2, uint64(len(vocab)-1))
	var b bytes.Buffer
	for col := 0; b.Len() < n; {
		w := vocab[zipf.Uint64()]
		b.WriteString(w)
		if col += len(w) + 1; col > 60+r.IntN(20) {
			b.WriteByte('\n')
			col = 0
		} else {
			b.WriteByte(' ')
		}
	}
	return b.Bytes()[:n]
}

// decode decompresses body according to the content coding enc.
func decode(t testing.TB, enc string, body []byte) []byte {
	t.Helper()
	var r io.Reader
	switch enc {
	case "":
		return body
	case Zstd:
		d, err := zstd.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		r = d
	case Brotli:
		r = brotli.NewReader(bytes.NewReader(body))
	case Gzip:
		g, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		r = g
	default:
		t.Fatalf("unknown Content-Encoding %q", enc)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("decoding %s: %v", enc, err)
	}
	return out
}

func mustNew(t testing.TB, cfg Config) *Compressor {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// serve runs one request through c.Wrap(h) in memory.
func serve(c *Compressor, h http.HandlerFunc, method, accept string) *http.Response {
	req := httptest.NewRequest(method, "/", nil)
	if accept != "" {
		req.Header.Set("Accept-Encoding", accept)
	}
	rec := httptest.NewRecorder()
	c.Wrap(h).ServeHTTP(rec, req)
	return rec.Result()
}

// writes serves body in chunks of n bytes with the given headers.
func writes(header http.Header, status int, body []byte, n int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for k, v := range header {
			w.Header()[k] = v
		}
		if status != 0 {
			w.WriteHeader(status)
		}
		for len(body) > 0 {
			k := min(n, len(body))
			if _, err := w.Write(body[:k]); err != nil {
				panic(err)
			}
			body = body[k:]
		}
	}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	body := text(64 << 10)
	for _, tt := range []struct {
		name, accept, want string
		level              Level
		chunk              int
	}{
		{"zstd", "zstd", Zstd, LevelDefault, 1000},
		{"brotli", "br", Brotli, LevelDefault, 1000},
		{"gzip", "gzip", Gzip, LevelDefault, 1000},
		{"zstd in one write", "gzip, deflate, br, zstd", Zstd, LevelDefault, len(body)},
		{"brotli byte by byte at first", "br", Brotli, LevelDefault, 7},
		{"zstd fastest", "zstd", Zstd, LevelFastest, 4096},
		{"brotli best", "br", Brotli, LevelBest, 4096},
		{"gzip better", "gzip", Gzip, LevelBetter, 4096},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := mustNew(t, Config{Level: tt.level})
			h := http.Header{
				"Content-Type":   {"text/html; charset=utf-8"},
				"Content-Length": {fmt.Sprint(len(body))},
				"Etag":           {`"v1"`},
				"Accept-Ranges":  {"bytes"},
				"Vary":           {"Origin"},
			}
			// Serve twice: the second response takes a pooled encoder.
			for range 2 {
				res := serve(c, writes(h, 0, body, tt.chunk), "GET", tt.accept)
				got, _ := io.ReadAll(res.Body)
				if enc := res.Header.Get("Content-Encoding"); enc != tt.want {
					t.Fatalf("Content-Encoding = %q, want %q", enc, tt.want)
				}
				if !bytes.Equal(decode(t, tt.want, got), body) {
					t.Fatal("decompressed body differs from the original")
				}
				if len(got) >= len(body)/2 {
					t.Errorf("compressed %d bytes to %d", len(body), len(got))
				}
				for k, want := range map[string]string{
					"Content-Length": "", "Accept-Ranges": "", "Etag": `W/"v1"`,
					"Content-Type": "text/html; charset=utf-8",
				} {
					if v := res.Header.Get(k); v != want {
						t.Errorf("%s = %q, want %q", k, v, want)
					}
				}
				if v := res.Header.Values("Vary"); strings.Join(v, ",") != "Origin,Accept-Encoding" {
					t.Errorf("Vary = %q, want Origin then Accept-Encoding", v)
				}
			}
		})
	}
}

func TestDecision(t *testing.T) {
	t.Parallel()
	big, small := text(4096), text(1000)
	html := func(kv ...string) http.Header {
		h := http.Header{"Content-Type": {"text/html"}}
		for i := 0; i < len(kv); i += 2 {
			h.Add(kv[i], kv[i+1])
		}
		return h
	}
	for _, tt := range []struct {
		name     string
		cfg      Config
		method   string
		accept   string
		header   http.Header
		status   int
		body     []byte
		wantEnc  string
		wantVary bool
	}{
		{"compressed", Config{}, "GET", "gzip", html(), 0, big, Gzip, true},
		{"json", Config{}, "GET", "zstd", http.Header{"Content-Type": {"application/json"}}, 0, big, Zstd, true},
		{"svg", Config{}, "GET", "br", http.Header{"Content-Type": {"image/svg+xml"}}, 0, big, Brotli, true},
		{"not found page", Config{}, "GET", "gzip", html(), 404, big, Gzip, true},
		{"below MinSize", Config{}, "GET", "gzip", html(), 0, small, "", true},
		{"at MinSize", Config{MinSize: 1000}, "GET", "gzip", html(), 0, small, Gzip, true},
		{"Content-Length below MinSize", Config{}, "GET", "gzip", html("Content-Length", "1000"), 0, small, "", true},
		{"png", Config{}, "GET", "gzip", http.Header{"Content-Type": {"image/png"}}, 0, big, "", false},
		{"type not configured", Config{Types: []string{"application/json"}}, "GET", "gzip", html(), 0, big, "", false},
		{"type configured by wildcard", Config{Types: []string{"Application/*"}}, "GET", "gzip",
			http.Header{"Content-Type": {"application/vnd.custom"}}, 0, big, Gzip, true},
		{"already encoded", Config{}, "GET", "gzip", html("Content-Encoding", "br"), 0, big, "br", false},
		{"no-transform", Config{}, "GET", "gzip", html("Cache-Control", "public, No-Transform"), 0, big, "", false},
		{"no Accept-Encoding", Config{}, "GET", "", html(), 0, big, "", true},
		{"identity preferred", Config{}, "GET", "gzip;q=0.1, identity", html(), 0, big, "", true},
		{"encoding not offered", Config{Encodings: []string{Zstd}}, "GET", "gzip, br", html(), 0, big, "", true},
		{"HEAD", Config{}, "HEAD", "gzip", html("Content-Length", "4096"), 0, nil, "", false},
		{"206", Config{}, "GET", "gzip", html("Content-Range", "bytes 0-4095/9000"), 206, big, "", false},
		{"204", Config{}, "GET", "gzip", html(), 204, nil, "", false},
		{"304", Config{}, "GET", "gzip", html("Etag", `"v1"`), 304, nil, "", false},
		{"Vary already there", Config{}, "GET", "gzip", html("Vary", "accept-encoding"), 0, big, Gzip, true},
		{"Vary star", Config{}, "GET", "gzip", html("Vary", "*"), 0, big, Gzip, false},
		{"sniffed html", Config{}, "GET", "gzip", http.Header{}, 0, append([]byte("<!DOCTYPE html>"), big...), Gzip, true},
		{"sniffed binary", Config{}, "GET", "gzip", http.Header{}, 0, append([]byte("\x89PNG\r\n\x1a\n"), big...), "", false},
		{"sniffing refused", Config{}, "GET", "gzip", http.Header{"Content-Type": nil}, 0, big, "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := mustNew(t, tt.cfg)
			res := serve(c, writes(tt.header, tt.status, tt.body, 700), tt.method, tt.accept)
			got, _ := io.ReadAll(res.Body)
			if want := max(tt.status, 200); res.StatusCode != want {
				t.Errorf("status %d, want %d", res.StatusCode, want)
			}
			if enc := res.Header.Get("Content-Encoding"); enc != tt.wantEnc {
				t.Fatalf("Content-Encoding = %q, want %q", enc, tt.wantEnc)
			}
			vary := strings.Contains(strings.ToLower(strings.Join(res.Header.Values("Vary"), ",")), "accept-encoding")
			if vary != tt.wantVary {
				t.Errorf("Vary = %q, want Accept-Encoding: %v", res.Header.Values("Vary"), tt.wantVary)
			}
			if tt.wantEnc == "br" && tt.header.Get("Content-Encoding") == "br" {
				tt.wantEnc = "" // already encoded by the handler: passed as it is
			}
			if !bytes.Equal(decode(t, tt.wantEnc, got), tt.body) {
				t.Error("body differs from what the handler wrote")
			}
			if tt.wantEnc == "" {
				if cl := tt.header.Get("Content-Length"); cl != "" && res.Header.Get("Content-Length") != cl {
					t.Errorf("Content-Length = %q, want %q", res.Header.Get("Content-Length"), cl)
				}
				if et := tt.header.Get("Etag"); et != "" && res.Header.Get("Etag") != et {
					t.Errorf("ETag = %q, want %q", res.Header.Get("Etag"), et)
				}
			}
			if tt.name == "sniffed html" && res.Header.Get("Content-Type") != "text/html; charset=utf-8" {
				t.Errorf("Content-Type = %q, want the sniffed text/html", res.Header.Get("Content-Type"))
			}
		})
	}
}

// TestEmptyResponses runs on a real server: the recorder takes a 103 for
// the final status.
func TestEmptyResponses(t *testing.T) {
	t.Parallel()
	c := mustNew(t, Config{})
	for _, tt := range []struct {
		name string
		h    http.HandlerFunc
		want int
	}{
		{"nothing written", func(w http.ResponseWriter, r *http.Request) {}, 200},
		{"status only", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(201)
		}, 201},
		{"early hints then body", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Link", "</a.css>; rel=preload")
			w.WriteHeader(103)
			w.Header().Set("Content-Type", "text/plain")
			w.Write([]byte("ok"))
		}, 200},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := startServer(t, c.Wrap(tt.h))
			req, _ := http.NewRequest("GET", srv.URL, nil)
			req.Header.Set("Accept-Encoding", "gzip")
			res, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != tt.want || res.Header.Get("Content-Encoding") != "" {
				t.Errorf("status %d, Content-Encoding %q; want %d and none", res.StatusCode,
					res.Header.Get("Content-Encoding"), tt.want)
			}
		})
	}
}

// startServer serves h on a loopback port until the test ends.
func startServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ReadHeaderTimeout = 5 * time.Second
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// decoder returns a reader of the decoded stream r.
func decoder(t *testing.T, enc string, r io.Reader) io.Reader {
	t.Helper()
	switch enc {
	case Zstd:
		d, err := zstd.NewReader(r)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(d.Close)
		return d
	case Brotli:
		return brotli.NewReader(r)
	case Gzip:
		g, err := gzip.NewReader(r)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	return r
}

// get requests url with Accept-Encoding set, so that the Transport leaves
// the body encoded.
func get(t *testing.T, srv *httptest.Server, accept string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("GET", srv.URL, nil)
	req.Header.Set("Accept-Encoding", accept)
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

// front serves h through the middleware on loopback, directly or, as the
// edge does, wrapped around an httputil.ReverseProxy to h on its own server.
func front(t *testing.T, h http.Handler, viaProxy bool) *httptest.Server {
	t.Helper()
	if viaProxy {
		u, _ := url.Parse(startServer(t, h).URL)
		h = httputil.NewSingleHostReverseProxy(u)
	}
	return startServer(t, mustNew(t, Config{}).Wrap(h))
}

// TestServerSentEvents reads events through the middleware on a real
// server, one by one, while the handler waits for each to be read before it
// sends the next: an event stuck in a buffer would stall the test.
func TestServerSentEvents(t *testing.T) {
	t.Parallel()
	for _, enc := range []string{Zstd, Brotli, Gzip} {
		for _, viaProxy := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/proxy=%v", enc, viaProxy), func(t *testing.T) {
				t.Parallel()
				read := make(chan int)
				events := 5
				h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "text/event-stream")
					w.Header().Set("Cache-Control", "no-cache")
					rc := http.NewResponseController(w)
					for i := range events {
						fmt.Fprintf(w, "id: %d\ndata: event %d\n\n", i, i)
						if err := rc.Flush(); err != nil {
							t.Errorf("flush: %v", err)
							return
						}
						select {
						case <-read:
						case <-time.After(10 * time.Second):
							t.Errorf("event %d was not read", i)
							return
						case <-r.Context().Done():
							return
						}
					}
				})
				res := get(t, front(t, h, viaProxy), enc)
				if got := res.Header.Get("Content-Encoding"); got != enc {
					t.Fatalf("Content-Encoding = %q, want %q", got, enc)
				}
				lines := bufio.NewReader(decoder(t, enc, res.Body))
				for i := range events {
					for _, want := range []string{fmt.Sprintf("id: %d\n", i), fmt.Sprintf("data: event %d\n", i), "\n"} {
						line, err := lines.ReadString('\n')
						if err != nil || line != want {
							t.Fatalf("event %d: read %q, %v; want %q", i, line, err, want)
						}
					}
					read <- i
				}
			})
		}
	}
}

// TestThroughProxy sends upstream responses, with and without
// Content-Length, through the middleware around httputil.ReverseProxy. The
// proxy flushes after every write when the length is unknown, so such a
// response is compressed as a stream whatever its size.
func TestThroughProxy(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		size    int
		length  bool // upstream sends Content-Length
		accept  string
		wantEnc string
	}{
		{"64 KiB chunked zstd", 64 << 10, false, "zstd", Zstd},
		{"64 KiB chunked br", 64 << 10, false, "br", Brotli},
		{"64 KiB with length gzip", 64 << 10, true, "gzip", Gzip},
		{"small with length", 500, true, "gzip, br, zstd", ""},
		{"small chunked", 500, false, "gzip", Gzip},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			body := text(tt.size)
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/plain; charset=utf-8")
				if tt.length {
					w.Header().Set("Content-Length", fmt.Sprint(len(body)))
				}
				for p := body; len(p) > 0; p = p[min(len(p), 4096):] {
					w.Write(p[:min(len(p), 4096)])
					if !tt.length {
						http.NewResponseController(w).Flush() // forces chunking
					}
				}
			})
			res := get(t, front(t, h, true), tt.accept)
			if enc := res.Header.Get("Content-Encoding"); enc != tt.wantEnc {
				t.Fatalf("Content-Encoding = %q, want %q", enc, tt.wantEnc)
			}
			got, err := io.ReadAll(decoder(t, tt.wantEnc, res.Body))
			if err != nil || !bytes.Equal(got, body) {
				t.Errorf("decoded %d bytes, %v; want the %d bytes sent", len(got), err, len(body))
			}
		})
	}
}

// TestHijack hijacks the connection through the wrapped writer with
// http.ResponseController.
func TestHijack(t *testing.T) {
	t.Parallel()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("Hijack through Wrap: %v", err)
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n")
		brw.Write(text(4096))
		brw.Flush()
	})
	srv := startServer(t, mustNew(t, Config{}).Wrap(h))
	req, _ := http.NewRequest("GET", srv.URL, nil)
	req.Header.Set("Accept-Encoding", "gzip")
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	got, err := io.ReadAll(res.Body)
	if err != nil || !bytes.Equal(got, text(4096)) || res.Header.Get("Content-Encoding") != "" {
		t.Errorf("hijacked response: %d bytes, %v, Content-Encoding %q", len(got), err, res.Header.Get("Content-Encoding"))
	}
}

// TestWebSocketThroughProxy upgrades a connection through the middleware
// wrapped around httputil.ReverseProxy, as the edge runs it, and echoes
// bytes both ways over it.
func TestWebSocketThroughProxy(t *testing.T) {
	t.Parallel()
	backend := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "websocket" {
			http.Error(w, "upgrade required", http.StatusUpgradeRequired)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("backend hijack: %v", err)
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		brw.Flush()
		line, _ := brw.ReadString('\n')
		brw.WriteString("echo " + line)
		brw.Flush()
	}))
	u, _ := url.Parse(backend.URL)
	proxy := startServer(t, mustNew(t, Config{}).Wrap(httputil.NewSingleHostReverseProxy(u)))

	conn, err := net.DialTimeout("tcp", proxy.Listener.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "GET /chat HTTP/1.1\r\nHost: example.org\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Accept-Encoding: gzip, br, zstd\r\n\r\n")
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusSwitchingProtocols || res.Header.Get("Content-Encoding") != "" {
		t.Fatalf("status %d, Content-Encoding %q; want 101 and none", res.StatusCode, res.Header.Get("Content-Encoding"))
	}
	fmt.Fprintf(conn, "hello\n")
	if line, err := br.ReadString('\n'); err != nil || line != "echo hello\n" {
		t.Errorf("over the upgraded connection: %q, %v", line, err)
	}
}

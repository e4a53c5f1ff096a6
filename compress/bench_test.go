package compress

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// discard is a ResponseWriter that throws the body away, so that the
// benchmark measures the middleware and the encoder, not a recorder.
type discard struct {
	h http.Header
	n int
}

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) WriteHeader(int)             {}
func (d *discard) Write(p []byte) (int, error) { d.n += len(p); return len(p), nil }

// BenchmarkText64K serves a 64 KiB text/html response, in one write and in
// writes of 128 bytes (as templates write), through Wrap with each
// encoding, through Wrap to a client that accepts none, and without Wrap.
func BenchmarkText64K(b *testing.B) {
	body := text(64 << 10)
	for _, piece := range []int{len(body), 128} {
		handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			for p := body; len(p) > 0; p = p[min(piece, len(p)):] {
				w.Write(p[:min(piece, len(p))])
			}
		})
		benchHandlers(b, fmt.Sprintf("writes=%d", piece), body, handler)
	}
}

func benchHandlers(b *testing.B, name string, body []byte, handler http.Handler) {
	c := mustNew(b, Config{})
	for _, bb := range []struct {
		name, accept string
		h            http.Handler
	}{
		{"zstd", "zstd", c.Wrap(handler)},
		{"br", "br", c.Wrap(handler)},
		{"gzip", "gzip", c.Wrap(handler)},
		{"identity", "", c.Wrap(handler)},
		{"unwrapped", "gzip", handler},
	} {
		b.Run(name+"/"+bb.name, func(b *testing.B) {
			req := httptest.NewRequest("GET", "/", nil)
			if bb.accept != "" {
				req.Header.Set("Accept-Encoding", bb.accept)
			}
			w := &discard{h: http.Header{}}
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				clear(w.h)
				w.n = 0
				bb.h.ServeHTTP(w, req)
			}
			b.ReportMetric(float64(w.n), "wire-bytes")
		})
	}
}

// BenchmarkServe64K serves the 64 KiB page over loopback HTTP/1.1 through
// Wrap with each encoding and through stock net/http alone; the client
// reads each whole (encoded) body. ns/op is the time of one request,
// client included.
func BenchmarkServe64K(b *testing.B) {
	body := text(64 << 10)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(body)
	})
	c := mustNew(b, Config{})
	for _, bb := range []struct {
		name, accept string
		h            http.Handler
	}{
		{"zstd", "zstd", c.Wrap(handler)},
		{"br", "br", c.Wrap(handler)},
		{"gzip", "gzip", c.Wrap(handler)},
		{"stock", "gzip", handler},
	} {
		b.Run(bb.name, func(b *testing.B) {
			srv := httptest.NewServer(bb.h)
			defer srv.Close()
			client := srv.Client()
			req, _ := http.NewRequest("GET", srv.URL, nil)
			req.Header.Set("Accept-Encoding", bb.accept)
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				res, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
			}
		})
	}
}

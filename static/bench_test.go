package static_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maatproxy/maat/static"
)

// discard is a minimal ResponseWriter, so that the benchmark measures the
// handlers and not a recorder.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }
func (d *discard) WriteHeader(int)             {}

// BenchmarkFile serves a 1 KiB file through static.Handler and, for
// comparison, through http.FileServer on the same directory.
func BenchmarkFile(b *testing.B) {
	root := b.TempDir()
	if err := os.WriteFile(filepath.Join(root, "page.html"), bytes.Repeat([]byte("x"), 1024), 0o644); err != nil {
		b.Fatal(err)
	}
	h, err := static.New(static.Config{Root: root, Precompressed: true})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		h    http.Handler
		ae   string
	}{
		{"static", h, "gzip, deflate, br, zstd"},
		{"static-identity", h, ""},
		{"FileServer", http.FileServer(http.Dir(root)), "gzip, deflate, br, zstd"},
		{"FileServerFS", http.FileServerFS(os.DirFS(root)), "gzip, deflate, br, zstd"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			req := httptest.NewRequest("GET", "/page.html", nil)
			if bc.ae != "" {
				req.Header.Set("Accept-Encoding", bc.ae)
			}
			b.ReportAllocs()
			for b.Loop() {
				w := &discard{h: make(http.Header, 8)}
				bc.h.ServeHTTP(w, req)
			}
		})
	}
}

// BenchmarkFileLoopback is the same over a real HTTP/1.1 connection on
// 127.0.0.1, where the server's sendfile path counts.
func BenchmarkFileLoopback(b *testing.B) {
	root := b.TempDir()
	if err := os.WriteFile(filepath.Join(root, "page.html"), bytes.Repeat([]byte("x"), 1024), 0o644); err != nil {
		b.Fatal(err)
	}
	h, err := static.New(static.Config{Root: root, Precompressed: true})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		h    http.Handler
	}{
		{"static", h},
		{"FileServer", http.FileServer(http.Dir(root))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			srv := httptest.NewServer(bc.h)
			defer srv.Close()
			client := srv.Client()
			req, _ := http.NewRequest("GET", srv.URL+"/page.html", nil)
			b.ReportAllocs()
			for b.Loop() {
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				var buf [2048]byte
				for {
					if _, err := resp.Body.Read(buf[:]); err != nil {
						break
					}
				}
				resp.Body.Close()
			}
		})
	}
}

// BenchmarkLimitRanges measures the check the edge applies to a proxied
// request's Range header: an honest one, and the attack of sixty thousand
// suffixes (a 240 KB header, were it allowed through).
func BenchmarkLimitRanges(b *testing.B) {
	attack := "bytes=" + strings.Repeat("-1,", 59999) + "-1"
	for _, bc := range []struct{ name, v string }{
		{"honest", "bytes=0-1023,-1024"},
		{"attack", attack},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				h := http.Header{"Range": {bc.v}}
				static.LimitRanges(h, 0)
			}
		})
	}
}

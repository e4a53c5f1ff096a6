package edge

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

func TestCompression(t *testing.T) {
	t.Parallel()
	text := bytes.Repeat([]byte("All work and no play makes Jack a dull boy.\n"), 1500) // 64 KiB
	next := make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/text":
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			_, _ = w.Write(text)
		case "/small":
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write([]byte("tiny"))
		case "/png":
			w.Header().Set("Content-Type", "image/png")
			_, _ = w.Write(text)
		case "/events":
			w.Header().Set("Content-Type", "text/event-stream")
			for i := range 3 {
				fmt.Fprintf(w, "data: event %d\n\n", i)
				w.(http.Flusher).Flush()
				select {
				case <-next:
				case <-time.After(10 * time.Second):
					return
				}
			}
		}
	})
	h := newTestHandler(t, "sites: [{hosts: [localhost], upstream: "+up+"}, {hosts: [plain.localhost], upstream: "+up+", compress: false}]\n")
	c := handlerClient(h, "h2")
	fetch := func(host, path, accept string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest("GET", handlerURL(path), nil)
		req.Host = host
		req.Header.Set("Accept-Encoding", accept)
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, b
	}
	for _, tt := range []struct {
		accept, want string
	}{{"gzip", "gzip"}, {"zstd, gzip;q=0.5", "zstd"}, {"gzip;q=0, identity", ""}} {
		res, body := fetch("localhost", "/text", tt.accept)
		if got := res.Header.Get("Content-Encoding"); got != tt.want {
			t.Errorf("Accept-Encoding %q: Content-Encoding %q, want %q", tt.accept, got, tt.want)
			continue
		}
		var plain []byte
		switch tt.want {
		case "gzip":
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			plain, _ = io.ReadAll(zr)
		case "zstd":
			zr, _ := zstd.NewReader(bytes.NewReader(body))
			plain, _ = io.ReadAll(zr)
			zr.Close()
		default:
			plain = body
		}
		if !bytes.Equal(plain, text) {
			t.Errorf("%s: decompressed %d bytes differ from the original %d", tt.accept, len(plain), len(text))
		}
		if tt.want != "" && (len(body) > len(text)/4 || !strings.Contains(res.Header.Get("Vary"), "Accept-Encoding")) {
			t.Errorf("%s: %d bytes, Vary %q", tt.accept, len(body), res.Header.Get("Vary"))
		}
	}
	for _, tt := range []struct{ host, path string }{{"localhost", "/small"}, {"localhost", "/png"}, {"plain.localhost", "/text"}} {
		if res, _ := fetch(tt.host, tt.path, "gzip"); res.Header.Get("Content-Encoding") != "" {
			t.Errorf("%s%s was compressed", tt.host, tt.path)
		}
	}
	// SSE through compression still arrives event by event.
	req, _ := http.NewRequest("GET", handlerURL("/events"), nil)
	req.Host = "localhost"
	req.Header.Set("Accept-Encoding", "gzip")
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("SSE not compressed: %v", res.Header)
	}
	zr, err := gzip.NewReader(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(zr)
	for i := range 3 {
		line, err := br.ReadString('\n')
		if err != nil || line != fmt.Sprintf("data: event %d\n", i) {
			t.Fatalf("event %d: %q %v", i, line, err)
		}
		_, _ = br.ReadString('\n')
		next <- struct{}{}
	}
}

package httpfp

import (
	"net/http"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/net/http2"
)

// TestIdleMemory measures what a Conn keeps once its first request was
// taken: the per-connection cost of the tap on an idle keep-alive
// connection.
//
// It does not call t.Parallel: it reads the heap, which parallel tests
// would disturb, and non-parallel tests run alone.
func TestIdleMemory(t *testing.T) {
	cl := newH2Client()
	cl.fr.WriteSettings(http2.Setting{ID: 1, Val: 65536}, http2.Setting{ID: 2, Val: 0}, http2.Setting{ID: 4, Val: 6291456}, http2.Setting{ID: 6, Val: 262144})
	cl.fr.WriteWindowUpdate(0, 15663105)
	fields := []string{":method: GET", ":authority: example.org", ":scheme: https", ":path: /"}
	for _, l := range strings.Split(strings.TrimSuffix(chromeH1, "\r\n\r\n"), "\r\n")[3:] {
		n, v, _ := strings.Cut(l, ": ")
		fields = append(fields, strings.ToLower(n)+": "+v)
	}
	cl.headers(t, 1, fields, 1<<20, 0)
	h2wire := cl.buf.Bytes()
	tests := []struct {
		name  string
		proto Proto
		wire  []byte
		r     *http.Request
		limit uint64 // bytes per connection
	}{
		{"HTTP/1.1", H1, []byte(chromeH1), &http.Request{Method: "GET", RequestURI: "/index.html"}, 4096},
		{"HTTP/2", H2, h2wire, &http.Request{Method: "GET", Host: "example.org", RequestURI: "/"}, 8192},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const n = 2000
			conns := make([]*Conn, n)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			for i := range conns {
				c := NewConn(nil, tt.proto, Config{})
				c.feed(tt.wire)
				if _, ok := c.take(tt.r); !ok {
					t.Fatal(c.Err())
				}
				conns[i] = c
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			per := (after.HeapAlloc - before.HeapAlloc) / n
			t.Logf("%s: %d bytes per idle connection", tt.name, per)
			if per > tt.limit {
				t.Errorf("%d bytes per idle connection, want at most %d", per, tt.limit)
			}
			runtime.KeepAlive(conns)
		})
	}
}

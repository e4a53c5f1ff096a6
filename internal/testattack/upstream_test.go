package testattack

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestUpstreamCounts: the upstream tells honest requests from attack
// ones, reads bodies, serves its large response whole, and counts
// connections and the largest head.
func TestUpstreamCounts(t *testing.T) {
	t.Parallel()
	u, err := NewUpstream(200 << 10)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := u.Close(); err != nil {
			t.Error(err)
		}
	}()
	c := &http.Client{Transport: &http.Transport{}}
	for _, tt := range []struct {
		method, path, body string
		want               int64 // response length
	}{
		{"GET", "/honest/h1/1", "", 2},
		{"POST", "/upload", strings.Repeat("x", 1000), 2},
		{"GET", "/big/1", "", 200 << 10},
	} {
		req, _ := http.NewRequest(tt.method, u.URL+tt.path, strings.NewReader(tt.body))
		req.Header.Set("X-Long", strings.Repeat("y", 3000))
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if n != tt.want {
			t.Errorf("%s %s: %d bytes, want %d", tt.method, tt.path, n, tt.want)
		}
	}
	s := u.Stats()
	if s.Honest != 1 || s.Requests != 2 || s.BigInFlight != 0 {
		t.Errorf("honest %d, attack %d, large in flight %d; want 1, 2, 0", s.Honest, s.Requests, s.BigInFlight)
	}
	if s.MaxConns != 1 || s.Conns != 1 {
		t.Errorf("connections %d now, %d at most; want the one kept alive", s.Conns, s.MaxConns)
	}
	if s.MaxHeadBytes < 3000 || s.MaxHeadBytes > 3300 {
		t.Errorf("largest head %d bytes, want a little over 3000", s.MaxHeadBytes)
	}
}

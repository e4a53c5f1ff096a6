package edge

import (
	"crypto/tls"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestClientGoneNoAnswer: a client that shuts its sending side after a
// request (net/http then ends the request's context, as for a client that
// closed) gets no answer at all, never net/http's implicit empty 200, and
// the request is logged 499, without a panic in the log. With parking on
// and off.
func TestClientGoneNoAnswer(t *testing.T) {
	t.Parallel()
	for _, park := range []string{"0s", "20ms"} {
		t.Run("park_after "+park, func(t *testing.T) {
			t.Parallel()
			up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				select { // the edge's request is cancelled, or never sent
				case <-r.Context().Done():
				case <-time.After(30 * time.Second):
					t.Error("the upstream's request was never cancelled")
				}
			})
			fp := filepath.Join(t.TempDir(), "fp.jsonl")
			var logs syncBuffer
			e := startEdgeLog(t, "log: {fingerprints: "+fp+"}\nlimits: {park_after: "+park+"}\n"+
				"sites: [{hosts: [localhost], upstream: "+up+"}]\n", &logs)
			c, err := tls.Dial("tcp", e.Addrs().HTTPS, e.tlsConfig("http/1.1"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(30 * time.Second))
			if _, err := io.WriteString(c, "GET /gone HTTP/1.1\r\nHost: localhost\r\nUser-Agent: Go-http-client/1.1\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			if err := c.CloseWrite(); err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(c)
			if len(got) > 0 || err != nil {
				t.Errorf("after the client's half-close: %q, %v; want no answer, the connection closed", got, err)
			}
			if l := waitLine(t, fp, "/gone"); l["status"] != float64(499) {
				t.Errorf("logged status %v, want 499", l["status"])
			}
			if s := logs.String(); strings.Contains(s, "panic") {
				t.Errorf("the log tells of a panic:\n%s", s)
			}
		})
	}
}

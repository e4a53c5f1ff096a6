package park_test

import (
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maatproxy/maat/edge/internal/park"
)

// BenchmarkParkRequest: a request and its answer on a connection net/http
// holds ("held"), and on one parked ("parked": the Parker wakes it, reads
// its first byte and hands it back to net/http, every request, as
// wakes/op shows). The difference is what a wake costs a request; the
// wait until the connection parks is not timed.
func BenchmarkParkRequest(b *testing.B) {
	for _, tc := range []struct {
		name  string
		after time.Duration
	}{{"held", -1}, {"parked", time.Millisecond}} {
		b.Run(tc.name, func(b *testing.B) {
			var wakes atomic.Int64
			s := newServer(b, serverOpts{after: tc.after, trace: func(ev park.Event) {
				if ev.Kind == park.Woke {
					wakes.Add(1)
				}
			}, handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })})
			c, br := s.dial(b)
			_ = c.SetDeadline(time.Time{})
			req := fmt.Appendf(nil, get, "x")
			b.ReportAllocs()
			for b.Loop() {
				if tc.after > 0 {
					b.StopTimer()
					for s.pk.Parked() != 1 {
						time.Sleep(100 * time.Microsecond)
					}
					b.StartTimer()
				}
				if _, err := c.Write(req); err != nil {
					b.Fatal(err)
				}
				res, err := http.ReadResponse(br, nil)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
			}
			b.ReportMetric(float64(wakes.Load())/float64(b.N), "wakes/op")
		})
	}
}

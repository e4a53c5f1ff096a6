package testattack

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// exposition writes the series an edge exports, with the given counts.
func exposition(limited, busy, quicFailed, quicOK int) string {
	return fmt.Sprintf(`# TYPE go_goroutines gauge
go_goroutines 42
# TYPE maat_limited_total counter
maat_limited_total{limit="requests_per_client"} %d
# TYPE maat_upstream_errors_total counter
maat_upstream_errors_total{reason="upstream_busy",site="a.example"} %d
maat_upstream_errors_total{reason="upstream_busy",site="b.example"} 1
# TYPE maat_tls_handshakes_total counter
maat_tls_handshakes_total{result="failed",transport="quic"} %d
maat_tls_handshakes_total{result="ok",transport="quic"} %d
maat_tls_handshakes_total{result="failed",transport="tcp"} 7
# TYPE maat_upstream_duration_seconds histogram
maat_upstream_duration_seconds_bucket{site="a.example",le="+Inf"} 3
maat_upstream_duration_seconds_sum{site="a.example"} 0.5
maat_upstream_duration_seconds_count{site="a.example"} 3
`, limited, busy, quicFailed, quicOK)
}

func TestScrapeAndFired(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	scrape := func(text string) Metrics {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			_, _ = w.Write([]byte(text))
		}))
		defer srv.Close()
		m, err := Scrape(ctx, srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	before := scrape(exposition(0, 2, 1, 5))
	after := scrape(exposition(256, 30, 65, 90))
	if g := after.Value("go_goroutines"); g != 42 {
		t.Errorf("go_goroutines = %v", g)
	}
	if v := after.Value("maat_upstream_errors_total", "reason", "upstream_busy"); v != 31 {
		t.Errorf("upstream_busy summed over sites = %v, want 31", v)
	}
	if v := after.Value("maat_tls_handshakes_total", "transport", "quic", "result", "failed"); v != 65 {
		t.Errorf("failed QUIC handshakes = %v, want 65", v)
	}
	// The honest client's good QUIC handshakes, TCP's unchanged ones and
	// the histogram are no bound firing.
	if got, want := after.Fired(before).String(), "requests_per_client ×256, quic handshake failed ×64, upstream_busy ×28"; got != want {
		t.Errorf("Fired = %q, want %q", got, want)
	}
	if got := before.Fired(before).String(); got != "" {
		t.Errorf("Fired with no change = %q", got)
	}
}

func TestScrapeRefusal(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	if _, err := Scrape(context.Background(), srv.URL); err == nil {
		t.Error("a 404 scraped without an error")
	}
}

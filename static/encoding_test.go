package static

import (
	"net/http"
	"slices"
	"testing"
)

func TestAcceptedEncodings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ae   []string
		want []string
	}{
		{name: "none", ae: nil, want: nil},
		{name: "gzip", ae: []string{"gzip"}, want: []string{"gzip"}},
		{name: "browser", ae: []string{"gzip, deflate, br, zstd"}, want: []string{"zstd", "br", "gzip"}},
		{name: "q orders", ae: []string{"zstd;q=0.5, gzip;q=0.9, br;q=0.1"}, want: []string{"gzip", "zstd", "br"}},
		{name: "q zero refuses", ae: []string{"gzip;q=0, br"}, want: []string{"br"}},
		{name: "star", ae: []string{"*"}, want: []string{"zstd", "br", "gzip"}},
		{name: "star with refusal", ae: []string{"*;q=0.5, zstd;q=0"}, want: []string{"br", "gzip"}},
		{name: "x-gzip and case", ae: []string{"X-GZIP ; Q=0.8"}, want: []string{"gzip"}},
		{name: "several lines", ae: []string{"gzip;q=0.2", "zstd"}, want: []string{"zstd", "gzip"}},
		{name: "bad q", ae: []string{"gzip;q=2, br;q=x"}, want: nil},
		{name: "identity only", ae: []string{"identity"}, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{"Accept-Encoding": tt.ae}
			order, n := acceptedEncodings(h)
			var got []string
			for _, i := range order[:n] {
				got = append(got, encodings[i].token)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("acceptedEncodings(%q) = %q, want %q", tt.ae, got, tt.want)
			}
		})
	}
}

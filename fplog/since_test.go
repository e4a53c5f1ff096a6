package fplog

import (
	"errors"
	"testing"
	"time"
)

func TestParseSince(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want time.Duration
		bad  bool
	}{
		{in: "0", want: 0},
		{in: "90m", want: 90 * time.Minute},
		{in: "12h", want: 12 * time.Hour},
		{in: "1h30m", want: 90 * time.Minute},
		{in: "1.5h", want: 90 * time.Minute},
		{in: "500ms", want: 500 * time.Millisecond},
		{in: "1d", want: 24 * time.Hour},
		{in: "7d", want: 7 * 24 * time.Hour},
		{in: "2w", want: 14 * 24 * time.Hour},
		{in: "1.5d", want: 36 * time.Hour},
		{in: "1w2d", want: 9 * 24 * time.Hour},
		{in: "1d12h30m", want: 36*time.Hour + 30*time.Minute},
		{in: "0d", want: 0},
		{in: "15250w", want: 15250 * 7 * 24 * time.Hour},
		{in: "", bad: true},
		{in: "1", bad: true},
		{in: "d", bad: true},
		{in: "-1d", bad: true},
		{in: "+1d", bad: true},
		{in: "-1h", bad: true},
		{in: "1y", bad: true},
		{in: "1 d", bad: true},
		{in: "1D", bad: true},
		{in: "1.2.3d", bad: true},
		{in: "1.2.3h", bad: true},
		{in: ".d", bad: true},
		{in: "1d2", bad: true},
		{in: "15260w", bad: true},         // beyond a Duration
		{in: "106751d106751d", bad: true}, // each fits, the sum does not
		{in: "9999999999999h", bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseSince(tt.in)
			if tt.bad {
				if !errors.Is(err, ErrBadDuration) {
					t.Fatalf("ParseSince(%q) = %v, %v; want ErrBadDuration", tt.in, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseSince(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
		})
	}
}

// TestParseSinceGo: every duration Go's own parser reads that is not
// negative reads the same.
func TestParseSinceGo(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"0s", "1ns", "2us", "3µs", "4ms", "5s", "6m", "7h", "1h2m3s4ms5us6ns", ".5h", "1.h", "2562047h"} {
		want, err := time.ParseDuration(in)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := ParseSince(in); err != nil || got != want {
			t.Errorf("ParseSince(%q) = %v, %v; want %v as time.ParseDuration", in, got, err, want)
		}
	}
}

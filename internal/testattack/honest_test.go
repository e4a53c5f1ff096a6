package testattack

import (
	"testing"
	"time"
)

func TestPercentiles(t *testing.T) {
	t.Parallel()
	ms := func(n int) []time.Duration {
		d := make([]time.Duration, n)
		for i := range d {
			d[i] = time.Duration(i+1) * time.Millisecond
		}
		return d
	}
	for _, tt := range []struct {
		name          string
		d             []time.Duration
		p50, p99, top time.Duration
	}{
		{"one", ms(1), time.Millisecond, time.Millisecond, time.Millisecond},
		{"hundred", ms(100), 50 * time.Millisecond, 99 * time.Millisecond, 100 * time.Millisecond},
		{"thousand", ms(1000), 500 * time.Millisecond, 990 * time.Millisecond, time.Second},
		{"one slow in fifty", append(ms(49), time.Minute), 25 * time.Millisecond, time.Minute, time.Minute},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p50, p99, top := percentiles(tt.d)
			if p50 != tt.p50 || p99 != tt.p99 || top != tt.top {
				t.Errorf("percentiles = %v, %v, %v; want %v, %v, %v", p50, p99, top, tt.p50, tt.p99, tt.top)
			}
		})
	}
}

func TestLatencySlow(t *testing.T) {
	t.Parallel()
	l := Latency{ByProto: map[string][2]int{"h1": {10, 0}, "h2": {10, 2}, "h3": {9, 9}},
		SlowFrom: 200 * time.Millisecond, SlowTo: 1400 * time.Millisecond}
	if got, want := l.Slow(), "h2 2/10, h3 9/9, from 0.2 s to 1.4 s"; got != want {
		t.Errorf("Slow() = %q, want %q", got, want)
	}
	if got := (Latency{ByProto: map[string][2]int{"h1": {10, 0}}}).Slow(); got != "" {
		t.Errorf("Slow() with none slow = %q, want empty", got)
	}
}

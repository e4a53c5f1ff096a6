package testattack

import (
	"net"
	"testing"
)

func TestTallyString(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		adds map[string]int
		want string
	}{
		{"empty", nil, ""},
		{"most first", map[string]int{"408": 3, "429": 256, "held": 1}, "429 ×256, 408 ×3, held ×1"},
		{"ties by name", map[string]int{"b": 2, "a": 2}, "a ×2, b ×2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var tl Tally
			total := 0
			for k, n := range tt.adds {
				for range n {
					tl.Add(k, 1)
				}
				total += n
			}
			if got := tl.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
			if tl.Total() != total {
				t.Errorf("Total() = %d, want %d", tl.Total(), total)
			}
		})
	}
}

// TestSourcesApart: attackers never borrow the honest client's address,
// and the idle attack's 5,000 connections come from the addresses asked.
func TestSourcesApart(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for block := blockReset; block <= blockIdleH1; block++ {
		for k := range 5000 {
			ip := source(block, k)
			if ip.Equal(net.IPv4(127, 0, 0, 1)) || !ip.IsLoopback() {
				t.Fatalf("source(%d, %d) = %v", block, k, ip)
			}
			if seen[ip.String()] {
				t.Fatalf("source(%d, %d) = %v, given twice", block, k, ip)
			}
			seen[ip.String()] = true
		}
	}
}

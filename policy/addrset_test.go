package policy

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
)

// TestAddrSetAgreesWithPrefixes checks the merged ranges against
// netip.Prefix.Contains on random prefixes and addresses, both families.
func TestAddrSetAgreesWithPrefixes(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	randAddr := func(v6 bool) netip.Addr {
		if v6 {
			var b [16]byte
			b[0], b[1], b[15] = 0x20, 0x01, byte(rng.IntN(4))
			b[2] = byte(rng.IntN(4))
			return netip.AddrFrom16(b)
		}
		return netip.AddrFrom4([4]byte{10, byte(rng.IntN(4)), byte(rng.IntN(4)), byte(rng.IntN(256))})
	}
	for round := range 200 {
		var ps []netip.Prefix
		for range rng.IntN(8) + 1 {
			v6 := rng.IntN(2) == 0
			a := randAddr(v6)
			bits := 8 + rng.IntN(a.BitLen()-7)
			ps = append(ps, netip.PrefixFrom(a, bits).Masked())
		}
		s := newAddrSet(ps)
		for range 50 {
			a := randAddr(rng.IntN(2) == 0)
			want := false
			for _, p := range ps {
				want = want || p.Contains(a)
			}
			if got := s.contains(a); got != want {
				t.Fatalf("round %d: %v in %v: %v, want %v (ranges %v)", round, a, ps, got, want, s.ranges)
			}
		}
	}
}

func TestAddrSetEdges(t *testing.T) {
	t.Parallel()
	s := newAddrSet([]netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/24"), netip.MustParsePrefix("10.0.1.0/24"),
		netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("2001:db8::/32"),
	})
	tests := []struct {
		addr string
		want bool
	}{
		{"255.255.255.255", true},
		{"::ffff:1.2.3.4", true},
		{"2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", true},
		{"2001:db9::", false},
		{"::", false},
	}
	for _, tt := range tests {
		if got := s.contains(netip.MustParseAddr(tt.addr)); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.addr, got, tt.want)
		}
	}
	if s.contains(netip.Addr{}) {
		t.Error("the zero Addr is contained")
	}
}

func BenchmarkAddrSet10000(b *testing.B) {
	var ps []netip.Prefix
	for i := range 10000 {
		ps = append(ps, netip.MustParsePrefix(fmt.Sprintf("10.%d.%d.0/24", i/256, i%256*0+i%200)))
	}
	s := newAddrSet(ps)
	a := netip.MustParseAddr("192.0.2.1")
	b.ReportAllocs()
	for b.Loop() {
		s.contains(a)
	}
}

package policy

import (
	"net/netip"
	"slices"
)

// addrSet is a set of address prefixes as sorted, merged ranges, so that a
// rule holding thousands of prefixes (a cloud's published ranges) is
// checked by binary search rather than one prefix at a time.
type addrSet struct {
	ranges []addrRange // sorted by from, not overlapping
}

type addrRange struct{ from, to netip.Addr }

// lastAddr returns the last address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

func newAddrSet(ps []netip.Prefix) addrSet {
	rs := make([]addrRange, 0, len(ps))
	for _, p := range ps {
		p = p.Masked()
		rs = append(rs, addrRange{p.Addr(), lastAddr(p)})
	}
	slices.SortFunc(rs, func(a, b addrRange) int { return a.from.Compare(b.from) })
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 && out[n-1].from.BitLen() == r.from.BitLen() &&
			(r.from.Compare(out[n-1].to) <= 0 || out[n-1].to.Next() == r.from) {
			if r.to.Compare(out[n-1].to) > 0 {
				out[n-1].to = r.to
			}
			continue
		}
		out = append(out, r)
	}
	return addrSet{ranges: out}
}

func (s *addrSet) empty() bool { return len(s.ranges) == 0 }

// contains reports whether a (IPv4-mapped IPv6 read as IPv4) is in the set.
func (s *addrSet) contains(a netip.Addr) bool {
	if !a.IsValid() {
		return false
	}
	a = a.Unmap()
	// The first range starting after a; the one before it may hold a.
	i, _ := slices.BinarySearchFunc(s.ranges, a, func(r addrRange, a netip.Addr) int {
		if r.from.Compare(a) <= 0 {
			return -1
		}
		return 1
	})
	if i == 0 {
		return false
	}
	r := s.ranges[i-1]
	return r.from.BitLen() == a.BitLen() && a.Compare(r.to) <= 0
}

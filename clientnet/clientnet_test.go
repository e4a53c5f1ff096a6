package clientnet

import (
	"net/netip"
	"testing"
)

func TestPrefix(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, addr, want string
	}{
		{"ipv4", "203.0.113.77", "203.0.113.0/24"},
		{"ipv4 network address", "203.0.113.0", "203.0.113.0/24"},
		{"ipv4-mapped", "::ffff:203.0.113.77", "203.0.113.0/24"},
		{"ipv6", "2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"},
		{"ipv6 zone dropped", "fe80::1%eth0", "fe80::/64"},
		{"loopback v6", "::1", "::/64"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Prefix(netip.MustParseAddr(tt.addr)); got.String() != tt.want {
				t.Errorf("Prefix(%s) = %s, want %s", tt.addr, got, tt.want)
			}
		})
	}
	if p := Prefix(netip.Addr{}); p.IsValid() {
		t.Errorf("Prefix(zero) = %v, want the zero Prefix", p)
	}
}

func TestPrefixDoesNotAllocate(t *testing.T) {
	a := netip.MustParseAddr("2001:db8::1")
	if n := testing.AllocsPerRun(100, func() { Prefix(a) }); n != 0 {
		t.Errorf("Prefix allocates %v times", n)
	}
}

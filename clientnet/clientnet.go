// Package clientnet names the network a client is counted by: the one fact
// about a client's address that the policy (rate keys), the challenge (what
// a pass is bound to) and the logs (client_ip: prefix) must agree on.
//
// An IPv4 client is its /24 and an IPv6 client its /64, the smallest
// network an ISP hands one household (RFC 6177 recommends /56 or /48 for
// sites, RFC 4291's interface identifiers make /64 the least a host is
// given). An IPv4-mapped IPv6 address counts as the IPv4 address it maps.
package clientnet

import "net/netip"

// Bits of the network a client is counted by.
const (
	IPv4Bits = 24
	IPv6Bits = 64
)

// Prefix returns the network a is counted by: its /24 for IPv4 (and
// IPv4-mapped IPv6), its /64 for IPv6, with the zone dropped. It returns the
// zero Prefix for the zero Addr.
func Prefix(a netip.Addr) netip.Prefix {
	a = a.Unmap().WithZone("")
	bits := IPv6Bits
	if a.Is4() {
		bits = IPv4Bits
	}
	p, err := a.Prefix(bits)
	if err != nil {
		return netip.Prefix{}
	}
	return p
}

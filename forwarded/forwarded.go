// Package forwarded finds a request's client behind trusted proxies, from
// the proxies' X-Forwarded-For: the right-most node that is not itself a
// trusted proxy. A node is read as RFC 7239, section 6, writes it (in
// Forwarded, and as proxies write it in X-Forwarded-For too): an address,
// with or without a port, IPv6 bare or in brackets, quoted or not; or a
// client the proxy would not name ("unknown", or "_" and an obfuscated
// identifier, section 6.3), which is counted by an address of its own in
// RFC 6666's discard-only prefix 100::/64 (Hidden).
//
// forwarded imports no package of this module.
package forwarded

import (
	"encoding/binary"
	"hash/fnv"
	"net/netip"
	"strings"
)

// Proxies holds the prefixes whose X-Forwarded-For is believed.
type Proxies []netip.Prefix

// Contains reports whether a is one of the proxies.
func (p Proxies) Contains(a netip.Addr) bool {
	for _, pre := range p {
		if pre.Contains(a) {
			return true
		}
	}
	return false
}

// Client returns the client's address: peer (the socket peer, after a
// PROXY protocol header, if any), or, when peer is a trusted proxy, the
// right-most node of xff (the X-Forwarded-For lines, in order) that is not
// itself a trusted proxy. ok is false when that search meets a node that
// is neither an address nor a hidden client (garbage): the proxy is not to
// be believed, and the trusted proxy itself is never taken for the client
// of a request it forwarded for someone else.
func (p Proxies) Client(peer netip.Addr, xff []string) (client netip.Addr, ok bool) {
	if len(p) == 0 || !p.Contains(peer) {
		return peer, true
	}
	client = peer
	for i := len(xff) - 1; i >= 0; i-- {
		list := xff[i]
		for list != "" {
			j := strings.LastIndexByte(list, ',')
			item := strings.TrimSpace(list[j+1:])
			list = list[:max(j, 0)]
			if j < 0 {
				list = ""
			}
			if item == "" {
				continue // "a, , b": an empty element, as RFC 9110's list syntax allows
			}
			a, ok := node(item)
			if !ok {
				return peer, false
			}
			client = a
			if !p.Contains(client) {
				return client, true
			}
		}
	}
	return client, true
}

// node parses one node of a forwarding header: an address with an
// optional port, or a hidden client ("unknown", "_token").
func node(s string) (netip.Addr, bool) {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
		return a.Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil && ap.Addr().Zone() == "" {
		return ap.Addr().Unmap(), true
	}
	if len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']' {
		if a, err := netip.ParseAddr(s[1 : len(s)-1]); err == nil && a.Is6() && a.Zone() == "" {
			return a.Unmap(), true
		}
		return netip.Addr{}, false
	}
	if strings.EqualFold(s, "unknown") || obfuscated(s) {
		return Hidden(s), true
	}
	return netip.Addr{}, false
}

// obfuscated reports whether s is RFC 7239's obfnode:
// "_" 1*( ALPHA / DIGIT / "." / "_" / "-" ), at most 64 characters.
func obfuscated(s string) bool {
	if len(s) < 2 || len(s) > 64 || s[0] != '_' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Hidden is the address a hidden client ("unknown", or an obfuscated
// identifier) is counted by: 100::/64, RFC 6666's discard-only prefix,
// with an FNV-1a hash of its identifier (case folded) below, so that each
// is counted apart from the proxy and from every named client.
func Hidden(id string) netip.Addr {
	h := fnv.New64a()
	_, _ = h.Write([]byte(strings.ToLower(id)))
	var b [16]byte
	b[0] = 0x01
	binary.BigEndian.PutUint64(b[8:], h.Sum64())
	return netip.AddrFrom16(b)
}

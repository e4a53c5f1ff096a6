package edge

import (
	"encoding/binary"
	"hash/fnv"
	"net/netip"
	"strings"
)

// trustedProxies holds the CIDRs whose X-Forwarded-For is believed.
type trustedProxies []netip.Prefix

func (t trustedProxies) contains(a netip.Addr) bool {
	for _, p := range t {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// clientAddr returns the client's address: the socket peer (after a PROXY
// protocol header, if any), or, when the peer is a trusted proxy, the
// right-most node of X-Forwarded-For that is not itself a trusted proxy.
// A node is an address, with or without a port, IPv6 bare or in brackets,
// quoted or not (RFC 7239, section 6, as proxies write it in
// X-Forwarded-For too). A node that names no address — "unknown" or an
// obfuscated identifier ("_" and a token, RFC 7239, section 6.3) — is a
// client the proxy would not name: it gets an address of its own in the
// discard-only prefix 100::/64 (RFC 6666), one per identifier, so that it
// is counted apart from the proxy and from every named client. ok is false
// when the node is neither (garbage): the proxy is not to be believed, and
// the trusted proxy itself is never taken for the client of a request it
// forwarded for someone else.
func (t trustedProxies) clientAddr(peer netip.Addr, xff []string) (client netip.Addr, ok bool) {
	if len(t) == 0 || !t.contains(peer) {
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
			a, ok := forwardedNode(item)
			if !ok {
				return peer, false
			}
			client = a
			if !t.contains(client) {
				return client, true
			}
		}
	}
	return client, true
}

// forwardedNode parses one node of a forwarding header: an address with
// an optional port, or a hidden client ("unknown", "_token").
func forwardedNode(s string) (netip.Addr, bool) {
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
	if strings.EqualFold(s, "unknown") || obfuscatedNode(s) {
		return hiddenClient(s), true
	}
	return netip.Addr{}, false
}

// obfuscatedNode reports whether s is RFC 7239's obfnode:
// "_" 1*( ALPHA / DIGIT / "." / "_" / "-" ), at most 64 characters.
func obfuscatedNode(s string) bool {
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

// hiddenClient is the address a hidden client is counted by: 100::/64,
// RFC 6666's discard-only prefix, with an FNV-1a hash of its identifier
// (case folded) below.
func hiddenClient(id string) netip.Addr {
	h := fnv.New64a()
	_, _ = h.Write([]byte(strings.ToLower(id)))
	var b [16]byte
	b[0] = 0x01
	binary.BigEndian.PutUint64(b[8:], h.Sum64())
	return netip.AddrFrom16(b)
}

// peerAddr parses http.Request.RemoteAddr ("ip:port").
func peerAddr(remote string) netip.Addr {
	if ap, err := netip.ParseAddrPort(remote); err == nil {
		return ap.Addr().Unmap()
	}
	a, _ := netip.ParseAddr(remote)
	return a.Unmap()
}

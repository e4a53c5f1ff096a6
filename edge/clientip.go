package edge

import (
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
// right-most address of X-Forwarded-For that is not itself trusted.
func (t trustedProxies) clientAddr(peer netip.Addr, xff []string) netip.Addr {
	if len(t) == 0 || !t.contains(peer) {
		return peer
	}
	client := peer
	for i := len(xff) - 1; i >= 0; i-- {
		list := xff[i]
		for list != "" {
			j := strings.LastIndexByte(list, ',')
			item := strings.TrimSpace(list[j+1:])
			list = list[:max(j, 0)]
			if j < 0 {
				list = ""
			}
			a, err := netip.ParseAddr(item)
			if err != nil {
				return client // garbage: stop at the last address we could believe
			}
			client = a.Unmap()
			if !t.contains(client) {
				return client
			}
		}
	}
	return client
}

// peerAddr parses http.Request.RemoteAddr ("ip:port").
func peerAddr(remote string) netip.Addr {
	if ap, err := netip.ParseAddrPort(remote); err == nil {
		return ap.Addr().Unmap()
	}
	a, _ := netip.ParseAddr(remote)
	return a.Unmap()
}

package edge

import (
	"net/netip"
	"sync"
)

// seenAddrs remembers client addresses that proved they receive what is
// sent to them lately: a TLS handshake over TCP or QUIC completed from
// there. While QUIC handshakes pile up, a new QUIC connection from such an
// address skips the Retry round trip (RFC 9000, section 8.1: a server may
// take an address as validated by an earlier connection): a browser's
// first HTTP/3 connection follows its TCP one (Alt-Svc), and a returning
// visitor's follows its last. quic-go answers Retries from a queue eight
// deep and drops the Initials that find it full; during a flood of
// Initials an honest client lost its first flight there and waited out
// its retransmission timer (about 200 ms). A spoofed flood that borrows a
// seen address holds at most twice limits.quic_handshakes in progress
// (beyond, every new client answers a Retry again), and the
// anti-amplification limit still bounds what the edge sends to an address
// before the handshake validates it.
//
// Two generations of at most seenPerGen addresses each: when the newer
// fills, the older is dropped.
type seenAddrs struct {
	mu       sync.Mutex
	cur, old map[netip.Addr]struct{}
}

const seenPerGen = 16384

func newSeenAddrs() *seenAddrs {
	return &seenAddrs{cur: map[netip.Addr]struct{}{}, old: map[netip.Addr]struct{}{}}
}

func (s *seenAddrs) add(a netip.Addr) {
	a = a.Unmap()
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.cur[a]; ok {
		return
	}
	if len(s.cur) >= seenPerGen {
		s.old, s.cur = s.cur, make(map[netip.Addr]struct{}, seenPerGen)
	}
	s.cur[a] = struct{}{}
}

func (s *seenAddrs) has(a netip.Addr) bool {
	a = a.Unmap()
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.cur[a]; ok {
		return true
	}
	_, ok := s.old[a]
	return ok
}

package fplog

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"net/netip"

	"github.com/maatproxy/maat/clientnet"
)

// Client address modes, for Config.ClientIP.
const (
	ClientIPFull   = "full"   // the address as it is
	ClientIPPrefix = "prefix" // the /24 (IPv4) or /64 (IPv6) network, in CIDR notation
	ClientIPHash   = "hash"   // HMAC-SHA-256 of the address under Config.HashKey, 24 hex digits
	ClientIPNone   = "none"   // no address
)

// MinHashKeyBytes is the shortest Config.HashKey accepted.
const MinHashKeyBytes = 16

// hashHexDigits is the length of a hashed address: 96 bits, so that the
// 2^32 IPv4 addresses do not collide.
const hashHexDigits = 24

// addrEncoder writes client addresses as a mode says. Its HMAC is reused
// from line to line, so it serves one goroutine: a log's writing goroutine.
type addrEncoder struct {
	mode string
	mac  hash.Hash // ClientIPHash only
	in   [16]byte  // fields, not locals, which would escape into mac
	sum  [sha256.Size]byte
}

// newAddrEncoder returns an addrEncoder for a validated mode ("" is full)
// and, for ClientIPHash, its key.
func newAddrEncoder(mode string, key []byte) *addrEncoder {
	a := &addrEncoder{mode: orDefault(mode, ClientIPFull)}
	if a.mode == ClientIPHash {
		a.mac = hmac.New(sha256.New, key)
	}
	return a
}

// appendJSON appends remote_ip for addr, or nothing if it is left out. The
// bytes it appends are digits, hex digits, '.', ':' and '/': nothing that a
// JSON string or a log field would escape.
func (a *addrEncoder) appendJSON(dst []byte, addr netip.Addr) []byte {
	if !addr.IsValid() {
		return dst
	}
	addr = addr.Unmap().WithZone("")
	switch a.mode {
	case ClientIPPrefix:
		return clientnet.Prefix(addr).AppendTo(dst)
	case ClientIPHash:
		a.mac.Reset()
		a.in = addr.As16()
		a.mac.Write(a.in[:])
		return hex.AppendEncode(dst, a.mac.Sum(a.sum[:0])[:hashHexDigits/2])
	case ClientIPNone:
		return dst
	default:
		return addr.AppendTo(dst)
	}
}

// appendCombined appends the client address of a Combined Log Format line,
// or nothing if it is left out ("-" is written then). The prefix mode writes
// the network's first address without its length ("203.0.113.0"), as anonip
// and Apache's mod_log_ipmask do, so that the readers that want an address
// (GoAccess) still find one.
func (a *addrEncoder) appendCombined(dst []byte, addr netip.Addr) []byte {
	if a.mode != ClientIPPrefix || !addr.IsValid() {
		return a.appendJSON(dst, addr)
	}
	return clientnet.Prefix(addr.Unmap().WithZone("")).Addr().AppendTo(dst)
}

// FormatAddr returns addr as a log whose Config.ClientIP is mode writes it
// ("" when the mode leaves it out), key being ClientIPHash's; for the few
// addresses a page shows, not for a log's lines.
func FormatAddr(mode string, key []byte, addr netip.Addr) string {
	return string(newAddrEncoder(mode, key).appendJSON(nil, addr))
}

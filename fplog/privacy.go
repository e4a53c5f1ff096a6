package fplog

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
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

// clientIP returns remote_ip for addr in the given mode; "" leaves it out.
func clientIP(mode string, key []byte, addr netip.Addr) string {
	if !addr.IsValid() {
		return ""
	}
	addr = addr.Unmap().WithZone("")
	switch mode {
	case ClientIPPrefix:
		return clientnet.Prefix(addr).String()
	case ClientIPHash:
		mac := hmac.New(sha256.New, key)
		b := addr.As16()
		mac.Write(b[:])
		return hex.EncodeToString(mac.Sum(nil))[:hashHexDigits]
	case ClientIPNone:
		return ""
	default:
		return addr.String()
	}
}

// combinedHost returns the client address of a Combined Log Format line in
// the given mode; "" is written "-". The prefix mode writes the network's
// first address without its length ("203.0.113.0"), as anonip and Apache's
// mod_log_ipmask do, so that the readers that want an address (GoAccess)
// still find one.
func combinedHost(mode string, key []byte, addr netip.Addr) string {
	if mode != ClientIPPrefix || !addr.IsValid() {
		return clientIP(mode, key, addr)
	}
	return clientnet.Prefix(addr).Addr().String()
}

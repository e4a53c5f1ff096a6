package challenge

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash"
	"sync"
	"time"

	"golang.org/x/crypto/cryptobyte"
)

// ErrTokenMalformed reports an undecodable, truncated or tampered challenge
// token. (An expired, replayed or foreign-bound token decodes; /.maat/pass
// refuses it with its own reason.)
var ErrTokenMalformed = errors.New("challenge: malformed token")

const (
	tokenVersion = 2 // 2: the kind (PoW or wait) and a 16-bit wait
	kindPoW      = 1 // redeemed only with its nonces
	kindWait     = 2 // redeemed only without nonces, once its wait is over
	maxTokenLen  = 1024
	maxRuleLen   = 128
	macLen       = sha256.Size
)

// token is a decoded challenge token. A PoW token has bits, k sub-puzzles
// and no wait; a wait token has a wait and neither bits nor sub-puzzles
// (k is 1), so that neither can stand in for the other.
type token struct {
	kind    uint8
	bits    uint8  // PoW: leading zero bits; wait: 0
	k       uint8  // PoW: sub-puzzles, a power of two; wait: 1
	wait    uint16 // wait: seconds from issue until it may be redeemed; PoW: 0
	issued  int64  // Unix seconds
	expires int64  // Unix seconds
	bind    binding
	random  [16]byte
	rule    string
	mac     [macLen]byte
}

// subBits is the number of leading zero bits each sub-puzzle needs.
func (t *token) subBits() int {
	lg := 0
	for k := t.k; k > 1; k >>= 1 {
		lg++
	}
	return int(t.bits) - lg
}

// seed is the 64-byte PoW prefix: the hexadecimal MAC.
func (t *token) seed() string { return hex.EncodeToString(t.mac[:]) }

// markKey names the token's single-use mark.
func (t *token) markKey() string { return "maat:tok:" + hex.EncodeToString(t.mac[:16]) }

// spec is what the token proves once redeemed: a proof of work of its bits,
// or a wait.
func (t *token) spec() Spec {
	if t.kind == kindWait {
		return Spec{Algorithm: "metarefresh", Rule: t.rule, Wait: time.Duration(t.wait) * time.Second}
	}
	return Spec{Algorithm: "pow", Bits: int(t.bits), Rule: t.rule}
}

// need is what a pass cookie must show to stand for this token's pass (a
// second redemption by the browser that already holds the cookie).
func (t *token) need() Need {
	if t.kind == kindWait {
		return Need{Wait: true}
	}
	return Need{Bits: int(t.bits)}
}

// subPuzzles chooses k for a difficulty: more sub-puzzles cut the slow
// tail (the standard deviation of the work falls as 1/√k).
func subPuzzles(bits int) uint8 {
	switch {
	case bits >= 16:
		return 8
	case bits >= 10:
		return 4
	}
	return 1
}

// macPool holds keyed HMAC-SHA-256 states.
type macPool struct{ p sync.Pool }

func newMACPool(key []byte) *macPool {
	m := &macPool{}
	m.p.New = func() any { return hmac.New(sha256.New, key) }
	return m
}

func (m *macPool) sum(dst, msg []byte) []byte {
	h := m.p.Get().(hash.Hash)
	h.Reset()
	h.Write(msg)
	dst = h.Sum(dst)
	m.p.Put(h)
	return dst
}

// marshal encodes and signs t, filling t.mac. It writes the token in one
// buffer (under flood every page signs two): the fields, the MAC after
// them, then base64.
func (t *token) marshal(keys *macPool) string {
	if len(t.rule) > 255 {
		panic("challenge: rule name longer than 255 bytes") // as cryptobyte's length prefix refuses it
	}
	var raw [maxRawToken]byte
	b := append(raw[:0], tokenVersion, t.kind, t.bits, t.k)
	b = binary.BigEndian.AppendUint16(b, t.wait)
	b = binary.BigEndian.AppendUint64(b, uint64(t.issued))
	b = binary.BigEndian.AppendUint64(b, uint64(t.expires))
	b = append(b, t.bind.net[:]...)
	b = append(b, t.bind.ja4[:]...)
	b = append(b, t.bind.transport)
	b = append(b, t.random[:]...)
	b = append(b, byte(len(t.rule)))
	b = append(b, t.rule...)
	n := len(b)
	b = keys.sum(b, b[:n])
	copy(t.mac[:], b[n:])
	var enc [(maxRawToken*4 + 2) / 3]byte
	m := base64.RawURLEncoding.EncodedLen(len(b))
	base64.RawURLEncoding.Encode(enc[:m], b)
	return string(enc[:m])
}

// maxRawToken bounds a token's bytes: the fixed fields, a rule name of at
// most 255 bytes and the MAC.
const maxRawToken = 4 + 2 + 8 + 8 + 8 + 8 + 1 + 16 + 1 + 255 + macLen

// parseToken decodes s and checks its MAC. It does not check expiry or
// binding.
func parseToken(s string, keys *macPool) (token, error) {
	var t token
	if len(s) > maxTokenLen {
		return t, ErrTokenMalformed
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(raw) < macLen {
		return t, ErrTokenMalformed
	}
	body, mac := raw[:len(raw)-macLen], raw[len(raw)-macLen:]
	var want [macLen]byte
	if !hmac.Equal(keys.sum(want[:0], body), mac) {
		return t, ErrTokenMalformed
	}
	in := cryptobyte.String(body)
	var version uint8
	var issued, expires uint64
	var rule cryptobyte.String
	if !in.ReadUint8(&version) || version != tokenVersion ||
		!in.ReadUint8(&t.kind) || !in.ReadUint8(&t.bits) || !in.ReadUint8(&t.k) || !in.ReadUint16(&t.wait) ||
		!in.ReadUint64(&issued) || !in.ReadUint64(&expires) ||
		!in.CopyBytes(t.bind.net[:]) || !in.CopyBytes(t.bind.ja4[:]) || !in.ReadUint8(&t.bind.transport) ||
		!in.CopyBytes(t.random[:]) ||
		!in.ReadUint8LengthPrefixed(&rule) || !in.Empty() {
		return t, ErrTokenMalformed
	}
	if !t.wellFormed() {
		return t, ErrTokenMalformed
	}
	t.issued, t.expires, t.rule = int64(issued), int64(expires), string(rule)
	copy(t.mac[:], mac)
	return t, nil
}

// wellFormed reports whether t's fields fit its kind. (Only this package
// signs tokens, so a token that fails is a bug, not an attack; checking
// keeps every use of the fields in range all the same.)
func (t *token) wellFormed() bool {
	switch t.kind {
	case kindPoW:
		return t.wait == 0 && t.k != 0 && t.k&(t.k-1) == 0 && t.bits <= MaxBits && t.subBits() >= 0 && t.subBits() <= 32
	case kindWait:
		return t.bits == 0 && t.k == 1 && t.wait != 0
	}
	return false
}

// binding is what a token is bound to: a digest of the client's IP prefix,
// one of its JA4, and the JA4's transport letter ("t" TCP, "q" QUIC; 0 when
// the JA4 is unknown or not bound). The digests are 8 bytes each: they
// tell clients apart, they keep no secret.
type binding struct {
	net, ja4  [8]byte
	transport uint8
}

// bindingOf digests the binding of cl under the flags b.
func bindingOf(b Binding, cl Client) binding {
	var out binding
	if b&BindIPPrefix != 0 {
		p := cl.prefix()
		a := p.Addr().As16()
		h := sha256.New()
		h.Write(a[:])
		h.Write([]byte{byte(p.Bits())})
		copy(out.net[:], h.Sum(nil))
	}
	if b&BindJA4 != 0 && cl.JA4 != "" {
		sum := sha256.Sum256([]byte(cl.JA4))
		copy(out.ja4[:], sum[:])
		out.transport = cl.JA4[0]
	}
	return out
}

// boundTo reports whether a token bound to t was issued to the client
// whose binding is now. As for pass cookies (sameJA4), a JA4 is compared
// only within one transport: the browser that was challenged over TCP
// may redeem over QUIC (HTTP/3 after Alt-Svc); the IP prefix still binds.
func (t binding) boundTo(now binding) bool {
	if t.net != now.net {
		return false
	}
	if t.transport == 0 || now.transport == 0 || t.transport != now.transport {
		return true
	}
	return t.ja4 == now.ja4
}

// Token is what a challenge token says, as ParseToken decodes it.
type Token struct {
	Kind       string        // MethodPoW or MethodWait
	Bits       int           // PoW: the leading zero bits asked for; wait: 0
	SubPuzzles int           // PoW: the puzzles the bits are split into; wait: 1
	Wait       time.Duration // wait: from Issued until it may be redeemed; PoW: 0
	Issued     time.Time
	Expires    time.Time
	Rule       string
}

// ParseToken checks a challenge token's signature and decodes it; any
// undecodable or altered token gives ErrTokenMalformed. It checks neither
// expiry, nor binding, nor single use: /.maat/pass does.
func (c *Challenger) ParseToken(s string) (Token, error) {
	t, err := parseToken(s, c.tokenKeys)
	if err != nil {
		return Token{}, err
	}
	kind := MethodPoW
	if t.kind == kindWait {
		kind = MethodWait
	}
	return Token{
		Kind:       kind,
		Bits:       int(t.bits),
		SubPuzzles: int(t.k),
		Wait:       time.Duration(t.wait) * time.Second,
		Issued:     unixTime(t.issued),
		Expires:    unixTime(t.expires),
		Rule:       t.rule,
	}, nil
}

func unixTime(s int64) time.Time { return time.Unix(s, 0) }

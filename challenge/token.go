package challenge

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"hash"
	"sync"
	"time"

	"golang.org/x/crypto/cryptobyte"
)

// ErrTokenMalformed reports an undecodable, truncated or tampered challenge
// token. (An expired, replayed or foreign-bound token is not an error: the
// visitor gets a fresh challenge.)
var ErrTokenMalformed = errors.New("challenge: malformed token")

const (
	tokenVersion = 1
	algPoW       = 1
	algRefresh   = 2
	maxTokenLen  = 1024
	maxRuleLen   = 128
	macLen       = sha256.Size
)

// token is a decoded challenge token.
type token struct {
	alg     uint8
	bits    uint8
	k       uint8 // sub-puzzles, a power of two
	wait    uint8 // seconds
	issued  int64 // Unix seconds
	expires int64 // Unix seconds
	bind    [16]byte
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

func (t *token) spec() Spec {
	alg := "pow"
	if t.alg == algRefresh {
		alg = "metarefresh"
	}
	return Spec{Algorithm: alg, Bits: int(t.bits), Rule: t.rule}
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

// marshal encodes and signs t, filling t.mac.
func (t *token) marshal(keys *macPool) string {
	var b cryptobyte.Builder
	b.AddUint8(tokenVersion)
	b.AddUint8(t.alg)
	b.AddUint8(t.bits)
	b.AddUint8(t.k)
	b.AddUint8(t.wait)
	b.AddUint64(uint64(t.issued))
	b.AddUint64(uint64(t.expires))
	b.AddBytes(t.bind[:])
	b.AddBytes(t.random[:])
	b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes([]byte(t.rule)) })
	body := b.BytesOrPanic()
	mac := keys.sum(nil, body)
	copy(t.mac[:], mac)
	out := make([]byte, 0, len(body)+macLen)
	out = append(append(out, body...), mac...)
	return base64.RawURLEncoding.EncodeToString(out)
}

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
		!in.ReadUint8(&t.alg) || !in.ReadUint8(&t.bits) || !in.ReadUint8(&t.k) || !in.ReadUint8(&t.wait) ||
		!in.ReadUint64(&issued) || !in.ReadUint64(&expires) ||
		!in.CopyBytes(t.bind[:]) || !in.CopyBytes(t.random[:]) ||
		!in.ReadUint8LengthPrefixed(&rule) || !in.Empty() {
		return t, ErrTokenMalformed
	}
	if (t.alg != algPoW && t.alg != algRefresh) || t.k == 0 || t.k&(t.k-1) != 0 || t.bits > MaxBits || t.subBits() < 0 || t.subBits() > 32 {
		return t, ErrTokenMalformed
	}
	t.issued, t.expires, t.rule = int64(issued), int64(expires), string(rule)
	copy(t.mac[:], mac)
	return t, nil
}

// bindHash digests the binding of cl under the configured flags.
func bindHash(b Binding, cl Client) [16]byte {
	h := sha256.New()
	if b&BindIPPrefix != 0 {
		p := cl.prefix()
		a := p.Addr().As16()
		h.Write(a[:])
		h.Write([]byte{byte(p.Bits())})
	}
	h.Write([]byte{0})
	if b&BindJA4 != 0 {
		h.Write([]byte(cl.JA4))
	}
	var out [16]byte
	copy(out[:], h.Sum(nil))
	return out
}

func unixTime(s int64) time.Time { return time.Unix(s, 0) }

package testattack

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"net/netip"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/maatproxy/maat/challenge"
)

// Challenge is what an edge's challenge page asks: a proof of work to
// solve and the URL that redeems it for a pass cookie. The storm
// benchmark (bench/storm) reads it to let its people earn their passes
// as a browser would, from the page, without JavaScript.
type Challenge struct{ p challengePage }

// ParseChallenge reads a challenge page's body; ok is false when it asks
// no proof of work (not a challenge page, or a deny page).
func ParseChallenge(body string) (c Challenge, ok bool) {
	c.p = parseChallenge(body)
	return c, c.p.pass != "" && c.p.seed != ""
}

// Bits is the proof of work the page asks, in bits.
func (c Challenge) Bits() int { return c.p.total() }

// Solve solves the proof of work (at most maxBits in all) and returns the
// request target that redeems it: a 303 with the pass cookie.
func (c Challenge) Solve(ctx context.Context, maxBits int) (string, error) {
	if c.p.pass == "" {
		return "", fmt.Errorf("testattack: no proof of work to solve")
	}
	n, err := c.p.solve(ctx, maxBits)
	if err != nil {
		return "", err
	}
	return c.p.pass + "&n=" + n, nil
}

// Pass is what a minted pass cookie says: a proof of work of Bits, bound
// as the edge binds passes by default (challenge.BindIPPrefix|BindJA4) to
// Net (the client's /24 or /64) and JA4 (the JA4 of the client's full
// handshake, tlsfp.Fingerprint.JA4Session) with its Family, under the
// policy whose Version is Policy.
type Pass struct {
	Net         netip.Prefix
	JA4, Family string
	Bits        int
	Policy      string
	TTL         time.Duration
}

// MintPass signs p as the edge holding secret (challenge.secret_file's
// bytes) signs a pass cookie with HS256 (challenge.Config without a
// SigningKey), and returns the cookie's value: what the storm benchmark's
// people hold when they come back, whatever the front's challenge.when.
// TestMintPass keeps it honest against challenge.Challenger.Check.
func MintPass(secret []byte, p Pass, now time.Time) (string, error) {
	if len(secret) < challenge.MinSecretLen {
		return "", fmt.Errorf("testattack: a secret of %d bytes, want at least %d", len(secret), challenge.MinSecretLen)
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("maat pass cookie v1")) // challenge's deriveKey
	claims := jwt.MapClaims{
		"iat": now.Unix(), "exp": now.Add(p.TTL).Unix(),
		"method": challenge.MethodPoW, "bits": p.Bits,
	}
	if p.Net.IsValid() {
		claims["net"] = p.Net.String()
	}
	if p.JA4 != "" {
		claims["ja4"] = p.JA4
	}
	if p.Family != "" {
		claims["fam"] = p.Family
	}
	if p.Policy != "" {
		claims["pv"] = p.Policy
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(m.Sum(nil))
}

package testattack

import (
	"context"
	"fmt"
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

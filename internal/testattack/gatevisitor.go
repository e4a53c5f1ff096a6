package testattack

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"html"
	"math/bits"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	utls "github.com/refraction-networking/utls"

	"github.com/maatproxy/maat/challenge"
)

// A visitor earns, keeps and shows a pass cookie as a browser would, and
// as an attacker replaying it would: the proof of work is solved here, in
// the attacker, as any scraper can.

// ChromeHeaders are the header fields Chrome sends on a navigation, in its
// order (Chrome 133 on Windows), but for Accept-Encoding, which offers
// only what the gate attacks decode.
var ChromeHeaders = [][2]string{
	{"sec-ch-ua", `"Not(A:Brand";v="99", "Google Chrome";v="133", "Chromium";v="133"`},
	{"sec-ch-ua-mobile", "?0"},
	{"sec-ch-ua-platform", `"Windows"`},
	{"upgrade-insecure-requests", "1"},
	{"user-agent", "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/133.0.0.0 Safari/537.36"},
	{"accept", "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8"},
	{"sec-fetch-site", "none"},
	{"sec-fetch-mode", "navigate"},
	{"sec-fetch-user", "?1"},
	{"sec-fetch-dest", "document"},
	{"accept-encoding", "gzip, deflate"},
	{"accept-language", "en-US,en;q=0.9"},
}

// firefoxHeaders are a Firefox navigation's main fields, sent by a
// client whose TLS stack is not Firefox's.
var firefoxHeaders = [][2]string{
	{"User-Agent", "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"},
	{"Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"},
	{"Accept-Language", "en-US,en;q=0.5"},
}

// visitor is one client: how it connects and what it sends (base, whose
// Target and Method are set per request), and the pass it holds.
type visitor struct {
	t      Target
	base   GateRequest
	cookie string // the pass cookie's value
}

// chromeVisitor is Chrome down to the wire: utls's Chrome 133 ClientHello,
// Chrome's HTTP/2 and header order.
func chromeVisitor(t Target, block, k int) *visitor {
	id := utls.HelloChrome_133
	return &visitor{t: t, base: GateRequest{Proto: "h2", From: source(block, k), Parrot: &id, H2: &ChromeH2, Header: ChromeHeaders}}
}

// get sends a GET for target with the pass cookie, if any, and keeps a
// pass cookie the answer sets.
func (v *visitor) get(ctx context.Context, target string) (Answer, error) {
	r := v.base
	r.Target = target
	r.Header = slices.Clone(v.base.Header)
	if v.cookie != "" {
		r.Header = append(r.Header, [2]string{"cookie", challenge.CookieName + "=" + v.cookie})
	}
	a, err := v.t.Send(ctx, r)
	if err != nil {
		return a, err
	}
	if c := a.Cookie(challenge.CookieName); c != "" {
		v.cookie = c
	}
	return a, nil
}

// errNoPass is why a visitor holds no pass after trying to earn one.
var errNoPass = errors.New("testattack: no pass cookie")

// earnPoW asks for target, solves the challenge it is answered with (of
// at most maxBits) and redeems it; the challenge page is returned.
func (v *visitor) earnPoW(ctx context.Context, target string, maxBits int) (challengePage, error) {
	a, err := v.get(ctx, target)
	if err != nil {
		return challengePage{}, err
	}
	p := parseChallenge(a.Body)
	if p.pass == "" {
		return p, fmt.Errorf("testattack: %s answered %d without a proof of work", target, a.Status)
	}
	n, err := p.solve(ctx, maxBits)
	if err != nil {
		return p, err
	}
	a, err = v.get(ctx, p.pass+"&n="+n)
	if err != nil {
		return p, err
	}
	if a.Status != 303 || a.Cookie(challenge.CookieName) == "" {
		return p, fmt.Errorf("%w: the solution to %s was answered %d", errNoPass, target, a.Status)
	}
	return p, nil
}

// takeWait waits out the wait p offers and follows its URL, as a browser
// without JavaScript does on the meta refresh; a wait page answered again
// (too early) is waited out again, three times at most.
func (v *visitor) takeWait(ctx context.Context, p challengePage) error {
	if p.wait == "" {
		return errors.New("testattack: no wait offered")
	}
	secs := p.waitSecs
	for range 4 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(secs)*time.Second + 250*time.Millisecond): // the wait itself, as the page asks
		}
		a, err := v.get(ctx, p.wait)
		if err != nil {
			return err
		}
		if a.Status == 303 && a.Cookie(challenge.CookieName) != "" {
			return nil
		}
		again := parseChallenge(a.Body)
		if again.wait == "" {
			return fmt.Errorf("%w: the wait was answered %d", errNoPass, a.Status)
		}
		p, secs = again, max(again.waitSecs, 1)
	}
	return fmt.Errorf("%w: the wait never ended", errNoPass)
}

var (
	dataAttr    = regexp.MustCompile(`data-(seed|k|bits|pass|wait)="([^"]*)"`)
	refreshAttr = regexp.MustCompile(`http-equiv="refresh" content="(\d+); url=([^"]*)"`)
)

// challengePage is what a challenge page asks and offers.
type challengePage struct {
	seed     string
	k, bits  int    // k puzzles of bits each
	pass     string // the proof of work's URL; add "&n=…"
	wait     string // the wait's URL (data-wait, or the meta refresh); "" = none offered
	waitSecs int
}

// parseChallenge reads a challenge page.
func parseChallenge(body string) challengePage {
	var p challengePage
	for _, m := range dataAttr.FindAllStringSubmatch(body, -1) {
		val := html.UnescapeString(m[2])
		switch m[1] {
		case "seed":
			p.seed = val
		case "k":
			p.k, _ = strconv.Atoi(val)
		case "bits":
			p.bits, _ = strconv.Atoi(val)
		case "pass":
			p.pass = val
		case "wait":
			p.wait = val
		}
	}
	if m := refreshAttr.FindStringSubmatch(body); m != nil {
		u := html.UnescapeString(m[2])
		if strings.HasPrefix(u, challenge.PathPrefix) {
			p.waitSecs, _ = strconv.Atoi(m[1])
			if p.wait == "" {
				p.wait = u
			}
		}
	}
	if p.wait != "" && p.waitSecs == 0 {
		p.waitSecs = int(GateWait / time.Second)
	}
	return p
}

// total is the proof of work the page asks, in bits: k puzzles of bits
// each are worth bits + log2(k); 0 when it asks none.
func (p challengePage) total() int {
	if p.pass == "" || p.k == 0 {
		return 0
	}
	return p.bits + bits.Len(uint(p.k)) - 1
}

// describe says what the page asked: "403, 28 bits, no wait".
func (p challengePage) describe(status int) string {
	s := strconv.Itoa(status)
	if p.pass != "" {
		s += fmt.Sprintf(", %d bits", p.total())
	}
	if p.wait != "" {
		s += ", wait"
	} else if p.pass != "" {
		s += ", no wait"
	}
	return s
}

// solve finds the nonces of the page's proof of work (nonce i carries i
// in its top byte, and SHA-256(seed ‖ nonce) begins with bits zero bits),
// as the edge's solver does; it refuses more than maxBits in all.
func (p challengePage) solve(ctx context.Context, maxBits int) (string, error) {
	if p.seed == "" || p.k < 1 || p.k > 64 || p.bits < 1 {
		return "", fmt.Errorf("testattack: not a proof of work: seed %q, k %d, bits %d", p.seed, p.k, p.bits)
	}
	if p.total() > maxBits {
		return "", fmt.Errorf("testattack: %d bits asked, more than the %d an attacker here spends", p.total(), maxBits)
	}
	out := make([]string, 0, p.k)
	var msg [72]byte
	copy(msg[:64], p.seed)
	for i := range p.k {
		for n := uint64(i) << 56; ; n++ {
			if n&0xffff == 0 && ctx.Err() != nil {
				return "", ctx.Err()
			}
			binary.BigEndian.PutUint64(msg[64:], n)
			sum := sha256.Sum256(msg[:])
			if bits.LeadingZeros64(binary.BigEndian.Uint64(sum[:8])) >= p.bits {
				out = append(out, strconv.FormatUint(n, 16))
				break
			}
		}
	}
	return strings.Join(out, ","), nil
}

// withReturn is a pass URL with its return path (r) set to ret.
func withReturn(pass, ret string) (string, error) {
	u, err := url.Parse(pass)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set("r", ret)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// Package challengefuzz fuzzes the parsers of untrusted input in package
// challenge: the challenge tokens (both kinds), the nonces and the
// redirect target of /.maat/pass, and the pass cookie.
package challengefuzz

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"html"
	"math/bits"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maatproxy/maat/challenge"
)

const secret = "fuzzing secret, thirty-two bytes or more"

var cl = challenge.Client{IP: netip.MustParseAddr("198.51.100.7"), JA4: "t13d1516h2_8daaf6152771_d8a2da3f94cd"}

// clock is a settable clock: the challenges are issued at its start, then
// it moves past their wait.
type clock struct{ t atomic.Int64 }

func (c *clock) now() time.Time { return time.Unix(c.t.Load(), 0) }

func newChallenger(t testing.TB) (*challenge.Challenger, *clock) {
	t.Helper()
	clk := &clock{}
	clk.t.Store(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).Unix())
	c, err := challenge.New(challenge.Config{Secret: []byte(secret), Wait: time.Second, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	return c, clk
}

var (
	passRE = regexp.MustCompile(`data-pass="([^"]+)"`)
	waitRE = regexp.MustCompile(`data-wait="([^"]+)"`)
	seedRE = regexp.MustCompile(`data-seed="([0-9a-f]{64})"`)
	bitsRE = regexp.MustCompile(`data-bits="(\d+)"`)
	kRE    = regexp.MustCompile(`data-k="(\d+)"`)
)

// page serves a challenge page for s.
func page(c *challenge.Challenger, s challenge.Spec) string {
	w := httptest.NewRecorder()
	c.Challenge(w, httptest.NewRequest(http.MethodGet, "https://example.org/start", nil), cl, s, "fuzz")
	return w.Body.String()
}

// query returns the query of the pass URL that re finds on the page.
func query(t testing.TB, re *regexp.Regexp, body string) url.Values {
	t.Helper()
	m := re.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no %v in %s", re, body)
	}
	u, err := url.Parse(html.UnescapeString(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	return u.Query()
}

// issue serves a challenge page that offers a wait and returns its PoW
// pass URL's query with a solution, and its wait URL's query.
func issue(t testing.TB, c *challenge.Challenger, bitsWanted int) (pass url.Values, nonces string, wait url.Values) {
	t.Helper()
	body := page(c, challenge.Spec{Bits: bitsWanted, Wait: time.Second})
	seed := seedRE.FindStringSubmatch(body)[1]
	need, _ := strconv.Atoi(bitsRE.FindStringSubmatch(body)[1])
	k, _ := strconv.Atoi(kRE.FindStringSubmatch(body)[1])
	var parts []string
	for i := range k {
		for n := uint64(i) << 56; ; n++ {
			if zeros(seed, n) >= need {
				parts = append(parts, strconv.FormatUint(n, 16))
				break
			}
		}
	}
	return query(t, passRE, body), strings.Join(parts, ","), query(t, waitRE, body)
}

func zeros(seed string, n uint64) int {
	var msg [72]byte
	copy(msg[:], seed)
	binary.BigEndian.PutUint64(msg[64:], n)
	s := sha256.Sum256(msg[:])
	return bits.LeadingZeros64(binary.BigEndian.Uint64(s[:8]))
}

// signed reimplements the token's MAC check from its specification
// (HMAC-SHA-256 under a key derived from the secret, over everything but the
// trailing 32-byte MAC), in canonical unpadded base64url.
func signed(tok string) bool {
	raw, err := base64.RawURLEncoding.Strict().DecodeString(tok)
	if err != nil || len(raw) < sha256.Size || base64.RawURLEncoding.EncodeToString(raw) != tok {
		return false
	}
	k := hmac.New(sha256.New, []byte(secret))
	k.Write([]byte("maat challenge token v1"))
	m := hmac.New(sha256.New, k.Sum(nil))
	m.Write(raw[:len(raw)-sha256.Size])
	return hmac.Equal(m.Sum(nil), raw[len(raw)-sha256.Size:])
}

func serve(c *challenge.Challenger, target string, cookie string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, "https://example.org/", nil)
	r.URL.RawQuery = strings.TrimPrefix(target, "?")
	if cookie != "" {
		r.Header.Set("Cookie", cookie)
	}
	w := httptest.NewRecorder()
	r.URL.Path = challenge.PathPrefix + "pass"
	c.Handler(func(*http.Request) challenge.Client { return cl }).ServeHTTP(w, r)
	return w
}

// passClaims decodes the claims of the pass cookie w sets, without
// checking them.
func passClaims(t *testing.T, w *httptest.ResponseRecorder) (method string, bits int, ok bool) {
	for _, ck := range w.Result().Cookies() {
		if ck.Name != challenge.CookieName {
			continue
		}
		segs := strings.Split(ck.Value, ".")
		if len(segs) != 3 {
			t.Fatalf("cookie %q is not a JWS", ck.Value)
		}
		payload, err := base64.RawURLEncoding.DecodeString(segs[1])
		var claims struct {
			Method string `json:"method"`
			Bits   int    `json:"bits"`
		}
		if err != nil || json.Unmarshal(payload, &claims) != nil {
			t.Fatalf("cookie payload %q: %v", segs[1], err)
		}
		return claims.Method, claims.Bits, true
	}
	return "", 0, false
}

var reasonRE = regexp.MustCompile(`<code>(challenge_[a-z_]+)</code>`)

// FuzzPass sends arbitrary tokens, nonces (or none) and redirect targets
// to /.maat/pass. Properties: it never panics; it answers a refusal or the
// wait page (403) or a redirect (303); a refusal names a reason; a redirect
// goes to a path on this site; a cookie is issued only for a genuine token
// of the right kind — a PoW token with nonces, recorded as "pow" with its
// bits, or a wait token without, recorded as "wait" with 0 bits.
func FuzzPass(f *testing.F) {
	c, clk := newChallenger(f)
	q, nonces, wq := issue(f, c, 8)
	clk.t.Add(2) // past the wait
	genuine, wait := q.Get("t"), wq.Get("t")
	f.Add(genuine, true, nonces, "/wiki/Page?x=1")
	f.Add(genuine, true, nonces, "//evil.example/")
	f.Add(genuine, true, nonces, "/\\evil.example")
	f.Add(genuine, true, nonces, "https://evil.example")
	f.Add(genuine, true, nonces, "/..//evil.example")
	f.Add(genuine, false, "", "/")
	f.Add(genuine, true, "", "/")
	f.Add(genuine, true, "0", "/")
	f.Add(wait, false, "", "/feed")
	f.Add(wait, true, "", "/feed")
	f.Add(wait, true, nonces, "/feed")
	f.Add(genuine[:len(genuine)-1], true, nonces, "/")
	f.Add("", false, "", "")
	f.Add("AQEQCAIA", true, "0,1,2,3", "/\t/x")
	f.Fuzz(func(t *testing.T, tok string, withN bool, n, redirect string) {
		v := url.Values{"t": {tok}, "r": {redirect}}
		if withN {
			v.Set("n", n)
		}
		w := serve(c, v.Encode(), "")
		switch w.Code {
		case http.StatusForbidden:
			body := w.Body.String()
			if w.Header().Get(challenge.MitigatedHeader) != "challenge" || (!reasonRE.MatchString(body) && !strings.Contains(body, `http-equiv="refresh"`)) {
				t.Fatalf("403 without a reason or a wait: %s", body)
			}
		case http.StatusSeeOther:
			loc := w.Header().Get("Location")
			u, err := url.Parse(loc)
			if err != nil || u.Scheme != "" || u.Host != "" || !strings.HasPrefix(loc, "/") ||
				strings.HasPrefix(loc, "//") || strings.ContainsAny(loc, "\\\t\r\n ") {
				t.Fatalf("redirect to %q", loc)
			}
			if loc != redirect && loc != "/" {
				t.Fatalf("redirect %q for target %q", loc, redirect)
			}
		default:
			t.Fatalf("status %d", w.Code)
		}
		method, bits, ok := passClaims(t, w)
		if !ok {
			return
		}
		if !signed(tok) {
			t.Fatalf("cookie for a token that was never issued: %q", tok)
		}
		tk, err := c.ParseToken(tok)
		switch {
		case err != nil:
			t.Fatalf("cookie for a token that does not parse: %v", err)
		case tk.Kind == challenge.MethodPoW && (!withN || n == "" || method != challenge.MethodPoW || bits != tk.Bits):
			t.Fatalf("PoW token (n %v %q) earned method %q bits %d", withN, n, method, bits)
		case tk.Kind == challenge.MethodWait && (withN || method != challenge.MethodWait || bits != 0):
			t.Fatalf("wait token (n %v %q) earned method %q bits %d", withN, n, method, bits)
		}
	})
}

// FuzzToken issues the tokens of a challenge page for an arbitrary Spec and
// checks the round trip (ParseToken gives back what was asked, within the
// documented bounds), then changes one byte of each token: any change gives
// ErrTokenMalformed.
func FuzzToken(f *testing.F) {
	c, _ := newChallenger(f)
	f.Add(16, "browsers", int32(5000), false, 7, byte(1))
	f.Add(12, "", int32(0), false, 0, byte(0x80))
	f.Add(0, "generic", int32(-1), true, 40, byte(0xff))
	f.Add(99, strings.Repeat("r", 200), int32(3600000), false, 1000, byte(2))
	f.Add(4, "a\x00b", int32(1), true, 3, byte(4))
	f.Fuzz(func(t *testing.T, bits int, rule string, waitMS int32, refresh bool, at int, flip byte) {
		s := challenge.Spec{Algorithm: "pow", Bits: bits, Rule: rule, Wait: time.Duration(waitMS) * time.Millisecond}
		if refresh {
			s.Algorithm = "metarefresh"
		}
		body := page(c, s)
		wantRule := rule[:min(len(rule), 128)]
		var toks []string
		if !refresh {
			tok := query(t, passRE, body).Get("t")
			got, err := c.ParseToken(tok)
			wantBits := min(bits, challenge.MaxBits)
			if bits <= 0 {
				wantBits = challenge.DefaultBits
			}
			k, _ := strconv.Atoi(kRE.FindStringSubmatch(body)[1])
			sub, _ := strconv.Atoi(bitsRE.FindStringSubmatch(body)[1])
			if err != nil || got.Kind != challenge.MethodPoW || got.Bits != wantBits || got.SubPuzzles != k || got.Wait != 0 ||
				got.Rule != wantRule || k&(k-1) != 0 || 1<<(wantBits-sub) != k {
				t.Fatalf("PoW token %+v (page k %d, sub-bits %d), %v; asked %+v", got, k, sub, err, s)
			}
			toks = append(toks, tok)
		}
		want := s.Wait
		if refresh && want <= 0 {
			want = time.Second // Config.Wait
		}
		if want > 0 {
			want = min(want, challenge.MaxWait)
			want = (want + time.Second - 1) / time.Second * time.Second
			tok := query(t, waitRE, body).Get("t")
			got, err := c.ParseToken(tok)
			if err != nil || got.Kind != challenge.MethodWait || got.Bits != 0 || got.SubPuzzles != 1 || got.Wait != want || got.Rule != wantRule {
				t.Fatalf("wait token %+v, %v; asked %+v", got, err, s)
			}
			toks = append(toks, tok)
		} else if waitRE.MatchString(body) {
			t.Fatalf("a wait on a page that offers none: %+v", s)
		}
		for _, tok := range toks {
			raw, err := base64.RawURLEncoding.DecodeString(tok)
			if err != nil {
				t.Fatal(err)
			}
			i := at % len(raw)
			if i < 0 {
				i += len(raw)
			}
			if flip == 0 {
				flip = 1
			}
			raw[i] ^= flip
			if _, err := c.ParseToken(base64.RawURLEncoding.EncodeToString(raw)); !errors.Is(err, challenge.ErrTokenMalformed) {
				t.Fatalf("byte %d ^ %#x: %v, want ErrTokenMalformed", i, flip, err)
			}
		}
	})
}

// signedJWT reimplements the pass cookie check from RFC 7515/7518: the
// first pass cookie in the header is a compact JWS whose header says HS256
// and whose signature is HMAC-SHA-256 under the key derived from the
// secret, all in canonical unpadded base64url.
func signedJWT(header string) bool {
	var v string
	for part := range strings.SplitSeq(header, ";") {
		if after, ok := strings.CutPrefix(strings.TrimSpace(part), challenge.CookieName+"="); ok {
			v = strings.Trim(after, `"`)
			break
		}
	}
	segs := strings.Split(v, ".")
	if len(segs) != 3 {
		return false
	}
	hdr, err := base64.RawURLEncoding.Strict().DecodeString(segs[0])
	if err != nil || !strings.Contains(string(hdr), `"alg":"HS256"`) {
		return false
	}
	k := hmac.New(sha256.New, []byte(secret))
	k.Write([]byte("maat pass cookie v1"))
	m := hmac.New(sha256.New, k.Sum(nil))
	m.Write([]byte(segs[0] + "." + segs[1]))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)) == segs[2]
}

// FuzzCookie checks arbitrary Cookie headers. Properties: no panic, every
// reason has a name, and only a cookie signed with the secret passes.
func FuzzCookie(f *testing.F) {
	c, _ := newChallenger(f)
	q, nonces, _ := issue(f, c, 8)
	q.Set("n", nonces)
	w := serve(c, q.Encode(), "")
	var genuine string
	for _, ck := range w.Result().Cookies() {
		if ck.Name == challenge.CookieName {
			genuine = ck.Value
		}
	}
	if genuine == "" {
		f.Fatalf("no cookie: %d %s", w.Code, w.Body)
	}
	name := challenge.CookieName + "="
	f.Add(name + genuine)
	f.Add("a=b; " + name + genuine + "; c=d")
	f.Add(name + genuine[:len(genuine)-2])
	f.Add(name + "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJleHAiOjQxMDI0NDQ4MDAsImJpdHMiOjMwfQ.")
	f.Add(name + "a.b.c")
	f.Add(name)
	f.Add("")
	f.Fuzz(func(t *testing.T, header string) {
		r := httptest.NewRequest(http.MethodGet, "https://example.org/", nil)
		r.Header.Set("Cookie", header)
		reason := c.Check(r, cl, challenge.Need{Bits: 8})
		if reason.String() == "unknown" {
			t.Fatalf("reason %d has no name", reason)
		}
		if reason == challenge.PassOK && !signedJWT(header) {
			t.Fatalf("passed with %q", header)
		}
	})
}

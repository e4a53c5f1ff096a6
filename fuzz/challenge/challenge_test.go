// Package challengefuzz fuzzes the parsers of untrusted input in package
// challenge: the challenge token, the nonces and the redirect target of
// /.maat/pass, and the pass cookie.
package challengefuzz

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"html"
	"math/bits"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/maatproxy/maat/challenge"
)

const secret = "fuzzing secret, thirty-two bytes or more"

var cl = challenge.Client{IP: netip.MustParseAddr("198.51.100.7"), JA4: "t13d1516h2_8daaf6152771_d8a2da3f94cd"}

func newChallenger(t testing.TB) *challenge.Challenger {
	t.Helper()
	c, err := challenge.New(challenge.Config{Secret: []byte(secret), Wait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var (
	passRE = regexp.MustCompile(`data-pass="([^"]+)"`)
	seedRE = regexp.MustCompile(`data-seed="([0-9a-f]{64})"`)
	bitsRE = regexp.MustCompile(`data-bits="(\d+)"`)
	kRE    = regexp.MustCompile(`data-k="(\d+)"`)
)

// issue serves a challenge page and returns its pass URL and a solution.
func issue(t testing.TB, c *challenge.Challenger, bitsWanted int) (pass url.Values, nonces string) {
	t.Helper()
	w := httptest.NewRecorder()
	c.Challenge(w, httptest.NewRequest(http.MethodGet, "https://example.org/start", nil), cl, challenge.Spec{Bits: bitsWanted}, "fuzz")
	body := w.Body.String()
	m := passRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no pass URL in %s", body)
	}
	u, err := url.Parse(html.UnescapeString(m[1]))
	if err != nil {
		t.Fatal(err)
	}
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
	return u.Query(), strings.Join(parts, ",")
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

// FuzzPass sends arbitrary tokens, nonces and redirect targets to
// /.maat/pass. Properties: it never panics; it answers a fresh challenge
// (200), a refusal (403) or a redirect (303); a redirect goes to a path on
// this site; a cookie is issued only for the genuine token with a correct
// solution.
func FuzzPass(f *testing.F) {
	c := newChallenger(f)
	q, nonces := issue(f, c, 8)
	genuine := q.Get("t")
	f.Add(genuine, nonces, "/wiki/Page?x=1")
	f.Add(genuine, nonces, "//evil.example/")
	f.Add(genuine, nonces, "/\\evil.example")
	f.Add(genuine, nonces, "https://evil.example")
	f.Add(genuine, "", "/")
	f.Add(genuine, "0", "/")
	f.Add(genuine[:len(genuine)-1], nonces, "/")
	f.Add("", "", "")
	f.Add("AQEQCAIA", "0,1,2,3", "/\t/x")
	f.Fuzz(func(t *testing.T, tok, n, redirect string) {
		v := url.Values{"t": {tok}, "n": {n}, "r": {redirect}}
		w := serve(c, v.Encode(), "")
		switch w.Code {
		case http.StatusOK, http.StatusForbidden, http.StatusSeeOther:
		default:
			t.Fatalf("status %d", w.Code)
		}
		if w.Code == http.StatusSeeOther {
			loc := w.Header().Get("Location")
			u, err := url.Parse(loc)
			if err != nil || u.Scheme != "" || u.Host != "" || !strings.HasPrefix(loc, "/") ||
				strings.HasPrefix(loc, "//") || strings.ContainsAny(loc, "\\\t\r\n ") {
				t.Fatalf("redirect to %q", loc)
			}
			if loc != redirect && loc != "/" {
				t.Fatalf("redirect %q for target %q", loc, redirect)
			}
		}
		if len(w.Result().Cookies()) > 0 && !signed(tok) {
			t.Fatalf("cookie for a token that was never issued: %q", tok)
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
	c := newChallenger(f)
	q, nonces := issue(f, c, 8)
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
		reason := c.Check(r, cl, 8)
		if reason.String() == "unknown" {
			t.Fatalf("reason %d has no name", reason)
		}
		if reason == challenge.PassOK && !signedJWT(header) {
			t.Fatalf("passed with %q", header)
		}
	})
}

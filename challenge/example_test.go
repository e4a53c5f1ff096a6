package challenge_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"time"

	"github.com/maatproxy/maat/challenge"
)

func Example() {
	c, err := challenge.New(challenge.Config{Secret: []byte("a shared secret of thirty-two bytes or more")})
	if err != nil {
		panic(err)
	}
	cl := challenge.Client{IP: netip.MustParseAddr("198.51.100.7"), JA4: "t13d1516h2_8daaf6152771_d8a2da3f94cd"}

	r := httptest.NewRequest(http.MethodGet, "https://example.org/wiki/", nil)
	// The edge lets this client pass by waiting 5 s instead (no JavaScript,
	// or a slow device), so a pass earned either way will do.
	need := challenge.Need{Bits: 16, Wait: true}
	if reason := c.Check(r, cl, need); reason != challenge.PassOK {
		fmt.Println("no pass:", reason)
		w := httptest.NewRecorder()
		c.Challenge(w, r, cl, challenge.Spec{Algorithm: "pow", Bits: 16, Rule: "browsers", Wait: 5 * time.Second}, "req-1")
		fmt.Println(w.Code, w.Header().Get("Content-Type"), w.Header().Get(challenge.MitigatedHeader))
	}
	// Output:
	// no pass: no_cookie
	// 403 text/html; charset=utf-8 challenge
}

package challenge_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"

	"github.com/maatproxy/maat/challenge"
)

func Example() {
	c, err := challenge.New(challenge.Config{Secret: []byte("a shared secret of thirty-two bytes or more")})
	if err != nil {
		panic(err)
	}
	cl := challenge.Client{IP: netip.MustParseAddr("198.51.100.7"), JA4: "t13d1516h2_8daaf6152771_d8a2da3f94cd"}

	r := httptest.NewRequest(http.MethodGet, "https://example.org/wiki/", nil)
	if reason := c.Check(r, cl, 16); reason != challenge.PassOK {
		fmt.Println("no pass:", reason)
		w := httptest.NewRecorder()
		c.Challenge(w, r, cl, challenge.Spec{Algorithm: "pow", Bits: 16, Rule: "browsers"}, "req-1")
		fmt.Println(w.Code, w.Header().Get("Content-Type"))
	}
	// Output:
	// no pass: no_cookie
	// 200 text/html; charset=utf-8
}

package testattack

import (
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/maatproxy/maat/challenge"
)

// TestMintPass: a minted pass is one the challenge package accepts for
// the client it is bound to, and refuses to another network, another TLS
// stack, another policy, a need of more bits, and another secret.
func TestMintPass(t *testing.T) {
	t.Parallel()
	secret := []byte("0123456789abcdef0123456789abcdef")
	const ja4 = "t13d1516h2_8daaf6152771_d8a2da3f94cd"
	c, err := challenge.New(challenge.Config{Secret: secret, PolicyVersion: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	p := Pass{Net: netip.MustParsePrefix("127.100.3.0/24"), JA4: ja4, Family: "chrome", Bits: 20, Policy: "v1", TTL: time.Hour}
	cookie, err := MintPass(secret, p, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	req := func(v string) *http.Request {
		r, _ := http.NewRequest("GET", "https://localhost/", nil)
		r.Header.Set("Cookie", challenge.CookieName+"="+v)
		return r
	}
	owner := challenge.Client{IP: netip.MustParseAddr("127.100.3.1"), JA4: ja4, Family: "chrome"}
	if got := c.Check(req(cookie), owner, challenge.Need{Bits: 16}); got != challenge.PassOK {
		t.Fatalf("the owner's pass: %v", got)
	}
	for _, tt := range []struct {
		name string
		cl   challenge.Client
		need int
		c    *challenge.Challenger
	}{
		{"another /24", challenge.Client{IP: netip.MustParseAddr("127.100.4.1"), JA4: ja4, Family: "chrome"}, 16, c},
		{"another TLS stack", challenge.Client{IP: owner.IP, JA4: "t13d1312h2_f57a46bbacb6_e7c285222651", Family: "go"}, 16, c},
		{"more bits", owner, 24, c},
		{"another policy", owner, 16, mustChallenger(t, secret, "v2")},
		{"another secret", owner, 16, mustChallenger(t, []byte("fedcba9876543210fedcba9876543210"), "v1")},
	} {
		if got := tt.c.Check(req(cookie), tt.cl, challenge.Need{Bits: tt.need}); got == challenge.PassOK {
			t.Errorf("%s: the pass held", tt.name)
		}
	}
	if _, err := MintPass([]byte("short"), p, time.Now()); err == nil {
		t.Error("a short secret minted a pass")
	}
}

func mustChallenger(t *testing.T, secret []byte, pv string) *challenge.Challenger {
	c, err := challenge.New(challenge.Config{Secret: secret, PolicyVersion: pv})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

package challenge

import (
	"encoding/base64"
	"errors"
	"testing"
	"time"
)

func TestTokenRoundTrip(t *testing.T) {
	t.Parallel()
	c, _ := newTest(t, nil)
	tests := []struct {
		name       string
		spec       Spec
		wait       uint16 // issue a wait token of this many seconds
		wantBits   uint8
		wantK      uint8
		wantSubBit int
	}{
		{name: "default", spec: Spec{}, wantBits: DefaultBits, wantK: 8, wantSubBit: DefaultBits - 3},
		{name: "anubis difficulty 4", spec: Spec{Algorithm: "fast", Bits: 16, Rule: "generic-browser"}, wantBits: 16, wantK: 8, wantSubBit: 13},
		{name: "small", spec: Spec{Bits: 6}, wantBits: 6, wantK: 1, wantSubBit: 6},
		{name: "medium", spec: Spec{Bits: 12}, wantBits: 12, wantK: 4, wantSubBit: 10},
		{name: "clamped", spec: Spec{Bits: 99}, wantBits: MaxBits, wantK: 8, wantSubBit: MaxBits - 3},
		{name: "wait", spec: Spec{Rule: "browsers"}, wait: 5, wantK: 1},
		{name: "long wait", wait: 600, wantK: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var in token
			var s string
			if tt.wait > 0 {
				in, s = c.issueWait(alice, tt.spec.Rule, tt.wait, c.now())
			} else {
				in, s = c.issuePoW(alice, tt.spec, c.now())
			}
			out, err := parseToken(s, c.tokenKeys)
			if err != nil {
				t.Fatal(err)
			}
			if out != in {
				t.Fatalf("round trip: got %+v, want %+v", out, in)
			}
			if out.bits != tt.wantBits || out.k != tt.wantK || out.wait != tt.wait {
				t.Errorf("bits %d k %d wait %d", out.bits, out.k, out.wait)
			}
			if tt.wait == 0 && (out.kind != kindPoW || out.subBits() != tt.wantSubBit) {
				t.Errorf("kind %d sub %d", out.kind, out.subBits())
			}
			if tt.wait > 0 && out.kind != kindWait {
				t.Errorf("kind %d, want wait", out.kind)
			}
			if out.rule != tt.spec.Rule {
				t.Errorf("rule %q", out.rule)
			}
			pub, err := c.ParseToken(s)
			if err != nil || pub.Bits != int(tt.wantBits) || pub.SubPuzzles != int(tt.wantK) || pub.Wait != time.Duration(tt.wait)*time.Second ||
				pub.Rule != tt.spec.Rule || !pub.Issued.Equal(c.now().Truncate(time.Second)) || pub.Expires.Sub(pub.Issued) != DefaultChallengeTTL {
				t.Errorf("ParseToken = %+v, %v", pub, err)
			}
		})
	}
}

// TestTokenWellFormed: a token signed with fields that do not fit its kind
// is refused, so that neither kind can stand in for the other.
func TestTokenWellFormed(t *testing.T) {
	t.Parallel()
	c, _ := newTest(t, nil)
	pow, _ := c.issuePoW(alice, Spec{Bits: 12}, c.now())
	wait, _ := c.issueWait(alice, "", 5, c.now())
	tests := []struct {
		name string
		edit func() token
	}{
		{"PoW with a wait", func() token { t := pow; t.wait = 5; return t }},
		{"PoW without sub-puzzles", func() token { t := pow; t.k = 0; return t }},
		{"PoW with 3 sub-puzzles", func() token { t := pow; t.k = 3; return t }},
		{"PoW too hard", func() token { t := pow; t.bits = MaxBits + 1; return t }},
		{"wait with bits", func() token { t := wait; t.bits = 12; return t }},
		{"wait with sub-puzzles", func() token { t := wait; t.k = 4; return t }},
		{"wait of nothing", func() token { t := wait; t.wait = 0; return t }},
		{"unknown kind", func() token { t := pow; t.kind = 3; return t }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tk := tt.edit()
			if _, err := parseToken(tk.marshal(c.tokenKeys), c.tokenKeys); !errors.Is(err, ErrTokenMalformed) {
				t.Errorf("err %v, want ErrTokenMalformed", err)
			}
		})
	}
}

func TestTokenTamper(t *testing.T) {
	t.Parallel()
	c, _ := newTest(t, nil)
	other, _ := newTest(t, func(cfg *Config) { cfg.Secret = []byte("another secret of at least thirty-two bytes") })
	for _, kind := range []uint8{kindPoW, kindWait} {
		var s string
		if kind == kindPoW {
			_, s = c.issuePoW(alice, Spec{Rule: "r"}, c.now())
		} else {
			_, s = c.issueWait(alice, "r", 5, c.now())
		}
		raw, _ := base64.RawURLEncoding.DecodeString(s)
		if _, err := parseToken(s, other.tokenKeys); !errors.Is(err, ErrTokenMalformed) {
			t.Errorf("other secret: %v", err)
		}
		for i := range raw {
			b := append([]byte(nil), raw...)
			b[i] ^= 0x01
			if _, err := parseToken(base64.RawURLEncoding.EncodeToString(b), c.tokenKeys); !errors.Is(err, ErrTokenMalformed) {
				t.Errorf("kind %d, byte %d flipped: err %v", kind, i, err)
			}
		}
		for n := range len(s) {
			if _, err := parseToken(s[:n], c.tokenKeys); !errors.Is(err, ErrTokenMalformed) {
				t.Errorf("kind %d, prefix %d: err %v", kind, n, err)
			}
		}
	}
}

func TestVerifyPoW(t *testing.T) {
	t.Parallel()
	c, _ := newTest(t, nil)
	tk, _ := c.issuePoW(alice, Spec{Bits: 12}, c.now())
	good := solve(&tk)
	weak := append([]uint64(nil), good...)
	// A nonce that misses the sub-puzzle difficulty.
	for n := weak[0] + 1; ; n++ {
		if leadingZeroBits(tk.seed(), n) < tk.subBits() {
			weak[0] = n
			break
		}
	}
	swapped := append([]uint64(nil), good...)
	swapped[0], swapped[1] = swapped[1], swapped[0]
	tests := []struct {
		name   string
		nonces []uint64
		want   bool
	}{
		{"solution", good, true},
		{"too few bits", weak, false},
		{"sub-puzzle index swapped", swapped, false},
		{"one short", good[:len(good)-1], false},
		{"one extra", append(append([]uint64(nil), good...), good[0]), false},
		{"same nonce for all", []uint64{good[0], good[0], good[0], good[0]}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := verifyPoW(&tk, tt.nonces); got != tt.want {
				t.Errorf("verifyPoW = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestParseNonces(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		k    int
		want []uint64
	}{
		{"1a", 1, []uint64{0x1a}},
		{"0,100000000000000", 2, []uint64{0, 1 << 56}},
		{"1,2", 1, nil},
		{"1", 2, nil},
		{"1,", 2, nil},
		{"g", 1, nil},
		{"11111111111111111", 1, nil},
		{"-1", 1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, ok := parseNonces(tt.in, tt.k)
			if ok != (tt.want != nil) || len(got) != len(tt.want) {
				t.Fatalf("parseNonces(%q, %d) = %v, %v", tt.in, tt.k, got, ok)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("nonce %d = %x, want %x", i, got[i], tt.want[i])
				}
			}
		})
	}
}

// TestBinding: a token binds the IP prefix always and the JA4 within one
// transport, as the pass cookie does: the browser challenged over TCP may
// redeem over QUIC.
func TestBinding(t *testing.T) {
	t.Parallel()
	otherTCP := Client{IP: alice.IP, JA4: "t13d1715h2_5b57614c22b0_3d5424432f57"}
	noJA4 := Client{IP: alice.IP}
	tests := []struct {
		name   string
		bind   Binding
		issued Client
		now    Client
		want   bool
	}{
		{"same client", 0, alice, alice, true},
		{"neighbour in the /24", 0, alice, Client{IP: alice.IP.Next(), JA4: alice.JA4}, true},
		{"other /24", 0, alice, mallory, false},
		{"IPv4 to IPv6", 0, alice, alice6, false},
		{"other JA4 over TCP", 0, alice, otherTCP, false},
		{"TCP to QUIC", 0, alice, aliceQ, true},
		{"QUIC to TCP", 0, aliceQ, alice, true},
		{"JA4 unknown at issue", 0, noJA4, otherTCP, true},
		{"JA4 unknown now", 0, alice, noJA4, true},
		{"JA4 not bound", BindIPPrefix, alice, otherTCP, true},
		{"prefix not bound", BindJA4, alice, Client{IP: mallory.IP, JA4: alice.JA4}, true},
		{"prefix not bound, other JA4", BindJA4, alice, Client{IP: mallory.IP, JA4: otherTCP.JA4}, false},
		{"nothing bound", BindNone, alice, bob, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := tt.bind.resolve()
			if got := bindingOf(b, tt.issued).boundTo(bindingOf(b, tt.now)); got != tt.want {
				t.Errorf("boundTo = %v, want %v", got, tt.want)
			}
		})
	}
}

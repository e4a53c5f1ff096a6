package challenge

import (
	"encoding/base64"
	"errors"
	"testing"
)

func TestTokenRoundTrip(t *testing.T) {
	t.Parallel()
	c, _ := newTest(t, nil)
	tests := []struct {
		name       string
		spec       Spec
		wantAlg    uint8
		wantBits   uint8
		wantK      uint8
		wantSubBit int
	}{
		{"default", Spec{}, algPoW, DefaultBits, 8, DefaultBits - 3},
		{"anubis difficulty 4", Spec{Algorithm: "fast", Bits: 16, Rule: "generic-browser"}, algPoW, 16, 8, 13},
		{"small", Spec{Bits: 6}, algPoW, 6, 1, 6},
		{"medium", Spec{Bits: 12}, algPoW, 12, 4, 10},
		{"clamped", Spec{Bits: 99}, algPoW, MaxBits, 8, MaxBits - 3},
		{"metarefresh", Spec{Algorithm: "metarefresh", Bits: 16}, algRefresh, 16, 1, 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in, s := c.issue(alice, tt.spec, c.now())
			out, err := parseToken(s, c.tokenKeys)
			if err != nil {
				t.Fatal(err)
			}
			if out != in {
				t.Fatalf("round trip: got %+v, want %+v", out, in)
			}
			if out.alg != tt.wantAlg || out.bits != tt.wantBits || out.k != tt.wantK || out.subBits() != tt.wantSubBit {
				t.Errorf("alg %d bits %d k %d sub %d", out.alg, out.bits, out.k, out.subBits())
			}
			if out.rule != tt.spec.Rule {
				t.Errorf("rule %q", out.rule)
			}
		})
	}
}

func TestTokenTamper(t *testing.T) {
	t.Parallel()
	c, _ := newTest(t, nil)
	other, _ := newTest(t, func(cfg *Config) { cfg.Secret = []byte("another secret of at least thirty-two bytes") })
	_, s := c.issue(alice, Spec{Rule: "r"}, c.now())
	raw, _ := base64.RawURLEncoding.DecodeString(s)
	if _, err := parseToken(s, other.tokenKeys); !errors.Is(err, ErrTokenMalformed) {
		t.Errorf("other secret: %v", err)
	}
	for i := range raw {
		t.Run("flip", func(t *testing.T) {
			t.Parallel()
			b := append([]byte(nil), raw...)
			b[i] ^= 0x01
			if _, err := parseToken(base64.RawURLEncoding.EncodeToString(b), c.tokenKeys); !errors.Is(err, ErrTokenMalformed) {
				t.Errorf("byte %d flipped: err %v", i, err)
			}
		})
	}
	for n := range len(s) {
		if _, err := parseToken(s[:n], c.tokenKeys); !errors.Is(err, ErrTokenMalformed) {
			t.Errorf("prefix %d: err %v", n, err)
		}
	}
}

func TestVerifyPoW(t *testing.T) {
	t.Parallel()
	c, _ := newTest(t, nil)
	tk, _ := c.issue(alice, Spec{Bits: 12}, c.now())
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

package challenge

import (
	"crypto/sha256"
	"encoding/binary"
	"math/bits"
	"strconv"
	"strings"
)

// leadingZeroBits counts the leading zero bits of SHA-256(seed ‖ nonce),
// nonce as 8 big-endian bytes.
func leadingZeroBits(seed string, nonce uint64) int {
	var msg [64 + 8]byte
	copy(msg[:64], seed)
	binary.BigEndian.PutUint64(msg[64:], nonce)
	sum := sha256.Sum256(msg[:])
	n := 0
	for i := 0; i < len(sum); i += 8 {
		w := binary.BigEndian.Uint64(sum[i:])
		z := bits.LeadingZeros64(w)
		n += z
		if z < 64 {
			break
		}
	}
	return n
}

// parseNonces reads k comma-separated hexadecimal nonces.
func parseNonces(s string, k int) ([]uint64, bool) {
	if strings.Count(s, ",") != k-1 || len(s) > k*17 {
		return nil, false
	}
	out := make([]uint64, 0, k)
	for part := range strings.SplitSeq(s, ",") {
		if part == "" || len(part) > 16 {
			return nil, false
		}
		n, err := strconv.ParseUint(part, 16, 64)
		if err != nil {
			return nil, false
		}
		out = append(out, n)
	}
	return out, true
}

// verifyPoW checks that nonce i carries index i in its top byte and
// reaches the sub-puzzle difficulty.
func verifyPoW(t *token, nonces []uint64) bool {
	if len(nonces) != int(t.k) {
		return false
	}
	seed := t.seed()
	need := t.subBits()
	for i, n := range nonces {
		if n>>56 != uint64(i) || leadingZeroBits(seed, n) < need {
			return false
		}
	}
	return true
}

// solve finds nonces for t by brute force (tests, examples, benchmarks).
func solve(t *token) []uint64 {
	seed := t.seed()
	need := t.subBits()
	out := make([]uint64, t.k)
	for i := range out {
		for n := uint64(i) << 56; ; n++ {
			if leadingZeroBits(seed, n) >= need {
				out[i] = n
				break
			}
		}
	}
	return out
}

func formatNonces(ns []uint64) string {
	var b strings.Builder
	for i, n := range ns {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(n, 16))
	}
	return b.String()
}

package drain

import (
	"bytes"
	"testing"

	"github.com/maatproxy/maat/internal/testnet"
)

func TestWSFrames(t *testing.T) {
	t.Parallel()
	key := []byte{1, 2, 3, 4}
	for _, tt := range []struct {
		name  string
		frame []byte
	}{
		{"empty", testnet.WSFrame(0x9, nil, nil)},
		{"short", testnet.WSFrame(0x1, []byte("hello"), nil)},
		{"short masked", testnet.WSFrame(0x1, []byte("hello"), key)},
		{"16-bit length", testnet.WSFrame(0x2, make([]byte, 300), nil)},
		{"16-bit length masked", testnet.WSFrame(0x2, make([]byte, 65535), key)},
		{"64-bit length", testnet.WSFrame(0x2, make([]byte, 70000), nil)},
		{"64-bit length masked", testnet.WSFrame(0x2, make([]byte, 70000), key)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// Whole, then byte by byte: a boundary only at the end, and
			// want never passes it.
			var f wsFrames
			f.feed(tt.frame)
			if !f.boundary() {
				t.Fatal("no boundary after a whole frame")
			}
			for i := range tt.frame {
				if w := f.want(); w < 1 || w > uint64(len(tt.frame)-i) {
					t.Fatalf("at %d: want %d, %d bytes left", i, w, len(tt.frame)-i)
				}
				f.feed(tt.frame[i : i+1])
				if f.boundary() != (i == len(tt.frame)-1) {
					t.Fatalf("at %d of %d: boundary %v", i, len(tt.frame), f.boundary())
				}
			}
			// Two frames in one piece, and cut anywhere.
			two := append(bytes.Clone(tt.frame), testnet.WSFrame(0x8, []byte{3, 0xe9}, nil)...)
			for cut := range two {
				var g wsFrames
				g.feed(two[:cut])
				g.feed(two[cut:])
				if !g.boundary() {
					t.Fatalf("cut at %d: no boundary at the end", cut)
				}
			}
		})
	}
}

package drain

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// wsFrame builds a websocket frame: FIN, opcode op, the payload, masked
// with key when key is not nil (a client's frame).
func wsFrame(op byte, payload []byte, key []byte) []byte {
	b := []byte{0x80 | op}
	m := byte(0)
	if key != nil {
		m = 0x80
	}
	switch n := len(payload); {
	case n < 126:
		b = append(b, m|byte(n))
	case n <= 0xffff:
		b = append(b, m|126)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, m|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	if key == nil {
		return append(b, payload...)
	}
	b = append(b, key...)
	for i, c := range payload {
		b = append(b, c^key[i%4])
	}
	return b
}

func TestWSFrames(t *testing.T) {
	t.Parallel()
	key := []byte{1, 2, 3, 4}
	for _, tt := range []struct {
		name  string
		frame []byte
	}{
		{"empty", wsFrame(0x9, nil, nil)},
		{"short", wsFrame(0x1, []byte("hello"), nil)},
		{"short masked", wsFrame(0x1, []byte("hello"), key)},
		{"16-bit length", wsFrame(0x2, make([]byte, 300), nil)},
		{"16-bit length masked", wsFrame(0x2, make([]byte, 65535), key)},
		{"64-bit length", wsFrame(0x2, make([]byte, 70000), nil)},
		{"64-bit length masked", wsFrame(0x2, make([]byte, 70000), key)},
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
			two := append(bytes.Clone(tt.frame), wsFrame(0x8, []byte{3, 0xe9}, nil)...)
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

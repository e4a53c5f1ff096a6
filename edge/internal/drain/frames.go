package drain

import "encoding/binary"

// wsFrames follows the frame boundaries of one direction of a websocket
// from its bytes: each frame's header gives the payload's length, which is
// skipped. It never looks at a payload and never fails: it only counts.
type wsFrames struct {
	hdr  [14]byte
	nhdr int    // header bytes of the frame in progress
	left uint64 // payload bytes left of the frame in progress
}

func (f *wsFrames) boundary() bool { return f.nhdr == 0 && f.left == 0 }

// want is how many bytes may come before the end of the frame in progress
// or of its header, at least one.
func (f *wsFrames) want() uint64 {
	if f.left > 0 {
		return f.left
	}
	return uint64(max(wsHeaderLen(f.hdr[:f.nhdr])-f.nhdr, 1))
}

func (f *wsFrames) feed(p []byte) {
	for len(p) > 0 {
		if f.left > 0 {
			n := min(uint64(len(p)), f.left)
			f.left -= n
			p = p[n:]
			continue
		}
		f.hdr[f.nhdr] = p[0]
		f.nhdr++
		p = p[1:]
		if h := f.hdr[:f.nhdr]; f.nhdr == wsHeaderLen(h) {
			f.left, f.nhdr = wsPayloadLen(h), 0
		}
	}
}

// wsHeaderLen is the length of a frame header that starts with h: 2 bytes,
// the extended length (2 or 8), the masking key (4).
func wsHeaderLen(h []byte) int {
	if len(h) < 2 {
		return 2
	}
	n := 2
	switch h[1] & 0x7f {
	case 126:
		n += 2
	case 127:
		n += 8
	}
	if h[1]&0x80 != 0 {
		n += 4
	}
	return n
}

// wsPayloadLen is the payload length of the whole header h.
func wsPayloadLen(h []byte) uint64 {
	switch l := h[1] & 0x7f; l {
	case 126:
		return uint64(binary.BigEndian.Uint16(h[2:4]))
	case 127:
		return binary.BigEndian.Uint64(h[2:10])
	default:
		return uint64(l)
	}
}

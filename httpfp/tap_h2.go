package httpfp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"golang.org/x/net/http2/hpack"
)

// The client connection preface (RFC 9113, section 3.4).
const h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// Frame types and flags the tap reads (RFC 9113, section 6).
const (
	frameHeaders      = 0x1
	framePriority     = 0x2
	frameSettings     = 0x4
	frameWindowUpdate = 0x8
	frameContinuation = 0x9

	flagAck        = 0x1
	flagEndHeaders = 0x4
	flagPadded     = 0x8
	flagPriority   = 0x20
)

// maxHPACKTable is the largest dynamic table a client may ask the tap for.
// A server allows 4096 bytes unless configured otherwise (x/net/http2's
// Server.MaxDecoderHeaderTableSize) and closes a connection that asks for
// more than it allows, so the tap only needs to be as permissive as any
// server configuration.
const maxHPACKTable = 1 << 16

// maxSettings bounds the SETTINGS entries kept for h2fp.
const maxSettings = 32

// maxPriorities bounds the PRIORITY frames kept for h2fp.
const maxPriorities = 32

// maxBlockFrames bounds the frames of one header block (a HEADERS frame and
// its CONTINUATIONs, RFC 9113, section 4.3). A server bounds the bytes a
// header list decodes to, but a CONTINUATION may carry no byte, or bytes
// that decode to nothing: without a bound on the frames, a client keeps
// the server reading one block for ever (CVE-2023-45288's class; Go's
// server, x/net's and the one net/http bundles, cuts only a block whose
// frame outgrows twice the list bytes it still accepts, so empty frames
// pass). Clients fill each frame up to the frame size the
// server allows, at least 16 KiB (RFC 9113, section 4.2): browsers, curl
// (nghttp2) and Go's client send a 64 KiB block in 4 or 5 frames. 128
// frames carry the edge's default header limit (64 KiB) in frames of 512
// bytes, net/http's (1 MiB) in frames of 8 KiB, and cost a flood of empty
// frames about a kilobyte before the connection is closed.
const maxBlockFrames = 128

// blockSlack is the room a header block has over twice the header limit
// (see h2Tap.maxBlock): one frame of the least size a server may set.
const blockSlack = 16 << 10

// h2Tap decodes the client side of an HTTP/2 connection in step with the
// server: frame headers, HPACK header blocks, and the frames of h2fp.
type h2Tap struct {
	c        *Conn
	ja4h     bool
	max      int // header list bytes, as the server's MaxHeaderBytes
	maxBlock int // header block bytes (HPACK-encoded, padding included)

	preface int // preface bytes matched

	hdr    [9]byte // frame header being read
	hn     int
	typ    byte
	flags  byte
	stream uint32
	left   int // payload bytes of the current frame still to come

	item      [8]byte // fixed-size payload item being collected
	in        int
	want      int // item size; 0 when the payload is skipped or streamed
	blockLeft int // header block bytes of the current frame still to come

	dec         *hpack.Decoder
	inBlock     bool
	blockStream uint32
	blockReq    bool   // the open block is a request's header (not trailers)
	blockFrames int    // frames of the open block so far
	blockBytes  int    // payload bytes of the open block's frames so far
	blind       bool   // HPACK failed: frames are still followed, not decoded
	lastStream  uint32 // highest stream that opened a request
	tooBig      bool
	listSize    int
	fields      fields // of the open block

	settings, priority       []byte
	nsettings, npriority     int
	settingsSeen, windowSeen bool
	window                   uint32
	h2fp                     string // set by the first request
	memo                     *memo  // nil until a request needs it, and after Conn.Rest

	hook func(hpack.HeaderField) // Conn.SetFieldHook's

	// cutAt, after feed returned ErrFlood, is the end of the header of
	// the frame past the bounds in the bytes fed (at least 1: its last
	// byte was among them); 0 otherwise.
	cutAt int
}

func newH2Tap(c *Conn, cfg Config) *h2Tap {
	t := &h2Tap{c: c, ja4h: cfg.JA4H, max: cfg.maxHeaderBytes()}
	// An encoder sends a header list in about as many bytes as the list
	// counts (RFC 7541 counts 32 bytes a field over its name and value;
	// Huffman is used when it is shorter): twice the limit, as x/net's
	// server allows a frame twice the list bytes left, and a frame's room.
	t.maxBlock = 2*t.max + blockSlack
	t.fields.seed = c.seed
	t.dec = hpack.NewDecoder(4096, t.emit)
	t.dec.SetAllowedMaxDynamicTableSize(cfg.maxHPACKTable())
	t.dec.SetMaxStringLength(t.max)
	return t
}

// feed consumes p, the next bytes of the connection.
func (t *h2Tap) feed(p []byte) error {
	whole := len(p)
	t.cutAt = 0
	for len(p) > 0 {
		switch {
		case t.preface < len(h2Preface):
			n := min(len(p), len(h2Preface)-t.preface)
			if string(p[:n]) != h2Preface[t.preface:t.preface+n] {
				return fmt.Errorf("%w: no HTTP/2 client preface", ErrMalformed)
			}
			t.preface += n
			p = p[n:]
		case t.hn < len(t.hdr):
			n := copy(t.hdr[t.hn:], p)
			t.hn += n
			p = p[n:]
			if t.hn == len(t.hdr) {
				if err := t.startFrame(); err != nil {
					if errors.Is(err, ErrFlood) {
						t.cutAt = whole - len(p)
					}
					return err
				}
			}
		default:
			var err error
			if p, err = t.payload(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// startFrame reads the frame header (RFC 9113, section 4.1).
func (t *h2Tap) startFrame() error {
	t.left = int(t.hdr[0])<<16 | int(t.hdr[1])<<8 | int(t.hdr[2])
	t.typ, t.flags = t.hdr[3], t.hdr[4]
	t.stream = binary.BigEndian.Uint32(t.hdr[5:]) & (1<<31 - 1)
	t.in, t.want, t.blockLeft = 0, 0, 0
	if t.inBlock && (t.typ != frameContinuation || t.stream != t.blockStream) {
		return fmt.Errorf("%w: frame type %d inside a header block", ErrMalformed, t.typ)
	}
	switch t.typ {
	case frameHeaders:
		if t.stream == 0 {
			return fmt.Errorf("%w: HEADERS on stream 0", ErrMalformed)
		}
		t.blockFrames, t.blockBytes = 0, 0
		if err := t.countBlock(); err != nil {
			return err
		}
		if t.flags&flagPadded != 0 {
			t.want++
		}
		if t.flags&flagPriority != 0 {
			t.want += 5
		}
	case frameContinuation:
		if !t.inBlock {
			return fmt.Errorf("%w: CONTINUATION without HEADERS", ErrMalformed)
		}
		if err := t.countBlock(); err != nil {
			return err
		}
		t.blockLeft = t.left
	case frameSettings:
		switch {
		case t.stream != 0 || t.left%6 != 0:
			return fmt.Errorf("%w: bad SETTINGS frame", ErrMalformed)
		case t.flags&flagAck == 0 && t.left > 0:
			t.want = 6
		}
	case framePriority:
		if t.left != 5 || t.stream == 0 {
			return fmt.Errorf("%w: bad PRIORITY frame", ErrMalformed)
		}
		t.want = 5
	case frameWindowUpdate:
		if t.left != 4 {
			return fmt.Errorf("%w: bad WINDOW_UPDATE frame", ErrMalformed)
		}
		t.want = 4
	}
	if t.want > t.left {
		return fmt.Errorf("%w: frame type %d too short", ErrMalformed, t.typ)
	}
	if t.typ == frameHeaders && t.want == 0 {
		if err := t.startHeaders(); err != nil {
			return err
		}
	}
	if t.left == 0 {
		return t.endFrame()
	}
	return nil
}

// countBlock counts the frame whose header was just read against the
// bounds of its header block, before any byte of its payload is read.
func (t *h2Tap) countBlock() error {
	t.blockFrames++
	t.blockBytes += t.left
	switch {
	case t.blockFrames > maxBlockFrames:
		return fmt.Errorf("%w: more than %d frames", ErrFlood, maxBlockFrames)
	case t.blockBytes > t.maxBlock:
		return fmt.Errorf("%w: more than %d bytes", ErrFlood, t.maxBlock)
	}
	return nil
}

// payload consumes a prefix of the current frame's payload in p.
func (t *h2Tap) payload(p []byte) ([]byte, error) {
	switch {
	case t.want > 0 && t.in < t.want:
		n := copy(t.item[t.in:t.want], p)
		t.in += n
		t.left -= n
		p = p[n:]
		if t.in == t.want {
			if err := t.endItem(); err != nil {
				return nil, err
			}
		}
	case t.blockLeft > 0:
		n := min(len(p), t.blockLeft)
		if !t.blind {
			if _, err := t.dec.Write(p[:n]); err != nil {
				t.goBlind(fmt.Errorf("%w: HPACK: %w", ErrMalformed, err))
			}
		}
		t.blockLeft -= n
		t.left -= n
		p = p[n:]
	default: // padding, DATA and frames h2fp does not use
		n := min(len(p), t.left)
		t.left -= n
		p = p[n:]
	}
	if t.left == 0 {
		return p, t.endFrame()
	}
	return p, nil
}

// endItem acts on a fixed-size piece of a payload.
func (t *h2Tap) endItem() error {
	b := t.item[:t.want]
	switch t.typ {
	case frameHeaders:
		t.want = 0
		return t.startHeaders()
	case frameSettings: // RFC 9113, section 6.5.1
		if !t.settingsSeen && t.nsettings < maxSettings {
			if t.nsettings > 0 {
				t.settings = append(t.settings, ';')
			}
			t.settings = strconv.AppendUint(t.settings, uint64(binary.BigEndian.Uint16(b)), 10)
			t.settings = append(t.settings, ':')
			t.settings = strconv.AppendUint(t.settings, uint64(binary.BigEndian.Uint32(b[2:])), 10)
			t.nsettings++
		}
		t.in = 0 // the next setting
	case framePriority: // RFC 9113, section 6.3
		if t.h2fp == "" && t.npriority < maxPriorities {
			if t.npriority > 0 {
				t.priority = append(t.priority, ',')
			}
			dep := binary.BigEndian.Uint32(b)
			t.priority = strconv.AppendUint(t.priority, uint64(t.stream), 10)
			t.priority = append(t.priority, ':', '0'+byte(dep>>31), ':')
			t.priority = strconv.AppendUint(t.priority, uint64(dep&(1<<31-1)), 10)
			t.priority = append(t.priority, ':')
			t.priority = strconv.AppendUint(t.priority, uint64(b[4])+1, 10)
			t.npriority++
		}
	case frameWindowUpdate: // RFC 9113, section 6.9
		if t.stream == 0 && !t.windowSeen && t.h2fp == "" {
			t.window, t.windowSeen = binary.BigEndian.Uint32(b)&(1<<31-1), true
		}
	}
	return nil
}

// startHeaders begins the header block of a HEADERS frame whose pad length
// and priority fields have been read.
func (t *h2Tap) startHeaders() error {
	pad := 0
	if t.flags&flagPadded != 0 {
		pad = int(t.item[0])
	}
	t.blockLeft = t.left - pad
	if t.blockLeft < 0 {
		return fmt.Errorf("%w: padding longer than HEADERS payload", ErrMalformed)
	}
	t.inBlock, t.blockStream = true, t.stream
	t.blockReq = t.stream > t.lastStream && t.stream%2 == 1
	if t.blockReq {
		t.lastStream = t.stream
	}
	t.fields.reset()
	t.tooBig, t.listSize = false, 0
	return nil
}

// endFrame acts on a frame whose payload has been read.
func (t *h2Tap) endFrame() error {
	t.hn = 0
	switch t.typ {
	case frameSettings:
		if t.flags&flagAck == 0 {
			t.settingsSeen = true
		}
	case frameHeaders, frameContinuation:
		if t.flags&flagEndHeaders != 0 {
			return t.endBlock()
		}
	}
	return nil
}

// emit receives each decoded header field of the open block.
func (t *h2Tap) emit(f hpack.HeaderField) {
	if t.hook != nil {
		t.hook(f)
	}
	if !t.blockReq || t.tooBig {
		return
	}
	if t.listSize += int(f.Size()); t.listSize > t.max {
		t.tooBig = true // the server answers 431; nothing to pair
		return
	}
	t.fields.add(f.Name, f.Value, t.ja4h)
}

// goBlind stops decoding header blocks after an HPACK error: the tap lets
// go of its table and fingerprints and reports err as Conn.Err, but goes on
// following frames, whose header blocks it still bounds. The server's own
// decoder may have taken what the tap's refused (x/net allows strings a
// little longer than the header limit).
func (t *h2Tap) goBlind(err error) {
	t.blind, t.dec, t.hook, t.memo = true, nil, nil, nil
	t.fields = fields{}
	t.settings, t.priority = nil, nil
	t.c.stop(err)
}

// endBlock closes a header block and queues a request's fingerprint.
func (t *h2Tap) endBlock() error {
	t.inBlock = false
	if t.blind {
		return nil
	}
	if err := t.dec.Close(); err != nil {
		t.goBlind(fmt.Errorf("%w: HPACK: %w", ErrMalformed, err))
		return nil
	}
	if !t.blockReq || t.tooBig || t.fields.method == "" {
		return nil // trailers, or a request the server refuses
	}
	if t.h2fp == "" {
		t.h2fp = t.fingerprint(t.fields.names)
	}
	if t.memo == nil {
		t.memo = new(memo)
	}
	t.c.push(t.fields.pending(H2, t.ja4h, t.h2fp, t.memo))
	return nil
}

// fingerprint returns h2fp, given the first request's header names.
func (t *h2Tap) fingerprint(names []string) string {
	b := append([]byte(nil), t.settings...)
	b = append(b, '|')
	if t.windowSeen {
		b = strconv.AppendUint(b, uint64(t.window), 10)
	} else {
		b = append(b, "00"...)
	}
	b = append(b, '|')
	if t.npriority > 0 {
		b = append(b, t.priority...)
	} else {
		b = append(b, '0')
	}
	b = append(b, '|')
	first := true
	for _, n := range names {
		if len(n) < 2 || n[0] != ':' {
			continue
		}
		switch n {
		case ":method", ":authority", ":scheme", ":path":
		default:
			continue
		}
		if !first {
			b = append(b, ',')
		}
		b = append(b, n[1])
		first = false
	}
	t.settings, t.priority = nil, nil // not needed any more
	return string(b)
}

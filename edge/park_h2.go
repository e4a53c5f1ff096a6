package edge

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/maatproxy/maat/httpfp"
)

// An idle HTTP/2 connection is parked too. x/net's server keeps, for as
// long as a connection lives, two goroutines (its serving loop and its
// frame reader, about 12 KiB of stack) and its connection state (HPACK
// tables, write scheduler, buffers: about 17 KiB) — and it has no way to
// let go of a connection and take it up again. So the edge ends the
// server's connection and starts another on the same TLS connection when
// the client's next frame comes, and keeps between the two only what the
// protocol needs to go on:
//
//   - the client's settings, replayed to the new server as its first
//     SETTINGS frame (the preface is not read again);
//   - the flow-control windows of the connection, which the new server
//     is brought to with a WINDOW_UPDATE each way (the server's own
//     startup SETTINGS and WINDOW_UPDATE, which the client already has,
//     are not sent again);
//   - the client's HPACK state, which is the fingerprint tap's decoder:
//     from the first resumption on, each header block the client sends is
//     decoded by the tap and given to the new server encoded anew, as
//     literals, so that the new server's decoder needs no table. The
//     server's own encoder starts empty; the client's decoder, which holds
//     more, stays consistent with it (HPACK refers to entries from the
//     newest, and evicts from the oldest);
//   - the highest stream the client opened: frames on the streams of an
//     earlier server, all closed, are what x/net does with closed streams
//     (dropped, or for HEADERS and DATA, the end of the connection).
//
// A connection is parked only between frames, with no stream open and no
// GOAWAY either way, nothing being written, no SETTINGS or PING
// acknowledgement owed either way, once a probe has shown x/net's write
// queue empty (parkStep), and when the new server's windows can be brought
// to the client's. The idle timeout runs on across
// parking; a parked connection the timeout or Shutdown ends is sent a
// GOAWAY before it is closed, as x/net does.

// h2Link is the state of a client's HTTP/2 connection that outlives the
// x/net server connections serving it one after the other.
type h2Link struct {
	s  *Server
	hc *httpfp.Conn

	preface int       // bytes of the client preface still to come
	in      frameScan // the client's frames, as read
	out     frameScan // the server's frames, as written

	// Set by reads (the serving connection's reader goroutine):
	settings [10]struct {
		set bool
		v   uint32
	} // the client's, by id (1–9)
	clientWU   int64  // the client's connection WINDOW_UPDATEs
	recvData   int64  // DATA payload bytes received
	lastStream uint32 // the highest stream the client opened
	inBlock    bool   // within a header block
	// Frames owed an answer, answered: SETTINGS each way and the
	// client's PINGs. A connection owed one is not parked: a new server
	// would not know of it (or, given an acknowledgement it did not ask
	// for, would end the connection). Each side's are set by its scan.
	inSettings, inAcks, inPings, outSettings, outAcks, outPingAcks int

	// Set by writes:
	granted   int64 // the server's connection WINDOW_UPDATEs
	sentData  int64 // DATA payload bytes sent
	startupWU int64 // the first server's startup WINDOW_UPDATE; -1 before it is known

	goaway    atomic.Bool  // sent or received: the connection is ending
	idleSince atomic.Int64 // when it fell idle with no stream opened since (Unix ns); 0 while active
	oldMax    uint32       // the highest stream of an earlier server connection
	resumed   bool         // an earlier server connection served it
}

// The RFC's initial flow-control window (RFC 9113, section 6.9.2).
const h2InitialWindow = 65535

func newH2Link(s *Server, hc *httpfp.Conn) *h2Link {
	return &h2Link{s: s, hc: hc, startupWU: -1, preface: len(http2.ClientPreface)}
}

// recvWindow is what the client may still send on the connection, as it
// sees it.
func (l *h2Link) recvWindow() int64 { return h2InitialWindow + l.granted - l.recvData }

// sendWindow is what the server may still send on the connection.
func (l *h2Link) sendWindow() int64 { return h2InitialWindow + l.clientWU - l.sentData }

// frameScan follows frames in a byte stream: their headers, and the
// fixed-size items of SETTINGS and WINDOW_UPDATE payloads.
type frameScan struct {
	hdr    [9]byte
	hn     int
	left   int // payload bytes still to come
	typ    http2.FrameType
	flags  http2.Flags
	stream uint32
	length int // of the current frame's payload
	item   [6]byte
	in     int
}

// step consumes a prefix of p: a header's bytes or payload bytes of the
// current frame. It returns the bytes consumed, and whether a frame
// header was completed (head) or an item filled (item, in s.item).
func (s *frameScan) step(p []byte, itemSize int) (n int, head, item bool) {
	if s.hn < len(s.hdr) {
		n = copy(s.hdr[s.hn:], p)
		s.hn += n
		if s.hn < len(s.hdr) {
			return n, false, false
		}
		s.left = int(s.hdr[0])<<16 | int(s.hdr[1])<<8 | int(s.hdr[2])
		s.length = s.left
		s.typ, s.flags = http2.FrameType(s.hdr[3]), http2.Flags(s.hdr[4])
		s.stream = binary.BigEndian.Uint32(s.hdr[5:]) & (1<<31 - 1)
		s.in = 0
		if s.left == 0 {
			s.hn = 0
		}
		return n, true, false
	}
	if itemSize > 0 {
		n = min(len(p), itemSize-s.in, s.left)
		copy(s.item[s.in:], p[:n])
		s.in += n
		item = s.in == itemSize
		if item {
			s.in = 0
		}
	} else {
		n = min(len(p), s.left)
	}
	s.left -= n
	if s.left == 0 {
		s.hn = 0
	}
	return n, false, item
}

// ended reports whether the last step ended a frame.
func (s *frameScan) ended() bool { return s.hn == 0 }

// itemSize is the size of the items to collect of the current frame's
// payload: a connection WINDOW_UPDATE's increment, and with settings a
// SETTINGS frame's entries. (A header's bytes take none.)
func (s *frameScan) itemSize(settings bool) int {
	switch {
	case settings && s.typ == http2.FrameSettings && s.flags&http2.FlagSettingsAck == 0 && s.stream == 0:
		return 6
	case s.typ == http2.FrameWindowUpdate && s.stream == 0:
		return 4
	}
	return 0
}

// scanIn follows the client's bytes p.
func (l *h2Link) scanIn(p []byte) {
	if l.preface > 0 {
		n := min(len(p), l.preface)
		l.preface -= n
		p = p[n:]
	}
	s := &l.in
	for len(p) > 0 {
		n, head, item := s.step(p, s.itemSize(true))
		p = p[n:]
		switch {
		case head:
			switch s.typ {
			case http2.FrameData:
				l.recvData += int64(s.left)
			case http2.FrameHeaders:
				if s.stream%2 == 1 && s.stream > l.lastStream {
					l.lastStream = s.stream
				}
				l.inBlock = s.flags&http2.FlagHeadersEndHeaders == 0
			case http2.FrameContinuation:
				l.inBlock = s.flags&http2.FlagContinuationEndHeaders == 0
			case http2.FrameGoAway:
				l.goaway.Store(true)
			case http2.FrameSettings:
				if s.flags&http2.FlagSettingsAck != 0 {
					l.inAcks++
				} else {
					l.inSettings++
				}
			case http2.FramePing:
				if s.flags&http2.FlagPingAck == 0 {
					l.inPings++
				}
			}
		case item && s.typ == http2.FrameSettings:
			if id := binary.BigEndian.Uint16(s.item[:]); id > 0 && int(id) < len(l.settings) {
				l.settings[id].set, l.settings[id].v = true, binary.BigEndian.Uint32(s.item[2:])
			}
		case item && s.typ == http2.FrameWindowUpdate:
			l.clientWU += int64(binary.BigEndian.Uint32(s.item[:]) & (1<<31 - 1))
		}
	}
}

// atRest reports whether the client's bytes so far end between frames,
// outside a header block.
func (l *h2Link) atRest() bool { return l.preface == 0 && l.in.hn == 0 && !l.inBlock }

// greeting is what a new server connection reads first, in place of the
// preface the client sent once: the client's settings, the
// acknowledgement of the server's (which the client acknowledged long
// ago), and the connection window the client gave beyond the initial one.
func (l *h2Link) greeting() []byte {
	n := 0
	for _, st := range l.settings {
		if st.set {
			n++
		}
	}
	b := appendFrameHeader(nil, 6*n, http2.FrameSettings, 0, 0)
	for id, st := range l.settings {
		if st.set {
			b = binary.BigEndian.AppendUint16(b, uint16(id))
			b = binary.BigEndian.AppendUint32(b, st.v)
		}
	}
	b = appendFrameHeader(b, 0, http2.FrameSettings, http2.FlagSettingsAck, 0)
	if w := l.sendWindow() - h2InitialWindow; w > 0 {
		b = appendFrameHeader(b, 4, http2.FrameWindowUpdate, 0, 0)
		b = binary.BigEndian.AppendUint32(b, uint32(w))
	}
	return b
}

func appendFrameHeader(b []byte, length int, t http2.FrameType, f http2.Flags, stream uint32) []byte {
	b = append(b, byte(length>>16), byte(length>>8), byte(length), byte(t), byte(f))
	return binary.BigEndian.AppendUint32(b, stream)
}

// goAway sends the client a GOAWAY (no error) and closes the connection:
// a parked connection's end.
func (l *h2Link) goAway() {
	b := appendFrameHeader(make([]byte, 0, 17), 8, http2.FrameGoAway, 0, 0)
	b = binary.BigEndian.AppendUint32(b, l.lastStream)
	b = binary.BigEndian.AppendUint32(b, uint32(http2.ErrCodeNo))
	_ = l.hc.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = l.hc.Write(b)
	_ = l.hc.Close()
}

// h2Conn is a client's HTTP/2 connection as one x/net server connection
// holds it.
type h2Conn struct {
	*httpfp.Conn
	l *h2Link

	// Reads, on x/net's reader goroutine.
	pend      []byte // bytes to give before reading more: the greeting, translated frames
	translate bool   // header blocks are encoded anew (a resumed connection)
	enc       *hpack.Encoder
	encBuf    bytes.Buffer
	blockSize int64 // of the header block being translated, as x/net counts it
	maxList   int64 // x/net's header list limit
	scratch   []byte
	rewrite   bool    // the current frame is a header block fragment to translate
	first     bool    // and the first of its block (HEADERS)
	prefix    [6]byte // a HEADERS frame's pad length and priority, as read
	prefixLen int     // their size
	prefixGot int
	passLeft  int // payload bytes of a passed frame still to read into the caller's buffer

	idle    atomic.Bool // x/net said idle
	short   atomic.Bool // the read deadline set is the time to park
	active  atomic.Bool // x/net said active at least once (its startup pair aside)
	parking atomic.Bool // the last Read parked it; Close hands it over
	probing atomic.Bool // probe is not probeNone

	gone atomic.Bool // parked: the connection is no longer this one's

	wmu     sync.Mutex // held by Write; taken to park, so nothing is being written
	dead    bool       // parked: writes fail
	startup startup    // a resumed server's startup frames still to take out
	holding bool       // a header's first bytes are held
	topUp   int64      // what brings the client's window to the new server's
	outAct  outAction  // of the frame being written
	probe   int        // probeNone…; under wmu
	wbuf    []byte
}

// startup is a set of a resumed server's startup frames: those the client
// has had from the first server.
type startup uint8

const (
	startSettings startup = 1 << iota // its SETTINGS
	startAck                          // its acknowledgement of the greeting's
	startWindow                       // its connection WINDOW_UPDATE
)

// errOldStream ends a resumed connection whose client sent HEADERS or DATA
// on a stream closed before it was parked, as x/net ends one that does.
var errOldStream = errors.New("edge: http2: frame on a closed stream")

func (l *h2Link) conn() *h2Conn {
	c := &h2Conn{Conn: l.hc, l: l}
	if l.resumed {
		c.pend = l.greeting()
		c.translate = true
		c.enc = hpack.NewEncoder(&c.encBuf)
		c.enc.SetMaxDynamicTableSize(0) // literals only: the new decoder needs no table
		c.maxList = int64(l.s.h1.MaxHeaderBytes) + 10*32
		if l.s.h1.MaxHeaderBytes <= 0 {
			c.maxList = 1<<20 + 10*32
		}
		c.startup = startSettings | startAck
		if l.startupWU > 0 {
			c.startup |= startWindow
			c.topUp = h2InitialWindow + l.startupWU - l.recvWindow()
		}
		l.hc.SetFieldHook(c.field)
	}
	return c
}

// field encodes a header field of the block being translated. Past x/net's
// header list limit, the field that crossed it is the last: x/net answers
// 431 all the same, and a block of indexed fields cannot grow without end.
func (c *h2Conn) field(f hpack.HeaderField) {
	if c.blockSize > c.maxList {
		return
	}
	c.blockSize += int64(f.Size())
	_ = c.enc.WriteField(f) // writes to a bytes.Buffer
}

// setIdle and setActive are called by the ConnState hook, from x/net's
// serving goroutine, while its reader may wait in Read.
func (c *h2Conn) setIdle() {
	c.l.idleSince.CompareAndSwap(0, time.Now().UnixNano())
	c.idle.Store(true)
	c.short.Store(true)
	_ = c.Conn.SetReadDeadline(time.Now().Add(c.l.s.parkAfter()))
}

func (c *h2Conn) setActive() {
	c.idle.Store(false)
	if !c.active.Swap(true) {
		return // x/net's startup pair: active, then idle; no stream opened
	}
	c.l.idleSince.Store(0)
	if c.short.Swap(false) {
		_ = c.Conn.SetReadDeadline(time.Time{})
	}
}

// read reads from the tap; when the time to park passes with nothing
// read, it parks the connection if it can (io.EOF: x/net ends its
// connection and calls Close).
func (c *h2Conn) read(p []byte) (int, error) {
	for {
		n, err := c.Conn.Read(p)
		if n > 0 && c.probing.Load() {
			c.clientSpoke()
		}
		if n > 0 || !isTimeout(err) || !c.short.Load() {
			return n, err
		}
		switch c.parkStep() {
		case parkNow:
			return 0, io.EOF
		case parkProbe:
			_ = c.Conn.SetReadDeadline(time.Now().Add(probeWait))
			return 0, nil // the caller reads the probe from pend
		case parkWait:
			if err := c.Conn.SetReadDeadline(time.Now().Add(probeWait)); err != nil {
				return 0, err
			}
		default:
			c.short.Store(false)
			if err := c.Conn.SetReadDeadline(time.Time{}); err != nil {
				return 0, err
			}
		}
	}
}

// What parkStep decides.
type parkAction uint8

const (
	parkNo    parkAction = iota // the connection stays with x/net
	parkProbe                   // the probe is in pend, for x/net to read
	parkWait                    // the probe's acknowledgement is still to come
	parkNow                     // parked: x/net is to read io.EOF
)

// probeWait is how often a connection whose probe is out looks whether its
// acknowledgement was written.
const probeWait = 5 * time.Millisecond

// The probe: a PING x/net reads as if the client had sent it. x/net
// queues its acknowledgement behind every frame it queued before (it
// writes the connection's control frames in order, one at a time, and an
// idle connection has no stream's frame to write), so once the edge has
// taken the acknowledgement out of what x/net writes, nothing x/net meant
// to send is left in its queue, and its connection can end.
var probePing = appendFrameHeader(nil, 8, http2.FramePing, 0, 0) // payload: 8 zero bytes

func init() { probePing = append(probePing, make([]byte, 8)...) }

// Probe states.
const (
	probeNone  = iota
	probeOut   // read by x/net; its acknowledgement to be taken out
	probeAcked // taken out: x/net's queue was empty
	probeStale // out, but the client spoke since: taken out, it says nothing
)

// clientSpoke ends the probe's say: a frame the client sent may have been
// answered after the acknowledgement.
func (c *h2Conn) clientSpoke() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	switch c.probe {
	case probeOut:
		c.probe = probeStale
	case probeAcked:
		c.probe = probeNone
		c.probing.Store(false)
	}
}

// parkStep decides what an idle connection whose time to park passed does:
// stay, or send the probe, or wait for its acknowledgement, or park.
func (c *h2Conn) parkStep() parkAction {
	l := c.l
	if !parkable || !c.idle.Load() || !l.atRest() || len(c.pend) > 0 || l.hc.Err() != nil || socketOf(l.hc) == nil {
		return parkNo
	}
	if !c.wmu.TryLock() {
		return parkNo // a write is under way: a client not reading
	}
	defer c.wmu.Unlock()
	if c.startup != 0 || l.goaway.Load() || l.out.hn != 0 || l.sendWindow() < h2InitialWindow || l.startupWU < 0 ||
		l.outSettings != l.inAcks || l.inSettings != l.outAcks || l.inPings != l.outPingAcks {
		return parkNo
	}
	if t := l.s.h2.IdleTimeout; t > 0 && time.Since(time.Unix(0, l.idleSince.Load())) >= t {
		return parkNo // x/net's idle timer is about to end it
	}
	switch c.probe {
	case probeNone:
		c.probe = probeOut
		c.probing.Store(true)
		c.pend = append(c.scratchPend(), probePing...)
		return parkProbe
	case probeOut, probeStale:
		return parkWait
	}
	c.dead = true
	c.parking.Store(true)
	return parkNow
}

// Read gives x/net the client's frames, after the greeting of a resumed
// connection; on a resumed connection, header blocks are translated.
func (c *h2Conn) Read(p []byte) (int, error) {
	for {
		if len(c.pend) > 0 {
			n := copy(p, c.pend)
			c.pend = c.pend[n:]
			return n, nil
		}
		if !c.translate {
			n, err := c.read(p)
			c.l.scanIn(p[:n])
			return n, err
		}
		if c.passLeft > 0 { // a passed frame's payload, straight into p
			n, err := c.read(p[:min(len(p), c.passLeft)])
			c.l.scanIn(p[:n])
			c.passLeft -= n
			return n, err
		}
		if err := c.translateStep(); err != nil {
			return 0, err
		}
	}
}

// translateStep reads a frame header, or a translated or dropped frame's
// payload, and queues what x/net is to read of it.
func (c *h2Conn) translateStep() error {
	l := c.l
	s := &l.in
	if s.hn < len(s.hdr) { // a frame header, bytes of it only
		var h [9]byte
		n, err := c.read(h[:len(h)-s.hn])
		l.scanIn(h[:n])
		if err != nil {
			return err
		}
		if n == 0 || s.hn != 0 && s.hn < len(s.hdr) {
			return nil
		}
		if err := c.l.hc.Err(); err != nil {
			return fmt.Errorf("edge: http2: %w", err)
		}
		return c.startFrame()
	}
	if c.scratch == nil {
		c.scratch = make([]byte, 4096)
	}
	n, err := c.read(c.scratch[:min(len(c.scratch), s.left)])
	l.scanIn(c.scratch[:n])
	if c.rewrite && c.prefixGot < c.prefixLen {
		c.prefixGot += copy(c.prefix[c.prefixGot:c.prefixLen], c.scratch[:n])
	}
	if err != nil {
		return err
	}
	if err := l.hc.Err(); err != nil {
		return fmt.Errorf("edge: http2: %w", err)
	}
	if s.ended() {
		c.endFrame()
	}
	return nil
}

// startFrame decides what becomes of the frame whose header was just read.
func (c *h2Conn) startFrame() error {
	s := &c.l.in
	c.rewrite = false
	old := s.stream != 0 && s.stream <= c.l.oldMax
	switch {
	case old && (s.typ == http2.FrameHeaders || s.typ == http2.FrameData):
		return errOldStream
	case old && (s.typ == http2.FrameWindowUpdate || s.typ == http2.FrameRSTStream || s.typ == http2.FramePriority):
		// Dropped (read, not passed on): what x/net does with them on a
		// closed stream.
	case (s.typ == http2.FrameHeaders || s.typ == http2.FrameContinuation) && s.length <= h2MaxFrame:
		c.rewrite, c.first = true, s.typ == http2.FrameHeaders
		c.prefixLen, c.prefixGot = 0, 0
		if c.first {
			c.blockSize = 0
			if s.flags&http2.FlagHeadersPadded != 0 {
				c.prefixLen++
			}
			if s.flags&http2.FlagHeadersPriority != 0 {
				c.prefixLen += 5
			}
		}
	default:
		c.pend = append(c.scratchPend(), s.hdr[:]...)
		c.passLeft = s.left
		return nil
	}
	if s.ended() {
		c.endFrame()
	}
	return nil
}

func (c *h2Conn) scratchPend() []byte {
	if cap(c.pend) < 64 {
		return make([]byte, 0, 64)
	}
	return c.pend[:0]
}

// endFrame queues the translation of a header block fragment whose bytes
// the tap has decoded: the fields it completed, as one frame or more of
// at most h2MaxFrame, HEADERS first for a HEADERS frame, END_HEADERS on
// the last when it was on the fragment. Padding goes; a priority stays
// (x/net refuses a stream that depends on itself).
func (c *h2Conn) endFrame() {
	if !c.rewrite {
		return
	}
	c.rewrite = false
	s := &c.l.in
	end := s.flags&http2.FlagHeadersEndHeaders != 0 // the same bit for CONTINUATION
	b := c.encBuf.Bytes()
	out := c.scratchPend()
	for first := true; first || len(b) > 0; first = false {
		var prio []byte
		typ, flags := http2.FrameContinuation, http2.Flags(0)
		if first && c.first {
			typ, flags = http2.FrameHeaders, s.flags&http2.FlagHeadersEndStream
			if s.flags&http2.FlagHeadersPriority != 0 && c.prefixGot == c.prefixLen {
				prio = c.prefix[c.prefixLen-5 : c.prefixLen]
				flags |= http2.FlagHeadersPriority
			}
		}
		chunk := b[:min(len(b), h2MaxFrame-len(prio))]
		b = b[len(chunk):]
		if end && len(b) == 0 {
			flags |= http2.FlagHeadersEndHeaders
		}
		out = appendFrameHeader(out, len(prio)+len(chunk), typ, flags, s.stream)
		out = append(out, prio...)
		out = append(out, chunk...)
	}
	c.pend = out
	c.encBuf.Reset()
}

// Write passes x/net's frames on, following them; a resumed connection's
// startup frames, which the client has had from the first, are dropped,
// and its connection WINDOW_UPDATE becomes what brings the client's
// window to the new server's.
func (c *h2Conn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.dead {
		return 0, net.ErrClosed
	}
	if c.startup == 0 && !c.holding && (c.probe == probeNone || c.probe == probeAcked) {
		c.l.scanOut(p, nil)
		return c.Conn.Write(p)
	}
	c.wbuf = c.l.scanOut(p, c)
	c.holding = c.l.out.hn > 0 && c.l.out.hn < len(c.l.out.hdr)
	if len(c.wbuf) > 0 {
		if _, err := c.Conn.Write(c.wbuf); err != nil {
			return 0, err
		}
	}
	if cap(c.wbuf) > 4096 {
		c.wbuf = nil
	}
	return len(p), nil
}

// What becomes of a frame the server writes.
type outAction uint8

const (
	outPass    outAction = iota
	outDrop              // a resumed server's startup frame
	outReplace           // its WINDOW_UPDATE, whose increment is topUp
)

// scanOut follows the server's bytes p. With c, it filters them for a
// resumed connection's startup and returns what is to be written; the
// bytes of a header not yet whole are held until it is.
func (l *h2Link) scanOut(p []byte, c *h2Conn) []byte {
	s := &l.out
	var out []byte
	if c != nil {
		out = c.wbuf[:0]
	}
	for len(p) > 0 {
		inHeader := s.hn < len(s.hdr)
		n, head, full := s.step(p, s.itemSize(false))
		chunk := p[:n]
		p = p[n:]
		act := outPass
		if c != nil {
			if head {
				c.outAct = c.startupAction()
			}
			act = c.outAct
		}
		switch {
		case head && act == outPass:
			switch {
			case s.typ == http2.FrameData:
				l.sentData += int64(s.length)
			case s.typ == http2.FrameGoAway:
				l.goaway.Store(true)
			case s.typ == http2.FrameSettings && s.flags&http2.FlagSettingsAck != 0:
				l.outAcks++
			case s.typ == http2.FrameSettings:
				l.outSettings++
			case s.typ == http2.FramePing && s.flags&http2.FlagPingAck != 0:
				l.outPingAcks++
			}
			if c != nil {
				out = append(out, s.hdr[:]...)
			}
		case head && act == outReplace:
			out = append(out, s.hdr[:]...)
			out = binary.BigEndian.AppendUint32(out, uint32(c.topUp))
			l.granted += c.topUp
		case head, inHeader, act != outPass:
		default:
			if full {
				inc := int64(binary.BigEndian.Uint32(s.item[:4]) & (1<<31 - 1))
				if l.startupWU < 0 {
					// x/net queues its startup WINDOW_UPDATE before it reads
					// a byte, and writes the connection's control frames in
					// order: its first is that one. A server sending none
					// (a connection window of 64 KiB) is never parked.
					l.startupWU = inc
				}
				l.granted += inc
			}
			if c != nil {
				out = append(out, chunk...)
			}
		}
	}
	return out
}

// startupAction decides what becomes of a frame a resumed server writes,
// its header just read: its SETTINGS, its WINDOW_UPDATE and its
// acknowledgement of the greeting's SETTINGS are its startup, the first
// of each.
func (c *h2Conn) startupAction() outAction {
	s := &c.l.out
	if s.typ == http2.FramePing && s.flags&http2.FlagPingAck != 0 && (c.probe == probeOut || c.probe == probeStale) {
		// The probe's: written after every frame queued before it.
		if c.probe == probeOut {
			c.probe = probeAcked
		} else {
			c.probe = probeNone
			c.probing.Store(false)
		}
		return outDrop
	}
	var f startup
	switch {
	case s.typ == http2.FrameSettings && s.flags&http2.FlagSettingsAck == 0:
		f = startSettings
	case s.typ == http2.FrameSettings:
		f = startAck
	case s.typ == http2.FrameWindowUpdate && s.stream == 0:
		f = startWindow
	}
	if c.startup&f == 0 {
		return outPass // not a startup frame, or not the first of its kind
	}
	c.startup &^= f
	if f == startWindow && c.topUp > 0 {
		return outReplace
	}
	return outDrop
}

// Close closes the connection, or, when Read parked it, hands it to the
// poller until the client's next frame.
func (c *h2Conn) Close() error {
	if c.parking.CompareAndSwap(true, false) {
		c.gone.Store(true)
		c.l.hc.SetFieldHook(nil)
		c.l.s.parkH2(c.l)
		return nil
	}
	if c.gone.Load() {
		return nil // parked: the connection is no longer this server connection's
	}
	return c.Conn.Close()
}

// parkH2 parks l's connection until its next byte, then serves it with a
// new server connection; the idle timeout and Shutdown end it with a
// GOAWAY.
func (s *Server) parkH2(l *h2Link) {
	l.resumed = true
	l.oldMax = l.lastStream
	var deadline time.Time
	if t := s.h2.IdleTimeout; t > 0 {
		deadline = time.Unix(0, l.idleSince.Load()).Add(t)
	}
	s.park(l.hc, deadline, l)
}

// serveH2 serves l's connection until it ends or is parked.
func (s *Server) serveH2(l *h2Link) {
	c := l.conn()
	s.h2.ServeConn(c, &http2.ServeConnOpts{
		Context:          connContext(s.bg, l.hc),
		BaseConfig:       s.h1,
		Handler:          s.h1.Handler,
		SawClientPreface: l.resumed,
	})
	if c.gone.Load() {
		return
	}
	if err := l.hc.Err(); err != nil {
		s.log.LogAttrs(context.Background(), slog.LevelInfo, "http2_fingerprint_failed",
			slog.String("remote", l.hc.RemoteAddr().String()), slog.String("error", err.Error()))
	}
}

// resumeH2 serves a parked connection whose client sent a byte.
func (s *Server) resumeH2(l *h2Link) {
	if !s.trackConn(l.hc) {
		l.goAway()
		return
	}
	defer s.untrackConn(l.hc)
	s.serveH2(l)
}

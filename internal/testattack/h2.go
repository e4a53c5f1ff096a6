package testattack

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2Conn writes raw HTTP/2 frames (the requests net/http's client would
// never send) and, in its own goroutine, reads what the edge answers: each
// stream's status and end, resets, GOAWAY. It acknowledges SETTINGS and
// PING, and opens the flow-control windows again as DATA arrives, unless
// it was dialed with a zero window.
type h2Conn struct {
	conn   net.Conn
	done   chan struct{} // the reader has stopped: the connection is over
	allEnd chan struct{} // a token each time the last open stream ends

	wmu  sync.Mutex // guards the writer side
	fr   *http2.Framer
	bw   *bufio.Writer
	enc  *hpack.Encoder
	ebuf bytes.Buffer

	zeroWindow bool // never open a window: read headers, never a byte of data

	mu      sync.Mutex // guards what the reader found
	streams map[uint32]*h2Stream
	open    int    // streams not ended
	goAway  string // the GOAWAY's error code, if one came
	last    time.Time
}

// h2Stream is what became of one stream.
type h2Stream struct {
	status   string // the response's :status, if one came
	ended    bool   // END_STREAM or a reset, either way
	reset    string // the edge's RST_STREAM error code
	canceled bool   // we reset it ourselves
}

// dialH2 opens an HTTP/2 connection from src. With zeroWindow, the
// client's SETTINGS give every stream a window of zero bytes.
func (t Target) dialH2(ctx context.Context, src net.IP, zeroWindow bool) (*h2Conn, error) {
	tc, err := t.dialTLS(ctx, src, "h2")
	if err != nil {
		return nil, err
	}
	c := &h2Conn{conn: tc, done: make(chan struct{}), allEnd: make(chan struct{}, 1), zeroWindow: zeroWindow,
		streams: map[uint32]*h2Stream{}, last: time.Now()}
	c.bw = bufio.NewWriterSize(tc, 32<<10)
	c.fr = http2.NewFramer(c.bw, tc)
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.enc = hpack.NewEncoder(&c.ebuf)
	var settings []http2.Setting
	if zeroWindow {
		settings = append(settings, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	}
	c.wmu.Lock()
	_, err = io.WriteString(c.bw, http2.ClientPreface)
	if err == nil {
		err = c.fr.WriteSettings(settings...)
	}
	if err == nil {
		err = c.bw.Flush()
	}
	c.wmu.Unlock()
	if err != nil {
		tc.Close()
		return nil, err
	}
	go c.read()
	return c, nil
}

// Close closes the connection and waits for the reader.
func (c *h2Conn) Close() {
	c.conn.Close()
	<-c.done
}

// alive reports whether the connection is still up.
func (c *h2Conn) alive() bool {
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

func (c *h2Conn) read() {
	defer close(c.done)
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			if _, ok := errors.AsType[http2.StreamError](err); ok {
				continue
			}
			return
		}
		c.mu.Lock()
		c.last = time.Now()
		c.mu.Unlock()
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			c.update(f.StreamID, func(s *h2Stream) {
				if st := f.PseudoValue("status"); st != "" && s.status == "" {
					s.status = st
				}
			}, f.StreamEnded())
		case *http2.DataFrame:
			c.update(f.StreamID, func(*h2Stream) {}, f.StreamEnded())
			if n := uint32(len(f.Data())); n > 0 && !c.zeroWindow {
				c.write(func() error {
					if err := c.fr.WriteWindowUpdate(0, n); err != nil {
						return err
					}
					return c.fr.WriteWindowUpdate(f.StreamID, n)
				})
			}
		case *http2.RSTStreamFrame:
			c.update(f.StreamID, func(s *h2Stream) { s.reset = f.ErrCode.String() }, true)
		case *http2.GoAwayFrame:
			c.mu.Lock()
			c.goAway = f.ErrCode.String()
			c.mu.Unlock()
			select { // the streams the edge did not take never will be
			case c.allEnd <- struct{}{}:
			default:
			}
		case *http2.SettingsFrame:
			if !f.IsAck() {
				c.write(c.fr.WriteSettingsAck)
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				data := f.Data
				c.write(func() error { return c.fr.WritePing(true, data) })
			}
		}
	}
}

// update changes stream id's record and, if end, ends it.
func (c *h2Conn) update(id uint32, f func(*h2Stream), end bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.streams[id]
	if !ok {
		return
	}
	f(s)
	if end && !s.ended {
		s.ended = true
		c.open--
		if c.open == 0 {
			select {
			case c.allEnd <- struct{}{}:
			default:
			}
		}
	}
}

// waitEnded waits until every stream has ended or the connection has (or
// is going away), or ctx ends or within passes, and reports whether every
// stream has ended.
func (c *h2Conn) waitEnded(ctx context.Context, within time.Duration) bool {
	t := time.NewTimer(within)
	defer t.Stop()
	for !c.settled() && !c.goingAway() {
		select {
		case <-c.allEnd:
		case <-c.done:
		case <-ctx.Done():
			return false
		case <-t.C:
			return c.settled()
		}
	}
	return c.openStreams() == 0
}

// write runs f on the framer under the writer's lock and flushes.
func (c *h2Conn) write(f func() error) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := f(); err != nil {
		return err
	}
	return c.bw.Flush()
}

// request sends a request's HEADERS (and CONTINUATION frames, when the
// block is larger than a frame) on stream id, with the extra fields after
// the usual ones. It does not flush unless flush says so.
func (c *h2Conn) request(id uint32, host, method, path string, extra []hpack.HeaderField, endStream, flush bool) error {
	c.mu.Lock()
	c.streams[id] = &h2Stream{}
	c.open++
	c.mu.Unlock()
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.ebuf.Reset()
	for _, f := range [][2]string{{":method", method}, {":scheme", "https"}, {":authority", host}, {":path", path}, {"user-agent", "Go-http-client/2.0"}} {
		_ = c.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	for _, f := range extra {
		_ = c.enc.WriteField(f)
	}
	const frame = 16384 // SETTINGS_MAX_FRAME_SIZE's initial value
	block := c.ebuf.Bytes()
	first := block[:min(len(block), frame)]
	block = block[len(first):]
	err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first,
		EndStream: endStream, EndHeaders: len(block) == 0})
	for err == nil && len(block) > 0 {
		part := block[:min(len(block), frame)]
		block = block[len(part):]
		err = c.fr.WriteContinuation(id, len(block) == 0, part)
	}
	if err == nil && flush {
		err = c.bw.Flush()
	}
	return err
}

// cancel resets stream id (CANCEL), without flushing.
func (c *h2Conn) cancel(id uint32) error {
	c.mu.Lock()
	if s, ok := c.streams[id]; ok && !s.ended {
		s.ended, s.canceled = true, true
		c.open--
	}
	c.mu.Unlock()
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.fr.WriteRSTStream(id, http2.ErrCodeCancel)
}

func (c *h2Conn) flush() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.bw.Flush()
}

// openStreams is the number of streams not ended.
func (c *h2Conn) openStreams() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open
}

// settled reports whether every stream has ended, or the connection has.
func (c *h2Conn) settled() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.alive() || c.open == 0
}

// unfinished is the number of streams not ended, but for those answered
// with a status other than 200 (an error page that may sit behind a closed
// window).
func (c *h2Conn) unfinished() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, s := range c.streams {
		if !s.ended && (s.status == "" || s.status == "200") {
			n++
		}
	}
	return n
}

// goingAway reports whether the edge sent GOAWAY.
func (c *h2Conn) goingAway() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.goAway != ""
}

// quiet reports whether nothing has arrived for d, or the connection has
// ended.
func (c *h2Conn) quiet(d time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.alive() || time.Since(c.last) > d
}

// tally adds what became of each stream to t, prefixed: its status, with "then
// reset" if the edge cut it after the status; "reset CODE" before one;
// "held" while open, "conn closed" if the connection ended first. Streams
// we reset ourselves count only if the edge answered them.
func (c *h2Conn) tally(t *Tally, prefix string) {
	alive := c.alive()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.streams {
		var k string
		switch {
		case s.reset != "" && s.status != "":
			k = s.status + ", then reset " + s.reset
		case s.reset != "":
			k = "reset " + s.reset
		case s.ended && s.status != "":
			k = s.status
		case s.canceled:
			continue // ours, unanswered
		case c.goAway != "" && !s.ended:
			k = "unanswered (GOAWAY)"
		case !alive:
			k = "conn closed"
			if s.status != "" {
				k = s.status + ", then conn closed"
			}
		default:
			k = "held"
			if s.status != "" {
				k = s.status + ", held"
			}
		}
		t.Add(prefix+k, 1)
	}
	if c.goAway != "" {
		t.Add(prefix+"GOAWAY "+c.goAway, 1)
	}
}

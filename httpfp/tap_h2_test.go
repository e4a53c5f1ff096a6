package httpfp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2Client writes the client side of an HTTP/2 connection into a buffer.
type h2Client struct {
	buf  bytes.Buffer
	fr   *http2.Framer
	hbuf bytes.Buffer
	enc  *hpack.Encoder
}

func newH2Client() *h2Client {
	c := &h2Client{}
	c.buf.WriteString(h2Preface)
	c.fr = http2.NewFramer(&c.buf, nil)
	c.enc = hpack.NewEncoder(&c.hbuf)
	return c
}

// block encodes fields given as "name: value" lines.
func (c *h2Client) block(fields []string) []byte {
	c.hbuf.Reset()
	for _, f := range fields {
		n, v, _ := strings.Cut(f, ": ")
		c.enc.WriteField(hpack.HeaderField{Name: n, Value: v, Sensitive: n == "x-secret"})
	}
	return bytes.Clone(c.hbuf.Bytes())
}

// headers sends a header block, split into frames of at most split bytes.
func (c *h2Client) headers(t testing.TB, stream uint32, fields []string, split int, pad uint8) {
	t.Helper()
	b := c.block(fields)
	first := b[:min(split, len(b))]
	rest := b[len(first):]
	err := c.fr.WriteHeaders(http2.HeadersFrameParam{
		StreamID: stream, BlockFragment: first, EndHeaders: len(rest) == 0, PadLength: pad,
		Priority: http2.PriorityParam{StreamDep: 0, Weight: 41, Exclusive: stream%4 == 1},
	})
	for err == nil && len(rest) > 0 {
		n := min(split, len(rest))
		err = c.fr.WriteContinuation(stream, n == len(rest), rest[:n])
		rest = rest[n:]
	}
	if err != nil {
		t.Fatal(err)
	}
}

// request returns the fields of a request with n extra headers whose
// values change, so that the dynamic table keeps inserting and evicting.
func request(i int, order []string) []string {
	f := []string{":method: GET", ":authority: example.org", ":scheme: https", fmt.Sprintf(":path: /r/%d", i%5)}
	for _, name := range order {
		f = append(f, fmt.Sprintf("%s: %s-%d-%s", name, name, i, strings.Repeat("v", i*7%300)))
	}
	return f
}

func TestH2TapHPACK(t *testing.T) {
	t.Parallel()
	orders := [][]string{
		{"user-agent", "x-a", "x-b", "accept"},
		{"x-b", "x-a", "cookie", "user-agent"},
		{"accept", "x-secret", "referer", "x-a", "x-c"},
	}
	tests := []struct {
		name  string
		split int   // header block bytes per frame
		pad   uint8 // HEADERS padding
		step  int   // bytes per Read
	}{
		{"one frame each", 1 << 20, 0, 1 << 20},
		{"continuations", 17, 0, 1 << 20},
		{"padded, byte by byte", 1 << 20, 9, 1},
		{"continuations, odd reads", 23, 3, 13}, // 23 bytes: at most 128 frames a block
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cl := newH2Client()
			cl.fr.WriteSettings(http2.Setting{ID: http2.SettingHeaderTableSize, Val: 65536},
				http2.Setting{ID: http2.SettingEnablePush, Val: 0}, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 6291456})
			cl.fr.WriteWindowUpdate(0, 15663105)
			cl.fr.WritePriority(3, http2.PriorityParam{StreamDep: 0, Weight: 200})
			cl.fr.WritePriority(5, http2.PriorityParam{StreamDep: 3, Weight: 0, Exclusive: true})
			var want [][]string
			const n = 120
			for i := range n {
				stream := uint32(2*i + 1)
				switch i {
				case 40: // the table shrinks, then grows again (RFC 7541, section 6.3)
					cl.enc.SetMaxDynamicTableSizeLimit(4096)
					cl.enc.SetMaxDynamicTableSize(256)
				case 41:
					cl.enc.SetMaxDynamicTableSize(0)
				case 42:
					cl.enc.SetMaxDynamicTableSize(4096)
				case 60: // the server's new HEADER_TABLE_SIZE does not touch the client's encoder
					cl.fr.WriteSettings(http2.Setting{ID: http2.SettingHeaderTableSize, Val: 1024})
					cl.fr.WriteSettingsAck()
				}
				f := request(i, orders[i%len(orders)])
				cl.headers(t, stream, f, tt.split, tt.pad)
				if i%3 == 0 { // a body, then trailers that go through the table too
					cl.fr.WriteData(stream, false, []byte("hello"))
					cl.headers(t, stream, []string{"x-trailer: " + strings.Repeat("t", i)}, tt.split, 0)
				}
				cl.fr.WriteWindowUpdate(0, 1000)
				names := make([]string, len(f))
				for k := range f {
					names[k], _, _ = strings.Cut(f[k][1:], ":")
					names[k] = f[k][:1] + names[k]
				}
				want = append(want, names)
			}
			c := NewConn(nil, H2, Config{})
			for w := cl.buf.Bytes(); len(w) > 0; {
				k := min(tt.step, len(w))
				c.feed(w[:k])
				w = w[k:]
			}
			if err := c.Err(); err != nil {
				t.Fatal(err)
			}
			got := drain(c)
			if len(got) != n {
				t.Fatalf("got %d requests, want %d", len(got), n)
			}
			const h2fp = "1:65536;2:0;4:6291456|15663105|3:0:0:201,5:1:3:1|m,a,s,p"
			for i, g := range got {
				if !slices.Equal(g.fp.Names, want[i]) {
					t.Fatalf("request %d: names %q, want %q", i, g.fp.Names, want[i])
				}
				if g.fp.H2FP != h2fp {
					t.Fatalf("request %d: h2fp %q, want %q", i, g.fp.H2FP, h2fp)
				}
				if g.method != "GET" || g.host != "example.org" || g.uri != fmt.Sprintf("/r/%d", i%5) {
					t.Fatalf("request %d: key %s %s %s", i, g.method, g.host, g.uri)
				}
			}
		})
	}
}

func TestH2TapErrors(t *testing.T) {
	t.Parallel()
	frame := func(f func(fr *http2.Framer)) string {
		var b bytes.Buffer
		b.WriteString(h2Preface)
		f(http2.NewFramer(&b, nil))
		return b.String()
	}
	tests := []struct {
		name  string
		wire  string
		hpack bool // an HPACK error: the tap stops decoding, the frames go on
	}{
		{"HTTP/1 request", "GET / HTTP/1.1\r\nHost: x\r\n\r\n", false},
		{"continuation without headers", frame(func(fr *http2.Framer) { fr.WriteContinuation(1, true, []byte{0x82}) }), false},
		{"data inside a header block", frame(func(fr *http2.Framer) {
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0x82}})
			fr.WriteData(1, true, nil)
		}), false},
		{"bad HPACK index", frame(func(fr *http2.Framer) {
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0xff, 0x7f}, EndHeaders: true})
		}), true},
		{"truncated HPACK block", frame(func(fr *http2.Framer) {
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0x40, 0x05, 'a'}, EndHeaders: true})
		}), true},
		{"padding too long", frame(func(fr *http2.Framer) {
			fr.WriteRawFrame(http2.FrameHeaders, http2.FlagHeadersPadded|http2.FlagHeadersEndHeaders, 1, []byte{9, 0x82})
		}), false},
		{"settings length", frame(func(fr *http2.Framer) { fr.WriteRawFrame(http2.FrameSettings, 0, 0, []byte{0, 1, 0}) }), false},
		{"headers on stream 0", frame(func(fr *http2.Framer) {
			fr.WriteRawFrame(http2.FrameHeaders, http2.FlagHeadersEndHeaders, 0, []byte{0x82})
		}), false},
		{"table size above the limit", frame(func(fr *http2.Framer) {
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0x3f, 0xe1, 0xff, 0x07}, EndHeaders: true})
		}), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := NewConn(nil, H2, Config{})
			if n, _ := c.feed([]byte(tt.wire)); n != len(tt.wire) {
				t.Errorf("%d of %d bytes passed on, want all: the server is to meet the error", n, len(tt.wire))
			}
			if err := c.Err(); !errors.Is(err, ErrMalformed) {
				t.Fatalf("Err() = %v, want ErrMalformed", err)
			}
			// An HPACK error stops the fingerprints only; after frames
			// the tap cannot follow, reads fail.
			n, err := c.feed([]byte("\x00\x00\x00\xfa\x00\x00\x00\x00\x00"))
			if tt.hpack && (n != 9 || err != nil) || !tt.hpack && (n != 0 || !errors.Is(err, ErrMalformed)) {
				t.Errorf("the next read: %d bytes, %v", n, err)
			}
		})
	}
}

func TestTakeH2(t *testing.T) {
	t.Parallel()
	cl := newH2Client()
	cl.fr.WriteSettings()
	// Streams 1 and 5 share method, authority and path; 3 differs.
	cl.headers(t, 1, []string{":method: GET", ":authority: a", ":scheme: https", ":path: /", "x-first: 1"}, 1<<20, 0)
	cl.headers(t, 3, []string{":method: GET", ":authority: a", ":scheme: https", ":path: /other", "x-second: 1"}, 1<<20, 0)
	cl.headers(t, 5, []string{":method: GET", ":authority: a", ":scheme: https", ":path: /", "x-third: 1"}, 1<<20, 0)
	cl.headers(t, 7, []string{":method: CONNECT", ":authority: b:443", "x-fourth: 1"}, 1<<20, 0)
	cl.headers(t, 9, []string{":method: GET", ":scheme: https", ":path: /h", "host: c", "x-fifth: 1"}, 1<<20, 0)
	c := NewConn(nil, H2, Config{})
	c.feed(cl.buf.Bytes())
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		method, host, uri string
		header            http.Header
		want              string
	}{
		{"GET", "a", "/other", nil, "x-second"},
		{"GET", "a", "/", http.Header{"X-Third": {"1"}}, "x-third"}, // not the oldest: r has its fields
		{"GET", "c", "/h", nil, "x-fifth"},
		{"CONNECT", "b:443", "b:443", nil, "x-fourth"},
		{"GET", "a", "/", nil, "x-first"},
		{"GET", "a", "/", nil, ""},
	}
	for _, tt := range tests { // in order: each take changes the queue
		fp, ok := c.take(&http.Request{Method: tt.method, Host: tt.host, RequestURI: tt.uri, Header: tt.header})
		got := ""
		if ok {
			got = fp.Names[len(fp.Names)-1]
		}
		if got != tt.want {
			t.Errorf("take(%s %s %s) = %q, want %q", tt.method, tt.host, tt.uri, got, tt.want)
		}
	}
}

// readConn is a net.Conn whose reads come from r.
type readConn struct {
	net.Conn
	r io.Reader
}

func (c readConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// serverFrames reads wire through a Conn with x/net's framer, as x/net's
// server does, and returns how many frames it read, the Conn, and the
// error that ended it.
func serverFrames(t *testing.T, wire []byte, cfg Config) (int, *Conn, error) {
	t.Helper()
	c := NewConn(readConn{r: bytes.NewReader(wire)}, H2, cfg)
	if _, err := io.ReadFull(c, make([]byte, len(h2Preface))); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(nil, c)
	fr.SetMaxReadFrameSize(1 << 20)
	n := 0
	for {
		if _, err := fr.ReadFrame(); err != nil {
			return n, c, err
		}
		n++
	}
}

// TestH2TapBoundsHeaderBlocks: a header block spans at most 128 frames and
// 2×MaxHeaderBytes+16 KiB; past either bound the server's framer (x/net's,
// which net/http's bundles) meets a connection error at once and reads
// fail from then on. Blocks within them, split as small as the bound
// allows, are fingerprinted. The bound holds after an HPACK error stopped
// the fingerprints.
func TestH2TapBoundsHeaderBlocks(t *testing.T) {
	t.Parallel()
	fields := []string{":method: GET", ":authority: a", ":scheme: https", ":path: /big", "x-big: " + strings.Repeat("b", 60<<10)}
	tests := []struct {
		name    string
		max     int // MaxHeaderBytes
		write   func(cl *h2Client)
		frames  int // the frames the server reads, at most, when cut
		cut     bool
		headers bool // cut at a HEADERS frame
	}{
		{"300,000 empty CONTINUATIONs", 0, func(cl *h2Client) {
			cl.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: cl.block(fields[:4])})
			for range 300_000 {
				cl.fr.WriteContinuation(1, false, nil)
			}
		}, 1 + maxBlockFrames, true, false},
		{"129 frames", 0, func(cl *h2Client) { cl.split(1, cl.block(fields), 129) }, 1 + maxBlockFrames, true, false},
		{"128 frames", 0, func(cl *h2Client) { cl.split(1, cl.block(fields), 128) }, 0, false, false},
		{"60 KiB at 16 KiB frames, 64 KiB allowed", 64 << 10, func(cl *h2Client) {
			cl.split(1, cl.block(fields), 4)
		}, 0, false, false},
		{"a HEADERS frame past the bytes", 1000, func(cl *h2Client) {
			cl.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: make([]byte, 2*1000+blockSlack+1)})
		}, 1, true, true},
		{"16 KiB frames of table size updates", 64 << 10, func(cl *h2Client) {
			upd := bytes.Repeat([]byte{0x20}, 16<<10) // "size 0" decodes to no field
			cl.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: upd})
			for range 100 {
				cl.fr.WriteContinuation(1, false, upd)
			}
		}, 1 + (2*(64<<10)+blockSlack)/(16<<10), true, false},
		{"a flood after an HPACK error", 0, func(cl *h2Client) {
			cl.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0xff, 0x7f}, EndHeaders: true})
			cl.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3})
			for range 1000 {
				cl.fr.WriteContinuation(3, false, nil)
			}
		}, 2 + maxBlockFrames, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cl := newH2Client()
			cl.fr.WriteSettings()
			tt.write(cl)
			n, c, err := serverFrames(t, cl.buf.Bytes(), Config{MaxHeaderBytes: tt.max})
			if !tt.cut {
				if err != io.EOF || c.Err() != nil || c.Pending() != 1 {
					t.Fatalf("after %d frames: %v (tap: %v), %d fingerprints; want EOF and 1", n, err, c.Err(), c.Pending())
				}
				return
			}
			// A CONTINUATION past the bounds reaches the framer on
			// another stream: the connection error a server answers
			// with GOAWAY(PROTOCOL_ERROR). A HEADERS frame past them
			// fails the read.
			if tt.headers && !errors.Is(err, ErrFlood) ||
				!tt.headers && err != error(http2.ConnectionError(http2.ErrCodeProtocol)) {
				t.Fatalf("after %d frames: %v", n, err)
			}
			if !errors.Is(c.Err(), ErrFlood) {
				t.Errorf("Err() = %v, want ErrFlood", c.Err())
			}
			if n > tt.frames { // SETTINGS, then the block's frames
				t.Errorf("the server read %d frames, want at most %d", n, tt.frames)
			}
			if _, err := c.Read(make([]byte, 9)); !errors.Is(err, ErrFlood) {
				t.Errorf("the next read: %v", err)
			}
		})
	}
}

// split sends block on stream as a HEADERS frame and CONTINUATIONs,
// frames frames in all, of about equal size.
func (c *h2Client) split(stream uint32, block []byte, frames int) {
	size := (len(block) + frames - 1) / frames
	c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: stream, BlockFragment: block[:size], EndStream: true})
	for rest := block[size:]; len(rest) > 0; {
		n := min(size, len(rest))
		c.fr.WriteContinuation(stream, n == len(rest), rest[:n])
		rest = rest[n:]
	}
}

package edge

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/maatproxy/maat/httpfp"
)

// FuzzH2Resumed: whatever a client sends on a resumed HTTP/2 connection,
// what x/net is given is the greeting and then whole frames: header
// blocks translated into frames of at most h2MaxFrame, each translated
// fragment bounded by the header list limit (a block of indexed fields
// cannot grow without end), the rest passed as it came. Nothing panics,
// and the reading ends when the client's bytes do.
func FuzzH2Resumed(f *testing.F) {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	h2Fields(enc, "GET", "/a")
	_ = enc.WriteField(hpack.HeaderField{Name: "x-entry", Value: string(bytes.Repeat([]byte("e"), 3000))})
	block := append([]byte(nil), buf.Bytes()...)
	frame := func(t http2.FrameType, fl http2.Flags, stream uint32, p []byte) []byte {
		return append(appendFrameHeader(nil, len(p), t, fl, stream), p...)
	}
	f.Add(frame(http2.FrameHeaders, http2.FlagHeadersEndHeaders|http2.FlagHeadersEndStream, 7, block))
	f.Add(append(frame(http2.FrameHeaders, http2.FlagHeadersEndStream, 7, block[:10]),
		frame(http2.FrameContinuation, http2.FlagContinuationEndHeaders, 7, block[10:])...))
	f.Add(frame(http2.FrameHeaders, http2.FlagHeadersEndHeaders, 9, append(block, bytes.Repeat([]byte{0x80 | 62}, 3000)...)))
	f.Add(frame(http2.FrameHeaders, http2.FlagHeadersEndHeaders|http2.FlagHeadersPriority|http2.FlagHeadersPadded, 7,
		append(append([]byte{3, 0, 0, 0, 7, 16}, block...), 0, 0, 0)))
	f.Add(append(frame(http2.FrameWindowUpdate, 0, 1, []byte{0, 0, 1, 0}), frame(http2.FrameRSTStream, 0, 3, []byte{0, 0, 0, 8})...))
	f.Add(frame(http2.FrameData, 0, 3, []byte("late")))
	f.Add(frame(http2.FramePing, 0, 0, make([]byte, 8)))
	f.Add([]byte{0, 0})

	s := &Server{h1: &http.Server{MaxHeaderBytes: 4096}, h2: &http2.Server{}}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		client, server := net.Pipe()
		defer server.Close()
		_ = server.SetDeadline(time.Now().Add(5 * time.Second)) // a stuck read fails, not hangs
		go func() {
			_, _ = io.WriteString(client, http2.ClientPreface)
			_, _ = client.Write(appendFrameHeader(nil, 0, http2.FrameSettings, 0, 0))
			_, _ = client.Write(data)
			client.Close()
		}()
		l := newH2Link(s, httpfp.NewConn(server, httpfp.H2, httpfp.Config{MaxHeaderBytes: 4096, MaxHPACKTable: h2DecoderTable}))
		first := make([]byte, len(http2.ClientPreface)+9)
		if _, err := io.ReadFull(l.conn(), first); err != nil {
			t.Fatal(err)
		}
		// As a parking leaves it: streams 1–5 closed.
		l.resumed, l.oldMax, l.lastStream, l.startupWU = true, 5, 5, 1<<20-h2InitialWindow
		c := l.conn()
		greeting := len(c.pend)
		var out []byte
		p := make([]byte, 1024)
		for {
			if max := 2*c.maxList + 2*h2MaxFrame; int64(len(c.pend)) > max {
				t.Fatalf("%d bytes waiting for x/net, more than %d", len(c.pend), max)
			}
			n, err := c.Read(p)
			out = append(out, p[:n]...)
			if n == 0 && err == nil {
				t.Fatal("a Read that gave nothing")
			}
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, errOldStream) && !errors.Is(err, httpfp.ErrMalformed) &&
					!errors.Is(err, httpfp.ErrTooLarge) {
					t.Fatalf("reading: %v", err)
				}
				break
			}
		}
		// Whole frames, as far as they came; translated ones within
		// h2MaxFrame.
		for b := out[greeting:]; len(b) >= 9; {
			n := int(b[0])<<16 | int(b[1])<<8 | int(b[2])
			typ := http2.FrameType(b[3])
			// Larger ones are passed as they came (x/net refuses them
			// with FRAME_SIZE_ERROR): their header is the client's.
			if (typ == http2.FrameHeaders || typ == http2.FrameContinuation) && n > h2MaxFrame && !bytes.Contains(data, b[:9]) {
				t.Fatalf("a translated %v frame of %d bytes", typ, n)
			}
			if 9+n > len(b) {
				break
			}
			b = b[9+n:]
		}
	})
}

// Package httpfpfuzz holds the fuzz targets of httpfp: the HTTP/1 header
// capture and the HTTP/2 frame tap over arbitrary bytes.
package httpfpfuzz

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/maatproxy/maat/httpfp"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// chunkConn is a net.Conn that reads data in pieces of n bytes.
type chunkConn struct {
	data []byte
	n    int
}

func (c *chunkConn) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	k := min(len(p), c.n, len(c.data))
	copy(p, c.data[:k])
	c.data = c.data[k:]
	return k, nil
}

func (c *chunkConn) Write(p []byte) (int, error)      { return len(p), nil }
func (c *chunkConn) Close() error                     { return nil }
func (c *chunkConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *chunkConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *chunkConn) SetDeadline(time.Time) error      { return nil }
func (c *chunkConn) SetReadDeadline(time.Time) error  { return nil }
func (c *chunkConn) SetWriteDeadline(time.Time) error { return nil }

// tapped reads all of data through a Conn in pieces of n bytes.
func tapped(data []byte, p httpfp.Proto, n int) *httpfp.Conn {
	c := httpfp.NewConn(&chunkConn{data: data, n: max(n, 1)}, p, httpfp.Config{JA4H: true})
	io.Copy(io.Discard, c)
	return c
}

// FuzzH1 checks the HTTP/1 capture against net/http's own parser: every
// request http.ReadRequest reads (body included) has a fingerprint whose
// names are r.Header's keys, and the pieces reads come in do not matter.
func FuzzH1(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: a\r\nUser-Agent: curl/7.88.1\r\nAccept: */*\r\nX-A: 1\r\nX-B: 2\r\n\r\n",
		"POST /1 HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhelloGET /2 HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;e=1\r\nhello\r\n0\r\nT: 1\r\n\r\nGET / HTTP/1.0\r\n\r\n",
		"PUT / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nxGET /n HTTP/1.1\r\nHost: x\r\nCookie: a=b\r\n\r\n",
		"GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n\x81\x00",
		"GET / HTTP/1.1\nHost: x\nX-Folded: a\n b\n\n",
		"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
		"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST /a HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n",
	} {
		f.Add([]byte(s), uint8(0))
		f.Add([]byte(s), uint8(1))
		f.Add([]byte(s), uint8(7))
	}
	f.Fuzz(func(t *testing.T, data []byte, n uint8) {
		whole, pieces := tapped(data, httpfp.H1, len(data)), tapped(data, httpfp.H1, int(n))
		if whole.Pending() != pieces.Pending() || (whole.Err() == nil) != (pieces.Err() == nil) {
			t.Fatalf("whole: %d pending, %v; in pieces of %d: %d pending, %v", whole.Pending(), whole.Err(), n, pieces.Pending(), pieces.Err())
		}

		c := httpfp.NewConn(&chunkConn{data: data, n: max(int(n), 1)}, httpfp.H1, httpfp.Config{})
		ctx := httpfp.NewContext(context.Background(), c)
		br := bufio.NewReader(c)
		for {
			r, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			if _, err := io.Copy(io.Discard, r.Body); err != nil {
				return
			}
			fp, ok := httpfp.FromRequest(r.WithContext(ctx))
			if !ok {
				t.Fatalf("no fingerprint for %s %s (tap error %v)", r.Method, r.RequestURI, c.Err())
			}
			coding, length := false, false
			for _, name := range fp.Names {
				coding = coding || strings.EqualFold(name, "Transfer-Encoding")
				length = length || strings.EqualFold(name, "Content-Length")
			}
			if want := coding && (length || !r.ProtoAtLeast(1, 1)); fp.AmbiguousLength != want {
				t.Fatalf("%s %s %s, names %q: AmbiguousLength %v", r.Method, r.RequestURI, r.Proto, fp.Names, fp.AmbiguousLength)
			}
			var got, want []string
			for _, name := range fp.Names {
				k := textproto.CanonicalMIMEHeaderKey(name)
				if k == "Content-Length" && len(r.TransferEncoding) > 0 {
					continue // net/http drops it (what AmbiguousLength is for)
				}
				if k != "Host" && k != "Transfer-Encoding" {
					got = append(got, k)
				}
			}
			for k, vs := range r.Header {
				for range vs {
					if k != "Transfer-Encoding" {
						want = append(want, k)
					}
				}
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("%s %s: names %q, net/http read %q", r.Method, r.RequestURI, got, want)
			}
			if hfp, raw := httpfp.HFP(httpfp.H1, fp.Names); fp.HFP != hfp || fp.HFPR != raw {
				t.Fatalf("hfp %s %s, want %s %s", fp.HFP, fp.HFPR, hfp, raw)
			}
			if r.Header.Get("Upgrade") != "" || r.Method == "CONNECT" {
				return // the tap stops here
			}
		}
	})
}

// h2Seed returns a client connection's bytes written by x/net's framer.
func h2Seed(f func(fr *http2.Framer, enc func(fields ...string) []byte)) []byte {
	var b, hb bytes.Buffer
	b.WriteString(http2.ClientPreface)
	e := hpack.NewEncoder(&hb)
	enc := func(fields ...string) []byte {
		hb.Reset()
		for _, fl := range fields {
			i := strings.Index(fl[1:], ":") + 1
			e.WriteField(hpack.HeaderField{Name: fl[:i], Value: strings.TrimSpace(fl[i+1:])})
		}
		return bytes.Clone(hb.Bytes())
	}
	f(http2.NewFramer(&b, nil), enc)
	return b.Bytes()
}

// FuzzH2 checks the HTTP/2 tap against x/net's framer and HPACK decoder:
// every request header block they decode has a fingerprint with the same
// names in the same order, a header block they read past its bounds (128
// frames, 2 MiB+16 KiB) is cut, and the pieces reads come in do not matter.
func FuzzH2(f *testing.F) {
	req := []string{":method: GET", ":authority: a", ":scheme: https", ":path: /", "user-agent: x", "x-a: 1", "x-b: 2"}
	f.Add(h2Seed(func(fr *http2.Framer, enc func(...string) []byte) {
		fr.WriteSettings(http2.Setting{ID: 1, Val: 65536}, http2.Setting{ID: 2, Val: 0}, http2.Setting{ID: 4, Val: 6291456}, http2.Setting{ID: 6, Val: 262144})
		fr.WriteWindowUpdate(0, 15663105)
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: enc(req...), EndHeaders: true, EndStream: true})
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: enc(req...), EndHeaders: true, EndStream: true})
	}), uint8(5))
	f.Add(h2Seed(func(fr *http2.Framer, enc func(...string) []byte) {
		fr.WriteSettings()
		fr.WritePriority(3, http2.PriorityParam{Weight: 200})
		b := enc(append(req, "cookie: a=b", "cookie: c=d")...)
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: b[:4], PadLength: 3, Priority: http2.PriorityParam{Weight: 9}})
		fr.WriteContinuation(1, true, b[4:])
		fr.WriteData(1, false, []byte("body"))
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: enc("x-trailer: 1"), EndHeaders: true, EndStream: true})
	}), uint8(1))
	// Header blocks at and past their bounds: 128 frames, then a
	// CONTINUATION flood after an HPACK error.
	f.Add(h2Seed(func(fr *http2.Framer, enc func(...string) []byte) {
		fr.WriteSettings()
		b := enc(req...)
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: b[:1], EndStream: true})
		for i := range maxBlockFrames - 1 {
			end := i == maxBlockFrames-2
			frag := b[1:]
			if !end {
				frag = nil
			}
			fr.WriteContinuation(1, end, frag)
		}
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: []byte{0xff, 0x7f}, EndHeaders: true})
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 5, BlockFragment: b})
		for range maxBlockFrames {
			fr.WriteContinuation(5, false, nil)
		}
	}), uint8(9))
	f.Fuzz(func(t *testing.T, data []byte, n uint8) {
		whole, pieces := tapped(data, httpfp.H2, len(data)), tapped(data, httpfp.H2, int(n))
		if whole.Pending() != pieces.Pending() || (whole.Err() == nil) != (pieces.Err() == nil) {
			t.Fatalf("whole: %d pending, %v; in pieces of %d: %d pending, %v", whole.Pending(), whole.Err(), n, pieces.Pending(), pieces.Err())
		}
		ctx := httpfp.NewContext(context.Background(), whole)
		blocks, flood := referenceH2(data)
		if flood && !errors.Is(whole.Err(), httpfp.ErrFlood) {
			t.Fatalf("a header block past its bounds was not cut (tap error %v)", whole.Err())
		}
		for _, want := range blocks {
			r := &http.Request{Method: want.get(":method"), Host: want.get(":authority"), RequestURI: want.get(":path"), Header: http.Header{}}
			for i, name := range want.names {
				if !strings.HasPrefix(name, ":") {
					r.Header.Add(name, want.values[i])
				}
			}
			fp, ok := httpfp.FromRequest(r.WithContext(ctx))
			if !ok {
				t.Fatalf("no fingerprint for %q (tap error %v)", want, whole.Err())
			}
			if !slices.Equal(fp.Names, want.names) {
				t.Fatalf("names %q, x/net decoded %q", fp.Names, want.names)
			}
		}
	})
}

// refBlock is a request header block decoded by x/net.
type refBlock struct{ names, values []string }

func (b refBlock) get(name string) string {
	if i := slices.Index(b.names, name); i >= 0 {
		return b.values[i]
	}
	return ""
}

// duplicatePseudo reports a pseudo-header sent twice: servers reject the
// request (RFC 9113, section 8.3).
func (b refBlock) duplicatePseudo() bool {
	for i, n := range b.names {
		if strings.HasPrefix(n, ":") && slices.Contains(b.names[i+1:], n) {
			return true
		}
	}
	return false
}

// Bounds of a header block (httpfp's package documentation): frames, and
// bytes over twice the header limit (the fuzz targets' Config has the
// default, 1 MiB).
const (
	maxBlockFrames = 128
	maxBlockBytes  = 2*httpfp.DefaultMaxHeaderBytes + 16<<10
)

// referenceH2 decodes the request header blocks of a client stream with
// x/net's framer and HPACK decoder, up to the first framing error, and
// reports whether a header block went past its bounds (flood) before. After
// an HPACK error it follows the frames without decoding, as the tap does.
// Blocks of streams that reuse a request's key are left out: the tap pairs
// them in order, which this check does not model.
func referenceH2(data []byte) (out []refBlock, flood bool) {
	rest, ok := bytes.CutPrefix(data, []byte(http2.ClientPreface))
	if !ok {
		return nil, false
	}
	fr := http2.NewFramer(nil, bytes.NewReader(rest))
	fr.SetMaxReadFrameSize(1<<24 - 1)
	var cur refBlock
	dec := hpack.NewDecoder(4096, func(f hpack.HeaderField) {
		cur.names = append(cur.names, f.Name)
		cur.values = append(cur.values, f.Value)
	})
	dec.SetAllowedMaxDynamicTableSize(1 << 16)
	var last uint32
	keys := map[string]bool{}
	request, blind := false, false
	frames, size := 0, 0
	for {
		fh, err := fr.ReadFrameHeader()
		if err != nil {
			return out, false
		}
		switch fh.Type {
		case http2.FrameHeaders:
			if fh.StreamID == 0 {
				return out, false
			}
			frames, size = 0, 0
			fallthrough
		case http2.FrameContinuation:
			frames++
			size += int(fh.Length)
			if frames > maxBlockFrames || size > maxBlockBytes {
				return out, true
			}
		}
		f, err := fr.ReadFrameForHeader(fh)
		if err != nil {
			return out, false
		}
		var frag []byte
		var end bool
		switch f := f.(type) {
		case *http2.HeadersFrame:
			frag, end = f.HeaderBlockFragment(), f.HeadersEnded()
			cur = refBlock{}
			request = f.StreamID > last && f.StreamID%2 == 1
			if request {
				last = f.StreamID
			}
		case *http2.ContinuationFrame:
			frag, end = f.HeaderBlockFragment(), f.HeadersEnded()
		default:
			continue
		}
		if blind {
			continue
		}
		if _, err := dec.Write(frag); err != nil {
			blind = true
			continue
		}
		if !end {
			continue
		}
		if err := dec.Close(); err != nil {
			blind = true
			continue
		}
		if !request {
			continue
		}
		key := cur.get(":method") + " " + cur.get(":authority") + " " + cur.get(":path")
		if !keys[key] && !cur.duplicatePseudo() && cur.get(":method") != "" && cur.get(":method") != "CONNECT" && cur.get(":authority") != "" {
			out = append(out, cur)
		}
		keys[key] = true
	}
}

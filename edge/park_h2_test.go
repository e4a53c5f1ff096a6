package edge

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2OneConn is an HTTP/2 client of e that dials at most once: every
// request after the first must go on the same connection.
func h2OneConn(t *testing.T, e *testEdge) (*http.Client, *atomic.Int32) {
	t.Helper()
	var dials atomic.Int32
	tr := &http2.Transport{
		DialTLSContext: func(ctx context.Context, network, addr string, cfg *tls.Config) (net.Conn, error) {
			dials.Add(1)
			d := tls.Dialer{Config: e.tlsConfig("h2")}
			return d.DialContext(ctx, "tcp", e.Addrs().HTTPS)
		},
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}, &dials
}

// h2Do makes a request and returns its status and body.
func h2Do(t *testing.T, c *http.Client, method, path, body string, hdr ...string) (int, string, http.Header) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "https://localhost"+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("User-Agent", "curl/8.5.0")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatalf("%s %s: body: %v", method, path, err)
	}
	return res.StatusCode, string(b), res.Header
}

// TestH2ConnectionsPark: an idle HTTP/2 connection is parked and taken up
// again by a new server connection when the client's next request comes,
// again and again, on the one connection the client dialed: requests with
// the client's HPACK table in use (the same headers each time, a new one
// each time), a body larger than the initial windows each way, answers
// whose headers the client decodes with its table, fingerprints as on the
// first request.
func TestH2ConnectionsPark(t *testing.T) {
	t.Parallel()
	bothWaits(t, h2ConnectionsPark)
}

func h2ConnectionsPark(t *testing.T, noPoll bool) {
	e, _ := parkEdgeWith(t, "", noPoll)
	c, dials := h2OneConn(t, e)
	big := strings.Repeat("0123456789abcdef", 20000) // 320 KB: past 64 KiB, the initial window
	h2fp := ""
	for i := range 6 {
		code, body, hdr := h2Do(t, c, "GET", fmt.Sprintf("/get/%d", i), "", "X-Same", "same value", fmt.Sprintf("X-New-%d", i), "v")
		if code != 200 || body != fmt.Sprintf(`GET /get/%d "" ja4=true`, i) || hdr.Get("Content-Type") == "" {
			t.Fatalf("round %d: %d %q %v", i, code, body, hdr)
		}
		// The request's own fingerprint, paired with it, on every one.
		if i == 0 {
			h2fp = hdr.Get("Echo-H2fp")
		}
		if order := hdr.Get("Echo-Order"); hdr.Get("Echo-H2fp") != h2fp || h2fp == "" ||
			!strings.Contains(order, "x-same") || !strings.Contains(order, fmt.Sprintf("x-new-%d", i)) {
			t.Fatalf("round %d: h2fp %q (first %q), header order %q", i, hdr.Get("Echo-H2fp"), h2fp, order)
		}
		code, body, _ = h2Do(t, c, "POST", fmt.Sprintf("/post/%d", i), big)
		if want := fmt.Sprintf("POST /post/%d %q ja4=true", i, big); code != 200 || body != want {
			t.Fatalf("round %d: POST: %d, %d bytes, want %d", i, code, len(body), len(want))
		}
		waitParked(t, e, 1)
	}
	if n := dials.Load(); n != 1 {
		t.Fatalf("the client dialed %d times, want 1", n)
	}
	res, err := http.Get("http://" + e.Addrs().Admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if !strings.Contains(string(b), "\nmaat_connections_parked 1\n") {
		t.Errorf("metrics: no maat_connections_parked 1 in\n%s", b)
	}
}

// TestH2ParkedStreams: after parking, frames on the streams closed before
// it are what x/net makes of frames on closed streams — a WINDOW_UPDATE
// or RST_STREAM dropped, HEADERS the end of the connection — and a new
// stream is answered.
func TestH2ParkedStreams(t *testing.T) {
	t.Parallel()
	e, _ := parkEdge(t, "")
	fr, conn := h2Raw(t, e)
	h2RawGet(t, fr, 1, "/a")
	waitParked(t, e, 1)

	// A late WINDOW_UPDATE and RST_STREAM on stream 1, then stream 3.
	if err := fr.WriteWindowUpdate(1, 1000); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteRSTStream(1, http2.ErrCodeCancel); err != nil {
		t.Fatal(err)
	}
	h2RawGet(t, fr, 3, "/b")
	waitParked(t, e, 1)

	// HEADERS on stream 1 again: a connection error.
	h2RawHeaders(t, fr, 1, "/c")
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return // closed: what x/net does
		}
		if _, ok := f.(*http2.HeadersFrame); ok && f.Header().StreamID == 1 {
			t.Fatal("a request on a closed stream was answered")
		}
	}
}

// h2Raw opens an HTTP/2 connection to e with a framer: preface and
// settings sent, the server's settings acknowledged.
func h2Raw(t *testing.T, e *testEdge) (*http2.Framer, *tls.Conn) {
	t.Helper()
	conn, err := tls.Dial("tcp", e.Addrs().HTTPS, e.tlsConfig("h2"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteSettingsAck(); err != nil {
		t.Fatal(err)
	}
	// A window for the connection, as clients give: a server that may
	// send less than the initial one is not parked.
	if err := fr.WriteWindowUpdate(0, 1<<20); err != nil {
		t.Fatal(err)
	}
	return fr, conn
}

// h2Fields encodes a request's header fields with enc: method, path, and
// an honest client's User-Agent.
func h2Fields(enc *hpack.Encoder, method, path string) {
	for _, f := range [][2]string{{":method", method}, {":scheme", "https"}, {":authority", "localhost"}, {":path", path}, {"user-agent", "curl/8.5.0"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
}

// h2RawHeaders sends a GET's HEADERS on stream id.
func h2RawHeaders(t *testing.T, fr *http2.Framer, id uint32, path string) {
	t.Helper()
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	h2Fields(enc, "GET", path)
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: buf.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
}

// h2RawGet sends a GET on stream id and reads frames until its answer
// ends, which must be a 200.
func h2RawGet(t *testing.T, fr *http2.Framer, id uint32, path string) {
	t.Helper()
	h2RawHeaders(t, fr, id, path)
	status := ""
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		if f.Header().StreamID != id {
			continue
		}
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			status = f.PseudoValue("status")
			if f.StreamEnded() {
				return
			}
		case *http2.DataFrame:
			if f.StreamEnded() {
				if status != "200" {
					t.Fatalf("GET %s: status %s", path, status)
				}
				return
			}
		case *http2.RSTStreamFrame:
			t.Fatalf("GET %s: reset %v", path, f.ErrCode)
		}
	}
}

// h2RawParked opens a raw HTTP/2 connection to e, makes a request on it
// and waits until it is parked, the only one of e.
func h2RawParked(t *testing.T, e *testEdge) (*http2.Framer, *tls.Conn) {
	t.Helper()
	fr, conn := h2Raw(t, e)
	h2RawGet(t, fr, 1, "/a")
	waitParked(t, e, 1)
	return fr, conn
}

// h2ReadGoAway reads frames until a GOAWAY, then the end of the
// connection; it fails on anything else that ends the reading.
func h2ReadGoAway(t *testing.T, fr *http2.Framer, conn *tls.Conn, lastStream uint32) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading: %v before a GOAWAY", err)
		}
		if ga, ok := f.(*http2.GoAwayFrame); ok {
			if ga.ErrCode != http2.ErrCodeNo || ga.LastStreamID != lastStream {
				t.Fatalf("GOAWAY %v, last stream %d; want NO_ERROR, %d", ga.ErrCode, ga.LastStreamID, lastStream)
			}
			break
		}
	}
	if _, err := fr.ReadFrame(); err == nil {
		t.Fatal("a frame after the GOAWAY")
	}
}

// TestH2ParkedTimesOut: a parked HTTP/2 connection is sent a GOAWAY and
// closed when the idle timeout passes, as x/net ends an idle one; a
// client that pings it meanwhile (each ping wakes it and is answered)
// does not hold it past the timeout by much: pings are not requests.
func TestH2ParkedTimesOut(t *testing.T) {
	t.Parallel()
	bothWaits(t, h2ParkedTimesOut)
}

func h2ParkedTimesOut(t *testing.T, noPoll bool) {
	e, _ := parkEdgeWith(t, "timeouts: {idle: 400ms}\n", noPoll)
	start := time.Now()
	fr, conn := h2RawParked(t, e)
	h2ReadGoAway(t, fr, conn, 1)
	if d := time.Since(start); d < 400*time.Millisecond {
		t.Fatalf("closed after %v, before the idle timeout of 400ms", d)
	}
	waitParked(t, e, 0)

	fr, conn = h2RawParked(t, e)
	start = time.Now()
	var acks atomic.Int32
	done := make(chan error, 1)
	go func() {
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				done <- err
				return
			}
			switch f := f.(type) {
			case *http2.PingFrame:
				if f.IsAck() {
					acks.Add(1)
				}
			case *http2.GoAwayFrame:
				done <- nil
				return
			}
		}
	}()
	tick := time.NewTicker(120 * time.Millisecond) // past parkAfter: each ping wakes a parked connection
	defer tick.Stop()
	for i := uint64(0); ; i++ {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("pinging: %v before a GOAWAY", err)
			}
			d := time.Since(start)
			if d > 2*time.Second || acks.Load() < 2 {
				t.Fatalf("GOAWAY after %v of pings, %d answered; want it within twice the idle timeout, pings answered", d, acks.Load())
			}
			return
		case <-tick.C:
			var data [8]byte
			data[0] = byte(i)
			_ = fr.WritePing(false, data)
		}
	}
}

// TestH2ShutdownClosesParked: Shutdown sends a parked HTTP/2 connection a
// GOAWAY and closes it at once, as x/net does an idle one.
func TestH2ShutdownClosesParked(t *testing.T) {
	t.Parallel()
	e, _ := parkEdge(t, "")
	fr, conn := h2RawParked(t, e)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.Server.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	h2ReadGoAway(t, fr, conn, 1)
}

// TestH2ParkedHeaderLimits: after parking, where the client's header
// blocks are decoded by the tap and given to a new server encoded anew, a
// header list past limits.header_bytes is still answered 431 — spelled
// out, or as a dynamic table entry indexed over and over, which would
// otherwise grow without end as it is spelled out — and the connection
// goes on.
func TestH2ParkedHeaderLimits(t *testing.T) {
	t.Parallel()
	e, _ := parkEdge(t, "limits: {header_bytes: 8192}\n")
	fr, _ := h2RawParked(t, e)

	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	block := func(extra func()) []byte {
		buf.Reset()
		h2Fields(enc, "GET", "/big")
		extra()
		return append([]byte(nil), buf.Bytes()...)
	}
	answer := func(id uint32) string {
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				t.Fatalf("stream %d: %v", id, err)
			}
			if mh, ok := f.(*http2.MetaHeadersFrame); ok && mh.StreamID == id {
				return mh.PseudoValue("status")
			}
			if rst, ok := f.(*http2.RSTStreamFrame); ok && rst.StreamID == id {
				return "reset " + rst.ErrCode.String()
			}
		}
	}

	// Spelled out: 12 KB in literals, over CONTINUATION frames.
	b := block(func() {
		for i := range 3 {
			_ = enc.WriteField(hpack.HeaderField{Name: fmt.Sprintf("x-big-%d", i), Value: strings.Repeat("v", 4000), Sensitive: true})
		}
	})
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: b[:5000], EndStream: true}); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteContinuation(3, true, b[5000:]); err != nil {
		t.Fatal(err)
	}
	if s := answer(3); s != "431" {
		t.Fatalf("a 12 KB header list: %s, want 431", s)
	}
	waitParked(t, e, 1)

	// One entry of 3 KB in the table, then indexed 5000 times in 5 KB.
	b = block(func() {
		_ = enc.WriteField(hpack.HeaderField{Name: "x-entry", Value: strings.Repeat("e", 3000)})
	})
	entry := len(b)
	// Indexed: the entry is the newest of the dynamic table, index 62.
	b = append(b, bytes.Repeat([]byte{0x80 | 62}, 5000)...)
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 5, BlockFragment: b, EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	if s := answer(5); s != "431" {
		t.Fatalf("a 15 MB header list of %d bytes: %s, want 431", len(b)-entry, s)
	}
	h2RawGet(t, fr, 7, "/after")
}

// TestH2ParkedWindows: a resumed connection's flow-control windows are
// the client's. The client here gives 1 MiB for the connection and each
// stream and never more, as a browser gives a large window and tops it up
// only when half is spent: after parking, the server still sends it more
// than the 64 KiB a new server connection starts with. And the window the
// client may send in is brought back to the server's 1 MiB, whatever of
// it the server had not yet given back when it parked.
func TestH2ParkedWindows(t *testing.T) {
	t.Parallel()
	e, _ := parkEdge(t, "")
	conn, err := tls.Dial("tcp", e.Addrs().HTTPS, e.tlsConfig("h2"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	io.WriteString(conn, http2.ClientPreface)
	fr := http2.NewFramer(conn, conn)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	_ = fr.WriteWindowUpdate(0, 1<<20-65535)

	sendWindow := int64(65535) // what the client may send on the connection
	post := func(id uint32, body []byte) int {
		var buf bytes.Buffer
		enc := hpack.NewEncoder(&buf)
		h2Fields(enc, "POST", "/p")
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: buf.Bytes(), EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		for len(body) > 0 {
			n := min(len(body), 16384)
			if err := fr.WriteData(id, n == len(body), body[:n]); err != nil {
				t.Fatal(err)
			}
			sendWindow -= int64(n)
			body = body[n:]
		}
		got := 0
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				t.Fatalf("stream %d: %v after %d bytes of the answer", id, err, got)
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					_ = fr.WriteSettingsAck()
				}
			case *http2.WindowUpdateFrame:
				if f.StreamID == 0 {
					sendWindow += int64(f.Increment)
				}
			case *http2.DataFrame:
				if f.StreamID == id {
					got += len(f.Data())
					if f.StreamEnded() {
						return got
					}
				}
			case *http2.RSTStreamFrame:
				t.Fatalf("stream %d reset: %v", id, f.ErrCode)
			}
		}
	}
	body := bytes.Repeat([]byte("w"), 101_000)
	want := len(fmt.Sprintf("POST /p %q ja4=true", body))
	if got := post(1, body); got != want {
		t.Fatalf("first answer: %d bytes, want %d", got, want)
	}
	waitParked(t, e, 1)
	// 700 KB more to send: past 64 KiB, within the 1 MiB given.
	body = bytes.Repeat([]byte("w"), 350_000)
	want = len(fmt.Sprintf("POST /p %q ja4=true", body))
	if got := post(3, body); got != want {
		t.Fatalf("answer after parking: %d bytes, want %d", got, want)
	}
	// The server gives back what it read; the connection's window is
	// whole again once the answer is sent, not short of what was pending
	// at the parking.
	if !waitFor(t, 5*time.Second, func() bool {
		_ = conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if f, err := fr.ReadFrame(); err == nil {
			if wu, ok := f.(*http2.WindowUpdateFrame); ok && wu.StreamID == 0 {
				sendWindow += int64(wu.Increment)
			}
		}
		return sendWindow == 1<<20
	}) {
		t.Fatalf("the client's window after the answer: %d, want %d", sendWindow, 1<<20)
	}
}

// TestH2ParkedTableSize: after parking, a client asking for an HPACK
// table larger than the server allows is refused as x/net refuses it (the
// end of the connection): the tap, which reads its header blocks then,
// would otherwise keep 64 KiB of table for it.
func TestH2ParkedTableSize(t *testing.T) {
	t.Parallel()
	e, _ := parkEdge(t, "")
	fr, conn := h2RawParked(t, e)
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	enc.SetMaxDynamicTableSizeLimit(1 << 16)
	enc.SetMaxDynamicTableSize(1 << 16) // a size update first in the block
	h2Fields(enc, "GET", "/t")
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: buf.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		if _, ok := f.(*http2.MetaHeadersFrame); ok {
			t.Fatal("a request asking for a 64 KiB HPACK table was answered")
		}
	}
}

// TestH2ParkedTrailers: on a resumed connection, a request's trailers — a
// header block on an open stream, after its body, which Go's client
// encodes with its HPACK table — are translated like any other: the
// request ends well. (The edge does not forward request trailers to the
// upstream, as httputil.ReverseProxy does not: its outgoing request's
// Trailer is a copy made before the body was read.)
func TestH2ParkedTrailers(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s", body)
	}))
	t.Cleanup(up.Close)
	cfg, err := ParseConfig("test.yaml", []byte(edgeConfigText("", "policy: \"\"\nsites: [{hosts: [localhost], upstream: "+up.URL+", compress: false}]\n")))
	if err != nil {
		t.Fatal(err)
	}
	cfg.parkAfter = 50 * time.Millisecond
	e := startEdgeConfig(t, cfg, io.Discard)
	c, dials := h2OneConn(t, e)
	for i := range 3 {
		if code, _, _ := h2Do(t, c, "GET", "/warm", ""); code != 200 {
			t.Fatalf("GET: %d", code)
		}
		waitParked(t, e, 1)
		pr, pw := io.Pipe()
		req, _ := http.NewRequest("POST", "https://localhost/t", pr)
		req.Header.Set("User-Agent", "curl/8.5.0")
		req.Trailer = http.Header{"X-Checksum": nil}
		go func() {
			_, _ = io.WriteString(pw, "the body")
			req.Trailer.Set("X-Checksum", fmt.Sprint("sum-", i))
			pw.Close()
		}()
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || string(b) != "the body" {
			t.Fatalf("round %d: %d %q", i, res.StatusCode, b)
		}
	}
	if n := dials.Load(); n != 1 {
		t.Fatalf("the client dialed %d times, want 1", n)
	}
}

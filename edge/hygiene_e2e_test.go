package edge

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// rawTLSExchange writes raw request bytes to the edge over TLS (HTTP/1.1)
// and returns one response with its body.
func rawTLSExchange(t *testing.T, e *testEdge, raw string) (*http.Response, string) {
	t.Helper()
	c, err := tls.Dial("tcp", e.Addrs().HTTPS, e.tlsConfig("http/1.1"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

// TestPolicySeesNormalizedPath: a path_regex DENY on ^/secret/ holds for
// every spelling of the path, over HTTP/1.1 and HTTP/2 (whose :path the
// client sends as it likes), and the upstream gets the one normalized path
// of what passes.
func TestPolicySeesNormalizedPath(t *testing.T) {
	t.Parallel()
	up := newRawUpstream(t)
	pol := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(pol, []byte("bots:\n  - {name: no-secret, path_regex: ^/secret/, action: DENY}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := startEdge(t, "policy: "+pol+"\nsites: [{hosts: [localhost], upstream: "+up.URL+", compress: false}]\n")
	spellings := []string{"/DIR/TAG", "//DIR/TAG", "/x/../DIR/TAG", "/./DIR/TAG", "///DIR//TAG", "/%2e/DIR/TAG", "/ENC/TAG"}
	encoded := map[string]string{"secret": "%73ecret", "public": "%70ublic"}
	send := map[string]func(t *testing.T, path string) (int, string, string){
		"h1": func(t *testing.T, path string) (int, string, string) {
			res, body := rawTLSExchange(t, e, "GET "+path+" HTTP/1.1\r\nHost: localhost\r\nUser-Agent: Go-http-client/1.1\r\nConnection: close\r\n\r\n")
			return res.StatusCode, res.Header.Get("Maat-Mitigated"), body
		},
		"h2": func(t *testing.T, path string) (int, string, string) {
			res, body := chromeRoundTrip(t, e, path, chromeHeaders, "")
			return res.StatusCode, res.Header.Get("Maat-Mitigated"), body
		},
	}
	var want []string // request lines the upstream must get
	for _, proto := range []string{"h1", "h2"} {
		for i, sp := range spellings {
			for _, dir := range []string{"secret", "public"} {
				tag := fmt.Sprintf("%s-%d", proto, i)
				path := strings.NewReplacer("DIR", dir, "ENC", encoded[dir], "TAG", tag).Replace(sp)
				status, mitigated, body := send[proto](t, path)
				switch dir {
				case "secret":
					if status != http.StatusForbidden || mitigated != "deny" || !strings.Contains(body, "no-secret") {
						t.Errorf("%s %s: %d %q, want the policy's deny (no-secret)", proto, path, status, mitigated)
					}
				case "public":
					if status != http.StatusOK {
						t.Errorf("%s %s: %d, want 200", proto, path, status)
					}
					want = append(want, "GET /public/"+tag+" HTTP/1.1")
				}
			}
		}
	}
	var got []string
	for _, head := range up.heads() {
		got = append(got, requestLine(head))
		if strings.Contains(head, "secret") {
			t.Errorf("a denied path reached the upstream:\n%s", head)
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the upstream got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestFailoverThroughEdge: with the first of two upstream addresses down
// (a refused connection), a base path, a header rule and a trusted proxy,
// the request retried on the second address is, over HTTP/1.1 and HTTP/2,
// the request a first try sends: the base path once, the added header
// once, one X-Forwarded-For with the peer appended once.
func TestFailoverThroughEdge(t *testing.T) {
	t.Parallel()
	for _, proto := range []string{"h1", "h2"} {
		t.Run(proto, func(t *testing.T) {
			t.Parallel()
			up := newRawUpstream(t)
			e := startEdge(t, fmt.Sprintf(`trusted_proxies: [127.0.0.0/8]
sites:
  - hosts: [localhost]
    compress: false
    upstream: [http://%s/base, %s/base]
    headers: { request: { add: { X-Added: one } } }
`, deadAddr(t), up.URL))
			pool := e.Handler().sites.lookup("localhost").routes[0].pool // the dead address first
			c := e.client(t, proto)
			for i := range 2 { // the first meets the dead address; the second goes straight on
				res, _ := get(t, c, e.url("/x?q=1"), "User-Agent", "Go-http-client/1.1", "X-Forwarded-For", "203.0.113.9")
				if res.StatusCode != http.StatusOK {
					t.Fatalf("request %d: %d", i, res.StatusCode)
				}
				if i == 0 && !pool.State()[0].Down {
					t.Fatal("the first request did not try the dead address: no failover to test")
				}
			}
			heads := up.heads()
			if len(heads) != 2 {
				t.Fatalf("the live upstream got %d requests", len(heads))
			}
			for _, head := range heads {
				if line := requestLine(head); line != "GET /base/x?q=1 HTTP/1.1" {
					t.Errorf("request line %q", line)
				}
				if n := strings.Count(head, "X-Added: one\r\n"); n != 1 {
					t.Errorf("X-Added appears %d times:\n%s", n, head)
				}
				if n := strings.Count(head, "X-Forwarded-For:"); n != 1 || !strings.Contains(head, "X-Forwarded-For: 203.0.113.9, 127.0.0.1\r\n") {
					t.Errorf("X-Forwarded-For:\n%s", head)
				}
			}
			if stripID(heads[0]) != stripID(heads[1]) {
				t.Errorf("the retried request differs from a first try:\n%s\n%s", heads[0], heads[1])
			}
		})
	}
}

// TestHTTP2ResetIsTheClients: an HTTP/2 client that resets its stream
// halfway through a body being streamed to the upstream is logged 499 and
// counted as the client's, with no upstream_failed warning; an HTTP/1.1
// chunk size "0x5" is the client's 400, not a 502.
func TestHTTP2ResetIsTheClients(t *testing.T) {
	t.Parallel()
	entered := make(chan struct{}, 1)
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/reset-mid-body" {
			entered <- struct{}{}
		}
		_, _ = io.Copy(io.Discard, r.Body)
	})
	fp := filepath.Join(t.TempDir(), "fp.jsonl")
	var logs syncBuffer
	e := startEdgeLog(t, "log: {fingerprints: "+fp+"}\nsites: [{hosts: [localhost], upstream: "+up+"}]\n", &logs)
	m := e.Server.metrics

	conn, err := tls.Dial("tcp", e.Addrs().HTTPS, e.tlsConfig("h2"))
	if err != nil {
		t.Fatal(err)
	}
	h2 := newH2Client(t, conn)
	h2.headers(1, "POST", "/reset-mid-body", false)
	// Past the 16 KiB the edge reads before it asks the upstream: the body
	// is then streamed.
	for range 2 {
		h2.mu.Lock()
		err = h2.WriteData(1, false, bytes.Repeat([]byte("b"), 16000))
		h2.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the body never reached the upstream")
	}
	if err := h2.WriteRSTStream(1, http2.ErrCodeCancel); err != nil {
		t.Fatal(err)
	}
	if l := waitLine(t, fp, "/reset-mid-body"); l["status"] != float64(499) {
		t.Errorf("a reset stream: logged status %v, want 499", l["status"])
	}

	res, _ := rawTLSExchange(t, e, "POST /hex-chunk HTTP/1.1\r\nHost: localhost\r\nUser-Agent: Go-http-client/1.1\r\n"+
		"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n")
	if res.StatusCode != http.StatusBadRequest {
		t.Errorf("chunk size 0x5: %d, want 400", res.StatusCode)
	}
	if l := waitLine(t, fp, "/hex-chunk"); l["status"] != float64(400) {
		t.Errorf("chunk size 0x5: logged status %v, want 400", l["status"])
	}

	if strings.Contains(logs.String(), "upstream_failed") {
		t.Errorf("a client's failure was logged as the upstream's:\n%s", logs.String())
	}
	if n := seriesCount(m.upErrors); n != 0 {
		t.Errorf("%d upstream error series; client errors were blamed on the upstream", n)
	}
	if v := counterValue(m.clientErrors.WithLabelValues("localhost", "client_gone")); v != 1 {
		t.Errorf("client errors (gone) = %v, want 1", v)
	}
	if v := counterValue(m.clientErrors.WithLabelValues("localhost", "bad_request_body")); v != 1 {
		t.Errorf("client errors (bad body) = %v, want 1", v)
	}
}

// rangeHeader asks for n one-byte ranges that neither overlap nor touch:
// bytes 0, 2, 4, …
func rangeHeader(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf("%d-%d", 2*i, 2*i)
	}
	return "bytes=" + strings.Join(parts, ",")
}

// TestRangesCappedThroughEdge: with the default limit (100 ranges), a
// request for 100 ranges gets its 100 parts, from an upstream and from a
// static root, over HTTP/1.1 and HTTP/2; one for 101 gets the whole
// representation (200), as Apache answers past MaxRanges.
func TestRangesCappedThroughEdge(t *testing.T) {
	t.Parallel()
	content := make([]byte, 1000)
	for i := range content {
		content[i] = byte('a' + i%26)
	}
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		http.ServeContent(w, r, "data.txt", time.Unix(1e9, 0), bytes.NewReader(content))
	})
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "data.txt"), content, 0o644); err != nil {
		t.Fatal(err)
	}
	e := startEdge(t, "sites: [{hosts: [localhost], upstream: "+up+", compress: false, routes: [{path: /files/, root: "+root+", strip_prefix: true}]}]\n")
	for _, proto := range []string{"h1", "h2"} {
		c := e.client(t, proto)
		for _, path := range []string{"/data.txt", "/files/data.txt"} {
			res, body := get(t, c, e.url(path), "Range", rangeHeader(100))
			if res.StatusCode != http.StatusPartialContent {
				t.Errorf("%s %s, 100 ranges: %d, want 206", proto, path, res.StatusCode)
			} else if n := countParts(t, res, body); n != 100 {
				t.Errorf("%s %s, 100 ranges: %d parts", proto, path, n)
			}
			res, body = get(t, c, e.url(path), "Range", rangeHeader(101))
			if res.StatusCode != http.StatusOK || body != string(content) {
				t.Errorf("%s %s, 101 ranges: %d, %d bytes; want 200 and the whole", proto, path, res.StatusCode, len(body))
			}
		}
	}
}

// countParts counts the parts of a multipart/byteranges answer, checking
// that part i holds byte 2i.
func countParts(t *testing.T, res *http.Response, body string) int {
	t.Helper()
	mt, params, err := mime.ParseMediaType(res.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/byteranges" {
		t.Fatalf("Content-Type %q", res.Header.Get("Content-Type"))
	}
	mr := multipart.NewReader(strings.NewReader(body), params["boundary"])
	n := 0
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return n
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(p)
		if want := fmt.Sprintf("bytes %d-%d/1000", 2*n, 2*n); p.Header.Get("Content-Range") != want || len(b) != 1 || b[0] != byte('a'+(2*n)%26) {
			t.Fatalf("part %d: %q %q", n, p.Header.Get("Content-Range"), b)
		}
		n++
	}
}

// h2Outcome is what a raw HTTP/2 client read from the edge.
type h2Outcome struct {
	status   string        // :status of stream 1's answer, if any
	goAway   http2.ErrCode // the GOAWAY's code, if one came
	gotAway  bool
	rst      http2.ErrCode // stream 1's RST_STREAM code, if one came
	gotRST   bool
	pinged   bool            // the PING sent after the frames was answered
	settings []http2.Setting // the edge's first SETTINGS
}

// rawH2 opens an HTTP/2 connection to the edge, has send write frames on
// it (through a buffer), then a PING, and reads what the edge sends until
// the connection ends, or the PING is answered and, with answer, stream 1
// was answered whole.
func rawH2(t *testing.T, e *testEdge, answer bool, send func(fr *http2.Framer, enc func(...string) []byte)) h2Outcome {
	t.Helper()
	c, err := tls.Dial("tcp", e.Addrs().HTTPS, e.tlsConfig("h2"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second)) // bounds a hang only
	written := make(chan struct{})
	go func() {
		defer close(written)
		bw := bufio.NewWriterSize(c, 64<<10)
		fr := http2.NewFramer(bw, nil)
		var hb bytes.Buffer
		he := hpack.NewEncoder(&hb)
		enc := func(fields ...string) []byte {
			hb.Reset()
			for _, f := range fields {
				name, value, _ := strings.Cut(f[1:], ": ")
				_ = he.WriteField(hpack.HeaderField{Name: f[:1] + name, Value: value})
			}
			return bytes.Clone(hb.Bytes())
		}
		_, _ = bw.WriteString(http2.ClientPreface)
		_ = fr.WriteSettings()
		send(fr, enc) // write errors once the edge hung up are expected
		_ = fr.WritePing(false, [8]byte{'d', 'o', 'n', 'e'})
		_ = bw.Flush()
	}()
	defer func() { c.Close(); <-written }()
	var out h2Outcome
	answered := false
	fr := http2.NewFramer(c, c)
	dec := hpack.NewDecoder(4096, func(f hpack.HeaderField) {
		if f.Name == ":status" {
			out.status = f.Value
		}
	})
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return out
		}
		switch f := f.(type) {
		case *http2.HeadersFrame:
			if _, err := dec.Write(f.HeaderBlockFragment()); err != nil {
				t.Fatal(err)
			}
			answered = answered || f.StreamID == 1 && f.StreamEnded()
		case *http2.DataFrame:
			answered = answered || f.StreamID == 1 && f.StreamEnded()
		case *http2.RSTStreamFrame:
			if f.StreamID == 1 {
				out.rst, out.gotRST, answered = f.ErrCode, true, true
			}
		case *http2.SettingsFrame:
			if !f.IsAck() && out.settings == nil {
				out.settings = []http2.Setting{}
				_ = f.ForeachSetting(func(s http2.Setting) error { out.settings = append(out.settings, s); return nil })
			}
		case *http2.GoAwayFrame:
			out.goAway, out.gotAway = f.ErrCode, true
		case *http2.PingFrame:
			out.pinged = out.pinged || f.IsAck() && f.Data == [8]byte{'d', 'o', 'n', 'e'}
		}
		if out.pinged && (answered || !answer) {
			return out
		}
	}
}

// TestContinuationFloodThroughEdge: a request whose header block spans
// 300,000 CONTINUATION frames that carry no byte, on a fresh HTTP/2
// connection, gets a GOAWAY(PROTOCOL_ERROR) and the connection closed,
// never reaching the upstream; a PING sent after it goes unanswered (the
// edge stopped reading). A legitimate 30 KiB
// header block split over 100 small CONTINUATIONs is served.
func TestContinuationFloodThroughEdge(t *testing.T) {
	t.Parallel()
	up := newRawUpstream(t)
	e := startEdge(t, "sites: [{hosts: [localhost], upstream: "+up.URL+", compress: false}]\n")
	req := []string{":method: GET", ":scheme: https", ":authority: localhost", ":path: /flood", "user-agent: Go-http-client/2.0"}

	flood := rawH2(t, e, false, func(fr *http2.Framer, enc func(...string) []byte) {
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: enc(req...), EndStream: true})
		for i := range 300_000 {
			if fr.WriteContinuation(1, i == 300_000-1, nil) != nil { // the last one ends the block
				return
			}
		}
	})
	if flood.pinged || flood.status != "" || !flood.gotAway || flood.goAway != http2.ErrCodeProtocol {
		t.Errorf("300,000 empty CONTINUATIONs: status %q, GOAWAY %v (%v), PING answered %v; want PROTOCOL_ERROR and no answer",
			flood.status, flood.goAway, flood.gotAway, flood.pinged)
	}

	big := strings.Repeat("b", 30<<10)
	legit := rawH2(t, e, true, func(fr *http2.Framer, enc func(...string) []byte) {
		b := enc(append(req[:3:3], ":path: /big", "user-agent: Go-http-client/2.0", "x-big: "+big)...)
		size := len(b)/100 + 1
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: b[:size], EndStream: true})
		for rest := b[size:]; len(rest) > 0; {
			n := min(size, len(rest))
			_ = fr.WriteContinuation(1, n == len(rest), rest[:n])
			rest = rest[n:]
		}
	})
	if legit.status != "200" || legit.gotAway {
		t.Errorf("30 KiB over 100 CONTINUATIONs: status %q, GOAWAY %v", legit.status, legit.gotAway)
	}
	var lines []string
	for _, head := range up.heads() {
		lines = append(lines, requestLine(head))
		if requestLine(head) == "GET /big HTTP/1.1" && !strings.Contains(head, "X-Big: "+big+"\r\n") {
			t.Errorf("the 30 KiB header did not reach the upstream whole")
		}
	}
	if strings.Join(lines, ", ") != "GET /big HTTP/1.1" {
		t.Errorf("the upstream got %q, want only GET /big", lines)
	}
}

// parkings returns the HTTP/1.1 connection handlings the edge switches
// between (limits.park_after), as configuration text.
func parkings() map[string]string {
	return map[string]string{"parking": "", "no parking": "limits: {park_after: 0s}\n"}
}

// rawTLSSession writes raw on a new HTTP/1.1 connection to the edge and
// reads every response until the edge closes the connection.
func rawTLSSession(t *testing.T, e *testEdge, raw string) []*http.Response {
	t.Helper()
	c, err := tls.Dial("tcp", e.Addrs().HTTPS, e.tlsConfig("http/1.1"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second)) // bounds a hang only
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	var out []*http.Response
	br := bufio.NewReader(c)
	for {
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			if err != io.EOF && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("after %d responses: %v, want the connection closed", len(out), err)
			}
			return out
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		out = append(out, res)
	}
}

// probe is a request sent after the one under test in the same write: if
// the edge kept the connection, it answers it.
const probe = "GET /probe HTTP/1.1\r\nHost: localhost\r\nUser-Agent: Go-http-client/1.1\r\nConnection: close\r\n\r\n"

// TestAmbiguousLengthThroughEdge: an HTTP/1.1 request whose body length
// Transfer-Encoding and Content-Length both tell, in any spelling, or
// Transfer-Encoding in HTTP/1.0, is answered 400 and the connection
// closed, before anything reaches the upstream; so are a chunked request
// after a refused Upgrade (the tap stopped: nothing shows it had no
// Content-Length) and one whose Content-Length fields differ or do not
// parse. Transfer-Encodings other than one "chunked" get net/http's own
// 501 (nginx's answer too) and the connection closed. A plain chunked
// request is served and the connection kept.
func TestAmbiguousLengthThroughEdge(t *testing.T) {
	t.Parallel()
	for name, park := range parkings() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testAmbiguousLength(t, park)
		})
	}
}

func testAmbiguousLength(t *testing.T, park string) {
	up := newRawUpstream(t)
	e := startEdge(t, park+"sites: [{hosts: [localhost], upstream: "+up.URL+", compress: false}]\n")
	const head = "Host: localhost\r\nUser-Agent: Go-http-client/1.1\r\n"
	const body = "0\r\n\r\n" // chunked, and 5 bytes
	tests := []struct {
		name   string
		raw    string
		status int
	}{
		{"CL then TE", "POST /bad HTTP/1.1\r\n" + head + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n" + body, 400},
		{"TE then CL, other cases", "POST /bad HTTP/1.1\r\n" + head + "transfer-encoding: CHUNKED\r\ncontent-length: 5\r\n\r\n" + body, 400},
		{"CL 0", "POST /bad HTTP/1.1\r\n" + head + "Transfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n" + body, 400},
		{"TE folded", "POST /bad HTTP/1.1\r\n" + head + "Content-Length: 5\r\nTransfer-Encoding:\r\n chunked\r\n\r\n" + body, 400},
		{"CL twice, differing, and TE", "POST /bad HTTP/1.1\r\n" + head + "Content-Length: 5\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n" + body, 400},
		{"CL not a number, and TE", "POST /bad HTTP/1.1\r\n" + head + "Content-Length: five\r\nTransfer-Encoding: chunked\r\n\r\n" + body, 400},
		{"HTTP/1.0, CL and TE", "POST /bad HTTP/1.0\r\n" + head + "Connection: keep-alive\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n" + body, 400},
		{"HTTP/1.0, TE", "POST /bad HTTP/1.0\r\n" + head + "Connection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
		{"CL twice, differing", "POST /bad HTTP/1.1\r\n" + head + "Content-Length: 5\r\nContent-Length: 6\r\n\r\n" + body, 400},
		{"TE chunked, chunked, and CL", "POST /bad HTTP/1.1\r\n" + head + "Content-Length: 5\r\nTransfer-Encoding: chunked, chunked\r\n\r\n" + body, 501},
		{"TE twice, and CL", "POST /bad HTTP/1.1\r\n" + head + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n" + body, 501},
		{"TE identity, and CL", "POST /bad HTTP/1.1\r\n" + head + "Content-Length: 5\r\nTransfer-Encoding: identity\r\n\r\n" + body, 501},
		{"TE identity", "POST /bad HTTP/1.1\r\n" + head + "Transfer-Encoding: identity\r\n\r\n" + body, 501},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := rawTLSSession(t, e, tt.raw+probe)
			if len(res) != 1 || res[0].StatusCode != tt.status {
				var got []int
				for _, r := range res {
					got = append(got, r.StatusCode)
				}
				t.Fatalf("answers %v, want one %d and the connection closed", got, tt.status)
			}
			if !res[0].Close {
				t.Error("the answer does not say Connection: close")
			}
		})
	}
	t.Run("chunked after a refused Upgrade", func(t *testing.T) {
		t.Parallel()
		res := rawTLSSession(t, e, "GET /upgrade HTTP/1.1\r\n"+head+"Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n"+
			"POST /bad HTTP/1.1\r\n"+head+"Transfer-Encoding: chunked\r\n\r\n"+body+probe)
		if len(res) != 2 || res[0].StatusCode != 200 || res[1].StatusCode != 400 {
			t.Fatalf("%d answers, want 200 then 400 and the connection closed", len(res))
		}
	})
	t.Run("chunked", func(t *testing.T) {
		t.Parallel()
		res := rawTLSSession(t, e, "POST /chunked HTTP/1.1\r\n"+head+"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"+body+probe)
		if len(res) != 2 || res[0].StatusCode != 200 || res[1].StatusCode != 200 {
			t.Fatalf("%d answers, want 200 twice on one connection", len(res))
		}
	})
	t.Cleanup(func() { // after the subtests
		var lines []string
		for _, head := range up.heads() {
			lines = append(lines, requestLine(head))
		}
		slices.Sort(lines)
		want := "GET /probe HTTP/1.1, GET /upgrade HTTP/1.1, POST /chunked HTTP/1.1"
		if got := strings.Join(lines, ", "); got != want {
			t.Errorf("the upstream got %s, want %s", got, want)
		}
		// The edge's own 400s are the client's errors (net/http's own
		// answers never reach the handler).
		if v := counterValue(e.Server.metrics.clientErrors.WithLabelValues("unknown", "ambiguous_length")); v != 7 {
			t.Errorf("client errors (ambiguous_length) = %v, want 7", v)
		}
	})
}

// TestRefusedMethodsThroughEdge: TRACE, TRACK and CONNECT are answered 405
// with an Allow field on HTTP/1.1 (the connection closed), HTTP/2 and
// HTTP/3, and never reach the upstream. RFC 8441's extended CONNECT is not
// offered on HTTP/2 (no SETTINGS_ENABLE_CONNECT_PROTOCOL) and its stream
// is refused; on HTTP/3, where quic-go offers it, it is answered 405.
func TestRefusedMethodsThroughEdge(t *testing.T) {
	t.Parallel()
	for name, park := range parkings() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testRefusedMethods(t, park)
		})
	}
}

func testRefusedMethods(t *testing.T, park string) {
	up := newRawUpstream(t)
	e := startEdge(t, park+"sites: [{hosts: [localhost], upstream: "+up.URL+", compress: false}]\n")
	const head = "Host: localhost\r\nUser-Agent: Go-http-client/1.1\r\n"
	check := func(t *testing.T, what string, res *http.Response) {
		t.Helper()
		if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != allowedMethods {
			t.Errorf("%s: %d, Allow %q; want 405 and %q", what, res.StatusCode, res.Header.Get("Allow"), allowedMethods)
		}
	}
	for _, raw := range []string{
		"TRACE /trace HTTP/1.1\r\n" + head + "Max-Forwards: 0\r\n\r\n",
		"TRACK /track HTTP/1.1\r\n" + head + "\r\n",
		"CONNECT localhost:443 HTTP/1.1\r\nHost: localhost:443\r\nUser-Agent: Go-http-client/1.1\r\n\r\n",
	} {
		res := rawTLSSession(t, e, raw+probe)
		if len(res) != 1 {
			t.Errorf("h1 %s: %d answers, want one and the connection closed", requestLine(raw), len(res))
			continue
		}
		check(t, "h1 "+requestLine(raw), res[0])
	}
	for _, proto := range []string{"h2", "h3"} {
		c := e.client(t, proto)
		for _, m := range []string{"TRACE", "TRACK", "CONNECT"} {
			req, _ := http.NewRequest(m, e.url("/"+strings.ToLower(m)), nil)
			req.Host = "localhost" // the site's
			if m == "CONNECT" {
				req.URL.Path = "" // :authority only
			}
			res, err := c.Do(req)
			if err != nil {
				t.Errorf("%s %s: %v", proto, m, err)
				continue
			}
			res.Body.Close()
			check(t, proto+" "+m, res)
		}
	}

	ext := rawH2(t, e, true, func(fr *http2.Framer, enc func(...string) []byte) {
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, BlockFragment: enc(
			":method: CONNECT", ":protocol: websocket", ":scheme: https", ":authority: localhost", ":path: /ext", "sec-websocket-version: 13")})
	})
	for _, s := range ext.settings {
		if s.ID == http2.SettingEnableConnectProtocol && s.Val != 0 {
			t.Errorf("the edge offers extended CONNECT on HTTP/2: %v", s)
		}
	}
	if ext.settings == nil || ext.status == "200" || (ext.status != "405" && !ext.gotRST) {
		t.Errorf("h2 extended CONNECT: settings %v, status %q, reset %v", ext.settings, ext.status, ext.gotRST)
	}
	req, _ := http.NewRequest("CONNECT", e.url("/ext"), nil)
	req.Host = "localhost"
	req.Proto = "websocket" // quic-go's client sends it as :protocol
	res, err := e.client(t, "h3").Do(req)
	if err != nil {
		t.Fatalf("h3 extended CONNECT: %v", err)
	}
	res.Body.Close()
	check(t, "h3 extended CONNECT", res)

	if heads := up.heads(); len(heads) != 0 {
		t.Errorf("the upstream got %d requests, the first %q", len(heads), requestLine(heads[0]))
	}
	if v := counterValue(e.Server.metrics.clientErrors.WithLabelValues("unknown", "method_not_allowed")); v != 10 {
		t.Errorf("client errors (method_not_allowed) = %v, want 10", v)
	}
}

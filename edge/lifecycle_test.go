package edge

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maatproxy/maat/internal/testnet"
)

// readWSFrame reads one frame and returns its opcode and unmasked payload.
func readWSFrame(r io.Reader) (op byte, masked bool, payload []byte, err error) {
	var h [2]byte
	if _, err = io.ReadFull(r, h[:]); err != nil {
		return 0, false, nil, err
	}
	var n uint64
	switch l := h[1] & 0x7f; l {
	case 126:
		var b [2]byte
		if _, err = io.ReadFull(r, b[:]); err != nil {
			return 0, false, nil, err
		}
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err = io.ReadFull(r, b[:]); err != nil {
			return 0, false, nil, err
		}
		n = binary.BigEndian.Uint64(b[:])
	default:
		n = uint64(l)
	}
	masked = h[1]&0x80 != 0
	var key [4]byte
	if masked {
		if _, err = io.ReadFull(r, key[:]); err != nil {
			return 0, false, nil, err
		}
	}
	if n > 1<<20 {
		return 0, false, nil, fmt.Errorf("frame of %d bytes", n)
	}
	payload = make([]byte, n)
	if _, err = io.ReadFull(r, payload); err != nil {
		return 0, false, nil, err
	}
	if masked {
		for i := range payload {
			payload[i] ^= key[i%4]
		}
	}
	return h[0] & 0x0f, masked, payload, nil
}

// wsUpstream accepts one websocket and hands its connection (past the 101)
// to the test.
func wsUpstream(t *testing.T) (url string, conns <-chan net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan net.Conn, 1)
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		t.Cleanup(func() { c.Close() })
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		br := bufio.NewReader(c)
		head, err := readHead(br)
		if err != nil {
			return
		}
		req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(head)))
		if err != nil {
			return
		}
		sum := sha1.Sum([]byte(req.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
		fmt.Fprintf(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
			base64.StdEncoding.EncodeToString(sum[:]))
		ch <- &bufConn{Conn: c, r: br}
	}()
	return "http://" + ln.Addr().String(), ch
}

type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// dialWS opens a websocket to path through the edge and returns the
// connection past the 101.
func dialWS(t *testing.T, e *testEdge, path string) net.Conn {
	t.Helper()
	c, err := tls.Dial("tcp", e.Addrs().HTTPS, e.tlsConfig("http/1.1"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nUser-Agent: wstest/1.0\r\n\r\n", path)
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("handshake: %s", res.Status)
	}
	return &bufConn{Conn: c, r: br}
}

// readFPLog reads the fingerprint log whole (Shutdown closed it).
func readFPLog(t *testing.T, file string) []fpLine {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []fpLine
	for l := range strings.Lines(string(b)) {
		var fl fpLine
		if err := json.Unmarshal([]byte(l), &fl); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, fl)
	}
	return out
}

func lineFor(lines []fpLine, path string) fpLine {
	for _, l := range lines {
		if l.str("path") == path {
			return l
		}
	}
	return nil
}

// startShutdown runs Shutdown with a drain of d and returns its result's
// channel.
func startShutdown(s *Server, d time.Duration) <-chan error {
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		done <- s.Shutdown(ctx)
	}()
	return done
}

// tunnelsDraining reports whether n tunnels are tracked and all were told
// to go away.
func tunnelsDraining(s *Server, n int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.tunnels) != n {
		return false
	}
	for t := range s.tunnels {
		if !t.Draining() {
			return false
		}
	}
	return true
}

// TestShutdownClosesWebsocket: a websocket open at Shutdown, with a frame
// half sent in each direction, gets both frames through whole, then the
// client a Close 1001 from the edge and the upstream a masked Close 1001;
// Shutdown returns, within its drain, only after the request's handler
// returned, and the request's fingerprint log line is in the file.
func TestShutdownClosesWebsocket(t *testing.T) {
	t.Parallel()
	upURL, upConns := wsUpstream(t)
	fp := filepath.Join(t.TempDir(), "fp.jsonl")
	e := startEdge(t, "log: {fingerprints: "+fp+"}\nsites: [{hosts: [localhost], upstream: "+upURL+"}]\n")
	client := dialWS(t, e, "/ws")
	var up net.Conn
	select {
	case up = <-upConns:
	case <-time.After(30 * time.Second):
		t.Fatal("the upstream saw no websocket")
	}

	// A frame each way, whole; then half a frame each way.
	key := []byte{9, 8, 7, 6}
	toUp := testnet.WSFrame(0x1, bytes.Repeat([]byte("c"), 300), key)
	toClient := testnet.WSFrame(0x2, bytes.Repeat([]byte("u"), 70000), nil)
	if _, err := client.Write(testnet.WSFrame(0x1, []byte("hi"), key)); err != nil {
		t.Fatal(err)
	}
	if op, _, p, err := readWSFrame(up); err != nil || op != 0x1 || string(p) != "hi" {
		t.Fatalf("upstream read %x %q %v", op, p, err)
	}
	if _, err := up.Write(testnet.WSFrame(0x1, []byte("hello"), nil)); err != nil {
		t.Fatal(err)
	}
	if op, _, p, err := readWSFrame(client); err != nil || op != 0x1 || string(p) != "hello" {
		t.Fatalf("client read %x %q %v", op, p, err)
	}
	// Each half is read on the other side: the edge has passed it on, and
	// stands in the middle of a frame each way.
	if _, err := client.Write(toUp[:100]); err != nil {
		t.Fatal(err)
	}
	upHalf := make([]byte, 100)
	if _, err := io.ReadFull(up, upHalf); err != nil {
		t.Fatal(err)
	}
	if _, err := up.Write(toClient[:30000]); err != nil {
		t.Fatal(err)
	}
	clientHalf := make([]byte, 30000)
	if _, err := io.ReadFull(client, clientHalf); err != nil {
		t.Fatal(err)
	}

	done := startShutdown(e.Server, 30*time.Second)
	if !waitFor(t, 30*time.Second, func() bool { return tunnelsDraining(e.Server, 1) }) {
		t.Fatal("the websocket was never told to go away")
	}
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned (%v) while a frame was half sent", err)
	default:
	}
	// The upstream ends its frame and the client its own.
	upGot := make(chan error, 1)
	go func() {
		op, masked, p, err := readWSFrame(io.MultiReader(bytes.NewReader(upHalf), up))
		if err == nil && (op != 0x1 || !masked || !bytes.Equal(p, bytes.Repeat([]byte("c"), 300))) {
			err = fmt.Errorf("the client's frame reached the upstream as %x masked=%v %d bytes", op, masked, len(p))
		}
		if err == nil {
			op, masked, p, err = readWSFrame(up)
			if err == nil && (op != 0x8 || !masked || !bytes.Equal(p, []byte{0x03, 0xe9})) {
				err = fmt.Errorf("the upstream's next frame: %x masked=%v %x, want a masked Close 1001", op, masked, p)
			}
		}
		if err == nil {
			if n, rerr := up.Read(make([]byte, 1)); n != 0 || rerr == nil {
				err = fmt.Errorf("after the Close, the upstream read %d bytes, %v; want the end", n, rerr)
			}
		}
		upGot <- err
	}()
	if _, err := up.Write(toClient[30000:]); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Write(toUp[100:]); err != nil {
		t.Fatal(err)
	}
	op, masked, p, err := readWSFrame(io.MultiReader(bytes.NewReader(clientHalf), client))
	if err != nil || op != 0x2 || masked || !bytes.Equal(p, bytes.Repeat([]byte("u"), 70000)) {
		t.Fatalf("the frame in progress reached the client as %x masked=%v %d bytes, %v", op, masked, len(p), err)
	}
	op, masked, p, err = readWSFrame(client)
	if err != nil || op != 0x8 || masked || !bytes.Equal(p, []byte{0x03, 0xe9}) {
		t.Fatalf("client: %x masked=%v %x %v, want a Close frame with status 1001", op, masked, p, err)
	}
	if err := <-upGot; err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if n, err := client.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Errorf("after the Close, the client read %d bytes, %v; want the end", n, err)
	}
	l := lineFor(readFPLog(t, fp), "/ws")
	if l == nil {
		t.Fatal("no fingerprint log line for the websocket after Shutdown returned")
	}
	if l.str("user_agent") != "wstest/1.0" || l.str("method") != "GET" {
		t.Errorf("the websocket's line: %v", l)
	}
}

// TestShutdownQuietWebsocket: a websocket where nothing moves is closed at
// once, both ways, and Shutdown does not wait for its drain to end.
func TestShutdownQuietWebsocket(t *testing.T) {
	t.Parallel()
	upURL, upConns := wsUpstream(t)
	fp := filepath.Join(t.TempDir(), "fp.jsonl")
	e := startEdge(t, "log: {fingerprints: "+fp+"}\nsites: [{hosts: [localhost], upstream: "+upURL+"}]\n")
	client := dialWS(t, e, "/quiet")
	var up net.Conn
	select {
	case up = <-upConns:
	case <-time.After(30 * time.Second):
		t.Fatal("the upstream saw no websocket")
	}
	e.mu.Lock()
	n := len(e.tunnels)
	e.mu.Unlock()
	if n != 1 || e.requests.InFlight() != 1 {
		t.Fatalf("%d tunnels, %d requests in flight; want the websocket's", n, e.requests.InFlight())
	}
	// A drain far longer than the test may take: Shutdown must not need it.
	done := startShutdown(e.Server, time.Hour)
	op, masked, p, err := readWSFrame(client)
	if err != nil || op != 0x8 || masked || !bytes.Equal(p, []byte{0x03, 0xe9}) {
		t.Fatalf("client: %x masked=%v %x %v, want a Close frame with status 1001", op, masked, p, err)
	}
	op, masked, p, err = readWSFrame(up)
	if err != nil || op != 0x8 || !masked || !bytes.Equal(p, []byte{0x03, 0xe9}) {
		t.Fatalf("upstream: %x masked=%v %x %v, want a masked Close frame with status 1001", op, masked, p, err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Shutdown still waits after the websocket closed")
	}
	if lineFor(readFPLog(t, fp), "/quiet") == nil {
		t.Fatal("no fingerprint log line for the websocket after Shutdown returned")
	}
}

// TestShutdownCutsStalledWebsocket: a websocket whose client stopped in
// the middle of a frame cannot be closed between frames; when the drain
// ends, Shutdown closes its connections, waits for its handler and
// returns with the request logged.
func TestShutdownCutsStalledWebsocket(t *testing.T) {
	t.Parallel()
	upURL, upConns := wsUpstream(t)
	fp := filepath.Join(t.TempDir(), "fp.jsonl")
	e := startEdge(t, "log: {fingerprints: "+fp+"}\nsites: [{hosts: [localhost], upstream: "+upURL+"}]\n")
	client := dialWS(t, e, "/stalled")
	var up net.Conn
	select {
	case up = <-upConns:
	case <-time.After(30 * time.Second):
		t.Fatal("the upstream saw no websocket")
	}
	frame := testnet.WSFrame(0x1, bytes.Repeat([]byte("s"), 1000), []byte{1, 2, 3, 4})
	if _, err := client.Write(frame[:500]); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(up, make([]byte, 500)); err != nil {
		t.Fatal(err)
	}
	done := startShutdown(e.Server, 300*time.Millisecond) // the drain's bound, which the stalled frame outlives
	select {
	case err := <-done:
		if err == nil {
			t.Error("Shutdown reported a complete drain with a websocket cut")
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Shutdown did not return")
	}
	if lineFor(readFPLog(t, fp), "/stalled") == nil {
		t.Fatal("no fingerprint log line for the cut websocket after Shutdown returned")
	}
	_ = client.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadAll(client); err != nil && isTimeout(err) {
		t.Error("the client's connection is still open after Shutdown")
	}
}

// TestShutdownLogsCutStream: a server-sent events answer still streaming
// when the drain ends is cut, and its request's line is in the
// fingerprint log when Shutdown returns; over HTTP/1.1, HTTP/2 and HTTP/3.
func TestShutdownLogsCutStream(t *testing.T) {
	t.Parallel()
	for _, proto := range []string{"h1", "h2", "h3"} {
		t.Run(proto, func(t *testing.T) {
			t.Parallel()
			started := make(chan struct{}, 1)
			up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, "data: one\n\n")
				http.NewResponseController(w).Flush()
				started <- struct{}{}
				<-r.Context().Done() // an endless stream
			})
			fp := filepath.Join(t.TempDir(), "fp.jsonl")
			e := startEdge(t, "log: {fingerprints: "+fp+"}\nsites: [{hosts: [localhost], upstream: "+up+"}]\n")
			req, _ := http.NewRequest("GET", e.url("/events"), nil)
			req.Host = "localhost"
			res, err := e.client(t, proto).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			line, err := bufio.NewReader(res.Body).ReadString('\n')
			if err != nil || line != "data: one\n" {
				t.Fatalf("first event: %q %v", line, err)
			}
			<-started
			done := startShutdown(e.Server, 200*time.Millisecond) // the drain's bound, which the stream outlives
			select {
			case err := <-done:
				if err == nil {
					t.Error("Shutdown reported a complete drain with a stream still open")
				}
			case <-time.After(60 * time.Second):
				t.Fatal("Shutdown did not return")
			}
			l := lineFor(readFPLog(t, fp), "/events")
			if l == nil {
				t.Fatal("no fingerprint log line for the cut stream after Shutdown returned")
			}
			if l.str("proto") != map[string]string{"h1": "HTTP/1.1", "h2": "HTTP/2.0", "h3": "HTTP/3.0"}[proto] {
				t.Errorf("line: %v", l)
			}
		})
	}
}

// TestShutdownWaitsForSlowAnswer: a slow answer in flight at Shutdown is
// answered whole within the drain and logged; over HTTP/1.1, HTTP/2 and
// HTTP/3.
func TestShutdownWaitsForSlowAnswer(t *testing.T) {
	t.Parallel()
	for _, proto := range []string{"h1", "h2", "h3"} {
		t.Run(proto, func(t *testing.T) {
			t.Parallel()
			arrived, release := make(chan struct{}), make(chan struct{})
			up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				close(arrived)
				<-release
				_, _ = io.WriteString(w, "slow answer")
			})
			fp := filepath.Join(t.TempDir(), "fp.jsonl")
			e := startEdge(t, "log: {fingerprints: "+fp+"}\nsites: [{hosts: [localhost], upstream: "+up+"}]\n")
			type result struct {
				body string
				err  error
			}
			got := make(chan result, 1)
			c := e.client(t, proto)
			go func() {
				req, _ := http.NewRequest("GET", e.url("/slow"), nil)
				req.Host = "localhost"
				res, err := c.Do(req)
				if err != nil {
					got <- result{err: err}
					return
				}
				b, err := io.ReadAll(res.Body)
				res.Body.Close()
				got <- result{string(b), err}
			}()
			<-arrived
			done := startShutdown(e.Server, time.Hour)
			if !waitFor(t, 30*time.Second, func() bool { return e.stopping.Load() }) {
				t.Fatal("Shutdown did not begin")
			}
			select {
			case err := <-done:
				t.Fatalf("Shutdown returned (%v) with a request in flight", err)
			default:
			}
			close(release)
			if r := <-got; r.err != nil || r.body != "slow answer" {
				t.Fatalf("answer: %q %v", r.body, r.err)
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("Shutdown: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("Shutdown did not return after the last answer")
			}
			if l := lineFor(readFPLog(t, fp), "/slow"); l == nil || l["status"] != float64(200) {
				t.Fatalf("line for the slow answer: %v", l)
			}
		})
	}
}

package edge

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// parkEdge starts an edge whose idle HTTP/1 connections park after
// 50 ms, in front of an upstream that echoes what it got, and returns it
// with the events of its parking.
func parkEdge(t *testing.T, extra string) (*testEdge, parkEvents) {
	return parkEdgeWith(t, extra, false)
}

// parkEdgeWith is parkEdge, its parked connections waiting on goroutines
// when noPoll.
func parkEdgeWith(t *testing.T, extra string, noPoll bool) (*testEdge, parkEvents) {
	t.Helper()
	return parkEdgeOpts(t, parkOpts{extra: extra, noPoll: noPoll})
}

// parkOpts are the options of parkEdgeOpts.
type parkOpts struct {
	extra  string          // more configuration
	noPoll bool            // parked connections wait on goroutines
	after  time.Duration   // limits.park_after; 50 ms if zero, never if negative
	up     http.Handler    // the upstream; nil: one that echoes what it got
	trace  func(parkEvent) // told of each event before the channel returned
}

// echoHandler answers with the method, path and body it got, and whether
// the edge sent a JA4 fingerprint.
var echoHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Echo-H2fp", r.Header.Get("X-Maat-H2fp"))
	w.Header().Set("Echo-Order", r.Header.Get("X-Maat-Header-Order"))
	fmt.Fprintf(w, "%s %s %q ja4=%t", r.Method, r.URL.Path, body, r.Header.Get("X-Maat-Ja4") != "")
})

// parkEdgeOpts starts an edge as o says and returns it with the events
// of its parking.
func parkEdgeOpts(t *testing.T, o parkOpts) (*testEdge, parkEvents) {
	t.Helper()
	if o.up == nil {
		o.up = echoHandler
	}
	up := httptest.NewServer(o.up)
	t.Cleanup(up.Close)
	cfg, err := ParseConfig("test.yaml", []byte(edgeConfigText("", o.extra+
		"policy: \"\"\nsites: [{hosts: [localhost], upstream: "+up.URL+", compress: false}]\n")))
	if err != nil {
		t.Fatal(err)
	}
	events := make(parkEvents, 256)
	switch {
	case o.after == 0:
		cfg.Limits.ParkAfter = Duration(50 * time.Millisecond)
	case o.after < 0:
		cfg.Limits.ParkAfter = 0
	default:
		cfg.Limits.ParkAfter = Duration(o.after)
	}
	cfg.Demo = true // the fingerprints sent upstream, echoed
	cfg.parkNoPoll = o.noPoll
	cfg.parkTrace = func(ev parkEvent) {
		if o.trace != nil {
			o.trace(ev)
		}
		select {
		case events <- ev:
		default:
		}
	}
	return startEdgeConfig(t, cfg, io.Discard), events
}

// parkEvents are the events of an edge's parking, as they come.
type parkEvents chan parkEvent

// next waits for the next event of one of kinds, skipping others.
func (ch parkEvents) next(t *testing.T, kinds ...parkEventKind) parkEvent {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev := <-ch:
			if slices.Contains(kinds, ev.kind) {
				return ev
			}
		case <-timeout:
			t.Fatalf("no parking event of kinds %v in 20s", kinds)
		}
	}
}

// nextIdle waits for the next parkChecked event of a connection that
// served a request, skipping others.
func (ch parkEvents) nextIdle(t *testing.T) parkEvent {
	t.Helper()
	for {
		if ev := ch.next(t, parkChecked); !ev.first {
			return ev
		}
	}
}

// tryWithin waits d for the edge to try to park a connection that served
// a request (a parkChecked event), and returns the try if there was one.
func (ch parkEvents) tryWithin(t *testing.T, d time.Duration) (parkEvent, bool) {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case ev := <-ch:
			if ev.kind == parkChecked && !ev.first {
				return ev, true
			}
		case <-timeout:
			return parkEvent{}, false
		}
	}
}

// drain forgets the events so far.
func (ch parkEvents) drain() {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// h1Dial opens an HTTP/1.1 connection to e.
func h1Dial(t *testing.T, e *testEdge) (*tls.Conn, *bufio.Reader) {
	t.Helper()
	c, err := tls.Dial("tcp", e.Addrs().HTTPS, e.tlsConfig("http/1.1"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	return c, bufio.NewReader(c)
}

// readAnswer reads one response and returns its status and body.
func readAnswer(t *testing.T, br *bufio.Reader) (int, string) {
	t.Helper()
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatalf("reading the answer's body: %v", err)
	}
	return res.StatusCode, string(body)
}

func waitParked(t *testing.T, e *testEdge, n int64) {
	t.Helper()
	if !waitFor(t, 10*time.Second, func() bool { return e.Server.parked.Load() == n }) {
		t.Fatalf("parked connections: %d, want %d", e.Server.parked.Load(), n)
	}
}

// h1Requested opens an HTTP/1.1 connection to e and makes a request on
// it.
func h1Requested(t *testing.T, e *testEdge) (*tls.Conn, *bufio.Reader) {
	t.Helper()
	c, br := h1Dial(t, e)
	fmt.Fprintf(c, parkGet, "x")
	if code, _ := readAnswer(t, br); code != 200 {
		t.Fatalf("request: %d", code)
	}
	return c, br
}

// h1Parked is h1Requested, then waits until the connection is parked,
// the only one of e.
func h1Parked(t *testing.T, e *testEdge) (*tls.Conn, *bufio.Reader) {
	t.Helper()
	c, br := h1Requested(t, e)
	waitParked(t, e, 1)
	return c, br
}

const parkGet = "GET /%s HTTP/1.1\r\nHost: localhost\r\nUser-Agent: curl/8.5.0\r\n\r\n"

// TestIdleConnectionsPark: an HTTP/1 connection idle past parkAfter is
// parked, and the client, sending its next requests on it as if nothing
// happened, gets them answered on the same connection (c, whose one
// handshake the edge would have to repeat), fingerprinted as before —
// again and again, and with a body.
func TestIdleConnectionsPark(t *testing.T) {
	t.Parallel()
	bothWaits(t, idleConnectionsPark)
}

func idleConnectionsPark(t *testing.T, noPoll bool) {
	e, _ := parkEdgeWith(t, "", noPoll)
	c, br := h1Dial(t, e)
	for i := range 3 {
		fmt.Fprintf(c, parkGet, fmt.Sprint("n", i))
		if code, body := readAnswer(t, br); code != 200 || body != fmt.Sprintf(`GET /n%d "" ja4=true`, i) {
			t.Fatalf("request %d: %d %q", i, code, body)
		}
		waitParked(t, e, 1)
	}
	io.WriteString(c, "POST /form HTTP/1.1\r\nHost: localhost\r\nUser-Agent: curl/8.5.0\r\nContent-Length: 5\r\n\r\nhello")
	if code, body := readAnswer(t, br); code != 200 || body != `POST /form "hello" ja4=true` {
		t.Fatalf("POST after parking: %d %q", code, body)
	}
	waitParked(t, e, 1)
	c.Close()
	waitParked(t, e, 0)
}

// TestParkKeepsUnreadBytes: a connection that falls idle with part of a
// pipelined request read, however little, is not parked — parking it would
// lose what net/http holds — and the request, finished late, is answered
// whole.
func TestParkKeepsUnreadBytes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, first, rest, want string }{
		{"pipelined, 2 bytes", fmt.Sprintf(parkGet, "a") + "GE", // less than net/http's Peek: it reads
			"T /b HTTP/1.1\r\nHost: localhost\r\nUser-Agent: curl/8.5.0\r\n\r\n", `GET /b "" ja4=true`},
		{"pipelined request line", fmt.Sprintf(parkGet, "a") + "GET /b HT",
			"TP/1.1\r\nHost: localhost\r\nUser-Agent: curl/8.5.0\r\n\r\n", `GET /b "" ja4=true`},
		{"pipelined head", fmt.Sprintf(parkGet, "a") + "POST /b HTTP/1.1\r\nHost: localhost\r\n",
			"User-Agent: curl/8.5.0\r\nContent-Length: 2\r\n\r\nok", `POST /b "ok" ja4=true`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e, events := parkEdge(t, "") // one each: the events are the one connection's
			c, br := h1Dial(t, e)
			io.WriteString(c, tc.first)
			if code, body := readAnswer(t, br); code != 200 || body != `GET /a "" ja4=true` {
				t.Fatalf("first request: %d %q", code, body)
			}
			// The edge may try to park the connection, and must not.
			if ev, ok := events.tryWithin(t, 20*50*time.Millisecond); ok && ev.atRest {
				t.Fatal("a connection holding part of a request stood at rest")
			}
			io.WriteString(c, tc.rest)
			if code, body := readAnswer(t, br); code != 200 || body != tc.want {
				t.Fatalf("the pipelined request: %d %q, want 200 %q", code, body, tc.want)
			}
		})
	}
}

// TestParkedConnectionTimesOut: a parked connection is closed when the
// idle timeout passes, as one net/http holds is, and a connection parked
// again after a request gets the idle timeout afresh.
func TestParkedConnectionTimesOut(t *testing.T) {
	t.Parallel()
	bothWaits(t, parkedConnectionTimesOut)
}

func parkedConnectionTimesOut(t *testing.T, noPoll bool) {
	e, _ := parkEdgeWith(t, "timeouts: {idle: 400ms}\n", noPoll)
	start := time.Now()
	_, br := h1Parked(t, e)
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("the parked connection: read %v, want EOF when the idle timeout passes", err)
	}
	if d := time.Since(start); d < 400*time.Millisecond {
		t.Fatalf("closed after %v, before the idle timeout of 400ms", d)
	}
	waitParked(t, e, 0)
}

// TestShutdownClosesParked: Shutdown closes parked connections at once, as
// net/http closes idle ones, and does not wait for them until it times out.
func TestShutdownClosesParked(t *testing.T) {
	t.Parallel()
	bothWaits(t, shutdownClosesParked)
}

func shutdownClosesParked(t *testing.T, noPoll bool) {
	e, _ := parkEdgeWith(t, "", noPoll)
	_, br := h1Parked(t, e)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.Server.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("the parked connection after Shutdown: read %v, want EOF", err)
	}
}

// TestParkedCountsAgainstClient: a parked connection still counts against
// limits.conns_per_client, so parking is no way around the cap.
func TestParkedCountsAgainstClient(t *testing.T) {
	t.Parallel()
	e, _ := parkEdge(t, "limits: {conns_per_client: 2}\n")
	for range 2 {
		h1Requested(t, e)
	}
	waitParked(t, e, 2)
	c, err := tls.Dial("tcp", e.Addrs().HTTPS, e.tlsConfig("http/1.1"))
	if err == nil {
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, parkGet, "x")
		_, err = c.Read(make([]byte, 1))
	}
	if err == nil || !strings.Contains(err.Error(), "EOF") && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("a third connection past conns_per_client 2: %v, want it hung up on", err)
	}
}

// bothWaits runs test with parked connections waiting on epoll (on Linux)
// and on goroutines.
func bothWaits(t *testing.T, test func(*testing.T, bool)) {
	for _, noPoll := range []bool{false, true} {
		t.Run(map[bool]string{false: "poller", true: "goroutines"}[noPoll], func(t *testing.T) {
			t.Parallel()
			test(t, noPoll)
		})
	}
}

// TestParkedTrickleCut: a client that wakes its parked connection with one
// byte and sends nothing more is cut when timeouts.read_header passes, as
// on a connection never parked: trickling a byte now and then does not
// hold a connection for ever.
func TestParkedTrickleCut(t *testing.T) {
	t.Parallel()
	bothWaits(t, parkedTrickleCut)
}

func parkedTrickleCut(t *testing.T, noPoll bool) {
	e, _ := parkEdgeWith(t, "timeouts: {read_header: 300ms}\n", noPoll)
	c, br := h1Parked(t, e)
	start := time.Now()
	io.WriteString(c, "G")
	waitParked(t, e, 0) // woken, and back with net/http
	// net/http answers a request head cut short by its timeout with a 400,
	// or just closes: either way the connection ends.
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatalf("the trickling connection: %v after %v, want it closed", err, time.Since(start))
	}
	if len(rest) > 0 && !strings.HasPrefix(string(rest), "HTTP/1.1 4") {
		t.Fatalf("the trickling connection got %q", rest)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("cut after %v, before read_header", d)
	}
}

// TestParkedDesync: the requests that could desynchronize a proxy and its
// upstream get the same answer on a parked connection as on a fresh one:
// the connection comes back to net/http's parser whole, with nothing of
// the earlier request left over.
var dateField = regexp.MustCompile("(?m)^Date: [^\r]*\r\n")

func TestParkedDesync(t *testing.T) {
	t.Parallel()
	e, _ := parkEdge(t, "")
	answer := func(raw string, park bool) string {
		dial := h1Dial
		if park {
			dial = h1Parked
		}
		c, br := dial(t, e)
		defer c.Close()
		io.WriteString(c, raw)
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			return "error " + err.Error()
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		// What follows on the connection, if anything: a second answer
		// would be a desync.
		_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		more, _ := io.ReadAll(br)
		more = dateField.ReplaceAll(more, nil) // the clock may tick between the two
		return fmt.Sprintf("%d %q then %q", res.StatusCode, body, more)
	}
	for _, raw := range []string{
		"POST /d HTTP/1.1\r\nHost: localhost\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: localhost\r\n\r\n",
		"POST /d HTTP/1.1\r\nHost: localhost\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nabcde",
		"POST /d HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n",
		"POST /d HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\n\r\nabcGET /smuggled HTTP/1.1\r\nHost: localhost\r\nUser-Agent: curl/8.5.0\r\n\r\n",
	} {
		fresh, parked := answer(raw, false), answer(raw, true)
		if fresh != parked {
			t.Errorf("%q:\n fresh connection:  %s\n parked connection: %s", raw, fresh, parked)
		}
		waitParked(t, e, 0)
	}
}

// TestParkingUnderChurn: many clients send requests — whole, or split in
// two writes — with pauses around the time to park, so that connections
// park and wake while bytes arrive at every moment of it; every request is
// answered, in order, on its own connection.
func TestParkingUnderChurn(t *testing.T) {
	t.Parallel()
	for _, noPoll := range []bool{false, true} {
		e, _ := parkEdgeWith(t, "", noPoll)
		var wg sync.WaitGroup
		for client := range 24 {
			wg.Go(func() {
				c, br := h1Dial(t, e)
				rnd := rand.New(rand.NewPCG(uint64(client), 7))
				for i := range 6 {
					path := fmt.Sprintf("c%dr%d", client, i)
					req := fmt.Sprintf(parkGet, path)
					if cut := rnd.IntN(len(req)); rnd.IntN(2) == 0 {
						io.WriteString(c, req[:cut])
						time.Sleep(time.Duration(30+rnd.IntN(40)) * time.Millisecond)
						io.WriteString(c, req[cut:])
					} else {
						io.WriteString(c, req)
					}
					res, err := http.ReadResponse(br, nil)
					if err != nil {
						t.Errorf("%s (waits on goroutines: %v; parked now %d): %v", path, noPoll, e.Server.parked.Load(), err)
						return
					}
					body, _ := io.ReadAll(res.Body)
					res.Body.Close()
					if want := fmt.Sprintf(`GET /%s "" ja4=true`, path); res.StatusCode != 200 || string(body) != want {
						t.Errorf("%s: %d %q, want %q", path, res.StatusCode, body, want)
						return
					}
					// Around the time to park (50 ms): sometimes before,
					// sometimes after, sometimes just at it.
					time.Sleep(time.Duration(30+rnd.IntN(40)) * time.Millisecond)
				}
			})
		}
		wg.Wait()
	}
}

// TestParkedLastRequest: a client that sends one more request on a parked
// connection and closes its sending side at once (TLS close_notify, then
// a TCP FIN) has the request read and answered: only a goodbye with
// nothing before it is taken for a hang-up.
func TestParkedLastRequest(t *testing.T) {
	t.Parallel()
	bothWaits(t, parkedLastRequest)
}

func parkedLastRequest(t *testing.T, noPoll bool) {
	e, _ := parkEdgeWith(t, "", noPoll)
	c, br := h1Parked(t, e)
	fmt.Fprintf(c, "GET /last HTTP/1.1\r\nHost: localhost\r\nUser-Agent: curl/8.5.0\r\n\r\n")
	if err := c.CloseWrite(); err != nil { // close_notify
		t.Fatal(err)
	}
	if err := c.NetConn().(*net.TCPConn).CloseWrite(); err != nil { // FIN
		t.Fatal(err)
	}
	// net/http takes the close for the client giving up the request, as
	// on a connection never parked: the answer may come without its body,
	// but it comes.
	if code, _ := readAnswer(t, br); code != 200 {
		t.Fatalf("the last request: %d", code)
	}
	waitParked(t, e, 0)
}

// TestParkPipelined: requests written all at once (HTTP/1.1 pipelining),
// with and without bodies, are answered with what the upstream says, in
// order, however long past the time to park the upstream takes over one
// of them: net/http holds the requests after it in its buffer, and a
// connection is never parked while a request is in flight or net/http
// holds bytes of one. The slow answer is released once the edge has
// surely had time to try: on the first try to park (a bug) or after 20
// times the time to park.
func TestParkPipelined(t *testing.T) {
	t.Parallel()
	for n := 2; n <= 10; n++ {
		for _, body := range []string{"none", "length", "chunked"} {
			t.Run(fmt.Sprintf("%d/%s", n, body), func(t *testing.T) {
				t.Parallel()
				parkPipelined(t, n, body)
			})
		}
	}
}

func parkPipelined(t *testing.T, n int, body string) {
	const after = 50 * time.Millisecond
	arrived, release := make(chan struct{}), make(chan struct{})
	e, events := parkEdgeOpts(t, parkOpts{after: after, up: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if strings.HasPrefix(r.URL.Path, "/slow/") {
			close(arrived)
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		fmt.Fprintf(w, "%s %s %q", r.Method, r.URL.Path, b)
	})})
	var raw strings.Builder
	var want []string
	for i := range n {
		path := fmt.Sprintf("/r%d", i)
		if i == 1 {
			path = "/slow/1"
		}
		b := fmt.Sprintf("body of %d", i)
		switch body {
		case "none":
			fmt.Fprintf(&raw, "GET %s HTTP/1.1\r\nHost: localhost\r\nUser-Agent: curl/8.5.0\r\n\r\n", path)
			want = append(want, fmt.Sprintf("GET %s %q", path, ""))
		case "length":
			fmt.Fprintf(&raw, "POST %s HTTP/1.1\r\nHost: localhost\r\nUser-Agent: curl/8.5.0\r\nContent-Length: %d\r\n\r\n%s", path, len(b), b)
			want = append(want, fmt.Sprintf("POST %s %q", path, b))
		case "chunked":
			fmt.Fprintf(&raw, "POST %s HTTP/1.1\r\nHost: localhost\r\nUser-Agent: curl/8.5.0\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", path, len(b), b)
			want = append(want, fmt.Sprintf("POST %s %q", path, b))
		}
	}
	c, br := h1Dial(t, e)
	if _, err := io.WriteString(c, raw.String()); err != nil { // one write, one TLS record
		t.Fatal(err)
	}
	select {
	case <-arrived:
	case <-time.After(20 * time.Second):
		t.Fatal("the slow request never reached the upstream")
	}
	if ev, ok := events.tryWithin(t, 20*after); ok {
		t.Errorf("the edge tried to park the connection (at rest: %v) while a request was in flight", ev.atRest)
	}
	close(release)
	for i, w := range want {
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		got, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != 200 || string(got) != w {
			t.Fatalf("answer %d: %d %q (%v), want 200 %q", i, res.StatusCode, got, err, w)
		}
	}
	waitParked(t, e, 1) // and once all are answered, the connection parks
}

// holdConn is a client's TCP connection under its TLS, whose writes can be
// caught (capture) and sent later in pieces of our choosing.
type holdConn struct {
	net.Conn
	mu   sync.Mutex
	hold bool
	held []byte
}

func (c *holdConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hold {
		c.held = append(c.held, p...)
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// capture returns the bytes f writes, which do not go out.
func (c *holdConn) capture(f func()) []byte {
	c.mu.Lock()
	c.hold, c.held = true, nil
	c.mu.Unlock()
	f()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hold = false
	return c.held
}

// h1DialHeld is h1Dial with the TCP connection under the client's TLS
// at hand, speaking TLS version v (0: the highest).
func h1DialHeld(t *testing.T, e *testEdge, v uint16) (*holdConn, *tls.Conn, *bufio.Reader) {
	t.Helper()
	nc, err := net.Dial("tcp", e.Addrs().HTTPS)
	if err != nil {
		t.Fatal(err)
	}
	hc := &holdConn{Conn: nc}
	cfg := e.tlsConfig("http/1.1")
	cfg.MaxVersion = v
	c := tls.Client(hc, cfg)
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if err := c.Handshake(); err != nil {
		t.Fatal(err)
	}
	return hc, c, bufio.NewReader(c)
}

// TestParkedRecordTail: a request whose TLS record came partly before a
// connection parked (crypto/tls keeps what it read of the record when its
// read times out) and whose last bytes — no more than a close_notify alert
// would take — come later, together with the client's FIN, is read and
// answered: only crypto/tls can tell a record's tail from an alert.
func TestParkedRecordTail(t *testing.T) {
	t.Parallel()
	bothWaits(t, parkedRecordTail)
}

func parkedRecordTail(t *testing.T, noPoll bool) {
	e, events := parkEdgeWith(t, "", noPoll)
	hc, c, br := h1DialHeld(t, e, 0)
	fmt.Fprintf(c, parkGet, "x")
	if code, _ := readAnswer(t, br); code != 200 {
		t.Fatalf("request: %d", code)
	}
	waitParked(t, e, 1)
	events.drain()
	record := hc.capture(func() { fmt.Fprintf(c, parkGet, "tail") })
	const tail = 20 // no more than a close_notify alert record (24 bytes in TLS 1.3, 31 in 1.2)
	if _, err := hc.Conn.Write(record[:len(record)-tail]); err != nil {
		t.Fatal(err)
	}
	events.next(t, parkRewait) // the head was read, and the connection waits on
	waitParked(t, e, 1)
	if _, err := hc.Conn.Write(record[len(record)-tail:]); err != nil {
		t.Fatal(err)
	}
	if err := hc.Conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if code, _ := readAnswer(t, br); code != 200 {
		t.Fatalf("the request whose record's tail came with the FIN: %d", code)
	}
	waitParked(t, e, 0)
}

// TestParkedGoodbye: a client that closes its parked connection — a TCP
// FIN alone, or after a close_notify alert, in TLS 1.2 (an alert record)
// or TLS 1.3 (an alert inside an application data record) — has it closed
// where it waits: net/http never sees it.
func TestParkedGoodbye(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		v      uint16
		notify bool
	}{
		{"FIN", 0, false}, {"TLS 1.3 close_notify", tls.VersionTLS13, true}, {"TLS 1.2 close_notify", tls.VersionTLS12, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			bothWaits(t, func(t *testing.T, noPoll bool) {
				e, events := parkEdgeWith(t, "", noPoll)
				hc, c, br := h1DialHeld(t, e, tc.v)
				fmt.Fprintf(c, parkGet, "x")
				if code, _ := readAnswer(t, br); code != 200 {
					t.Fatalf("request: %d", code)
				}
				waitParked(t, e, 1)
				events.drain()
				if tc.notify {
					if err := c.CloseWrite(); err != nil {
						t.Fatal(err)
					}
				}
				if err := hc.Conn.(*net.TCPConn).CloseWrite(); err != nil {
					t.Fatal(err)
				}
				if ev := events.next(t, parkWoke, parkHungUp); ev.kind != parkHungUp {
					t.Fatal("the goodbye went to net/http")
				}
				if _, err := br.ReadByte(); err != io.EOF {
					t.Fatalf("after the goodbye: %v, want EOF", err)
				}
				waitParked(t, e, 0)
			})
		})
	}
}

// TestParkedRequestAndFIN: a request sent on a parked connection together
// with the client's FIN (no close_notify) is answered.
func TestParkedRequestAndFIN(t *testing.T) {
	t.Parallel()
	bothWaits(t, func(t *testing.T, noPoll bool) {
		e, _ := parkEdgeWith(t, "", noPoll)
		hc, c, br := h1DialHeld(t, e, 0)
		fmt.Fprintf(c, parkGet, "x")
		if code, _ := readAnswer(t, br); code != 200 {
			t.Fatalf("request: %d", code)
		}
		waitParked(t, e, 1)
		record := hc.capture(func() { fmt.Fprintf(c, parkGet, "last") })
		if _, err := hc.Conn.Write(record); err != nil {
			t.Fatal(err)
		}
		if err := hc.Conn.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		if code, _ := readAnswer(t, br); code != 200 {
			t.Fatalf("the request sent with the FIN: %d", code)
		}
	})
}

// TestParkedTLSTrickleTimesOut: a client that wakes its parked connection
// again and again with a byte of a TLS record, never completing it, is
// closed when the idle timeout passes, as net/http closes one it holds:
// a wake does not restart the wait.
func TestParkedTLSTrickleTimesOut(t *testing.T) {
	t.Parallel()
	bothWaits(t, func(t *testing.T, noPoll bool) {
		const idle = 600 * time.Millisecond
		e, events := parkEdgeWith(t, "timeouts: {idle: 600ms, read_header: 30s}\n", noPoll)
		hc, c, br := h1DialHeld(t, e, 0)
		start := time.Now()
		fmt.Fprintf(c, parkGet, "x")
		if code, _ := readAnswer(t, br); code != 200 {
			t.Fatalf("request: %d", code)
		}
		waitParked(t, e, 1)
		// A request of 4 KiB, in one record, sent a byte per wake.
		record := hc.capture(func() {
			fmt.Fprintf(c, "GET /t HTTP/1.1\r\nHost: localhost\r\nX-Pad: %s\r\n\r\n", strings.Repeat("p", 4000))
		})
		closed := make(chan error, 1)
		go func() {
			_, err := br.ReadByte()
			closed <- err
		}()
		events.drain()
		bound := time.After(15 * time.Second)
		for i := 0; ; i++ {
			if i == len(record)-1 {
				t.Fatal("the whole record but a byte went out, and the connection is still open")
			}
			if _, err := hc.Conn.Write(record[i : i+1]); err != nil {
				break // closed
			}
			select {
			case <-events:
				continue
			case err := <-closed:
				if err != io.EOF {
					t.Fatalf("the trickling connection: %v, want EOF", err)
				}
			case <-bound:
				t.Fatalf("still open after %v, its idle timeout %v", time.Since(start), idle)
			}
			break
		}
		if d := time.Since(start); d < idle {
			t.Fatalf("closed after %v, before the idle timeout of %v", d, idle)
		}
	})
}

// TestParkBlankLines: a connection whose client sent an empty line after
// a request — net/http keeps it, and takes it for the start of the next
// request, which gets a 400 — is not parked: the next request gets the
// answer it gets with parking off.
func TestParkBlankLines(t *testing.T) {
	t.Parallel()
	answer := func(after time.Duration) int {
		e, events := parkEdgeOpts(t, parkOpts{after: after})
		c, br := h1Dial(t, e)
		io.WriteString(c, fmt.Sprintf(parkGet, "a")+"\r\n")
		if code, _ := readAnswer(t, br); code != 200 {
			t.Fatalf("request: %d", code)
		}
		if after > 0 && events.nextIdle(t).atRest {
			t.Error("a connection with an empty line read stood at rest")
		}
		fmt.Fprintf(c, parkGet, "b")
		code, _ := readAnswer(t, br)
		return code
	}
	if on, off := answer(50*time.Millisecond), answer(-1); on != off {
		t.Fatalf("after an empty line, the next request: %d with parking, %d without", on, off)
	}
}

// TestParkRequestAtPark: a request that arrives while the connection
// parks — after its wait for one ended, before it waits parked — is
// answered.
func TestParkRequestAtPark(t *testing.T) {
	t.Parallel()
	bothWaits(t, func(t *testing.T, noPoll bool) {
		checked, proceed, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
		e, _ := parkEdgeOpts(t, parkOpts{noPoll: noPoll, trace: func(ev parkEvent) {
			if ev.kind == parkChecked && !ev.first {
				select {
				case checked <- struct{}{}:
					<-proceed
				case <-done:
				}
			}
		}})
		t.Cleanup(func() { close(done) }) // before the edge's Shutdown
		c, br := h1Requested(t, e)
		for i := range 5 {
			<-checked // the edge decides to park the connection now
			fmt.Fprintf(c, parkGet, fmt.Sprint("at", i))
			proceed <- struct{}{}
			if code, body := readAnswer(t, br); code != 200 || body != fmt.Sprintf(`GET /at%d "" ja4=true`, i) {
				t.Fatalf("request %d: %d %q", i, code, body)
			}
		}
	})
}

// TestShutdownAsParking: Shutdown closing an idle connection (net/http's
// closeIdleConns) while the edge parks it ends the connection once, and
// Shutdown returns.
func TestShutdownAsParking(t *testing.T) {
	t.Parallel()
	checked, proceed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	e, _ := parkEdgeOpts(t, parkOpts{trace: func(ev parkEvent) {
		if ev.kind == parkChecked && !ev.first {
			once.Do(func() {
				checked <- struct{}{}
				<-proceed
			})
		}
	}})
	_, br := h1Requested(t, e)
	<-checked
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		shut <- e.Server.Shutdown(ctx)
	}()
	if _, err := br.ReadByte(); err != io.EOF { // closed by net/http's Shutdown
		t.Fatalf("the connection as Shutdown began: %v, want EOF", err)
	}
	close(proceed)
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if n := e.Server.parked.Load(); n != 0 {
		t.Fatalf("parked after Shutdown: %d", n)
	}
}

// recordConn records the calls net/http makes on a connection, and can end
// the wait for a request with io.EOF, as a parking Read does.
type recordConn struct {
	net.Conn
	eof bool // end the wait for the next request with io.EOF

	mu      sync.Mutex
	calls   []string
	waiting bool // ConnState(StateIdle), then SetReadDeadline, seen
}

func (c *recordConn) add(call string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, call)
}

func (c *recordConn) state(st http.ConnState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, "state "+st.String())
}

func (c *recordConn) seen() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.calls)
}

func (c *recordConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	eof := c.eof && len(c.calls) >= 2 && c.calls[len(c.calls)-2] == "state idle" && c.calls[len(c.calls)-1] == "deadline"
	c.calls = append(c.calls, "read")
	c.mu.Unlock()
	if eof {
		return 0, io.EOF
	}
	return c.Conn.Read(p)
}

func (c *recordConn) Write(p []byte) (int, error) {
	c.add("write")
	return c.Conn.Write(p)
}

func (c *recordConn) SetReadDeadline(t time.Time) error {
	c.add("deadline")
	return c.Conn.SetReadDeadline(t)
}

func (c *recordConn) Close() error {
	c.add("close")
	return c.Conn.Close()
}

// oneConnListener hands one connection to an http.Server.
type oneConnListener struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *oneConnListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *oneConnListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// TestNetHTTPParkContract pins what parking relies on net/http's server
// doing with a connection (park.go's list): a plain http.Server serves a
// recorded connection.
func TestNetHTTPParkContract(t *testing.T) {
	t.Parallel()
	serve := func(t *testing.T, eof bool) (*recordConn, net.Conn) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		client, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { client.Close() })
		sc, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		rc := &recordConn{Conn: sc, eof: eof}
		srv := &http.Server{
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       time.Minute,
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				rc.add("handler " + r.URL.Path)
				io.WriteString(w, r.URL.Path)
			}),
			ConnState: func(_ net.Conn, st http.ConnState) { rc.state(st) },
		}
		hl := &oneConnListener{ch: make(chan net.Conn, 1), done: make(chan struct{})}
		hl.ch <- rc
		go srv.Serve(hl)
		t.Cleanup(func() { srv.Close() })
		return rc, client
	}
	// after returns the calls after the n-th (from 1) of call, once the
	// calls include want more.
	after := func(t *testing.T, rc *recordConn, call string, n, want int) []string {
		t.Helper()
		var rest []string
		if !waitFor(t, 10*time.Second, func() bool {
			calls, i := rc.seen(), -1
			for seen := 0; seen < n; seen++ {
				j := slices.Index(calls[i+1:], call)
				if j < 0 {
					return false
				}
				i += j + 1
			}
			rest = calls[i+1:]
			return len(rest) >= want
		}) {
			t.Fatalf("calls %q: not %d after %q number %d", rc.seen(), want, call, n)
		}
		return rest[:want]
	}
	get := "GET /%s HTTP/1.1\r\nHost: x\r\n\r\n"

	t.Run("new", func(t *testing.T) {
		t.Parallel()
		rc, _ := serve(t, false)
		if got := after(t, rc, "state new", 1, 2); !slices.Equal(got, []string{"deadline", "read"}) {
			t.Fatalf("a new connection's first calls: %q, want the header deadline, then the read", got)
		}
	})
	t.Run("idle", func(t *testing.T) {
		t.Parallel()
		rc, client := serve(t, false)
		fmt.Fprintf(client, get, "a")
		if got := after(t, rc, "state idle", 1, 2); !slices.Equal(got, []string{"deadline", "read"}) {
			t.Fatalf("after a request, calls %q, want the idle deadline, then the wait's read", got)
		}
	})
	t.Run("pipelined", func(t *testing.T) {
		t.Parallel()
		rc, client := serve(t, false)
		fmt.Fprintf(client, get+get, "a", "b")
		var calls []string
		if !waitFor(t, 10*time.Second, func() bool {
			calls = rc.seen()
			return count(calls, "state idle") >= 2
		}) {
			t.Fatalf("calls %q: the two requests were not served", calls)
		}
		i := slices.Index(calls, "state idle")
		second := calls[i+1 : i+1+slices.Index(calls[i+1:], "state idle")]
		// The idle deadline, then the header deadline: the next request
		// was in net/http's buffer, and its wait did not read.
		if len(second) < 2 || second[0] != "deadline" || second[1] != "deadline" {
			t.Fatalf("after a request with the next one buffered, calls %q, want two deadlines before anything else", second)
		}
		// The buffered request is served, and a background read waits on
		// the connection as its handler runs.
		if !slices.Contains(second, "handler /b") || !slices.Contains(second[2:], "read") {
			t.Fatalf("the buffered request's calls %q: want its handler and a read", second)
		}
	})
	t.Run("eof", func(t *testing.T) {
		t.Parallel()
		rc, client := serve(t, true)
		fmt.Fprintf(client, get, "a")
		if got := after(t, rc, "state idle", 1, 4); !slices.Equal(got, []string{"deadline", "read", "close", "state closed"}) {
			t.Fatalf("after the wait's read ended with io.EOF, calls %q, want one close, no write", got)
		}
	})
}

// count is how many of calls are call.
func count(calls []string, call string) int {
	n := 0
	for _, c := range calls {
		if c == call {
			n++
		}
	}
	return n
}

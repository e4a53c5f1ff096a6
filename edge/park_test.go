package edge

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math/rand/v2"
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
	hooks := testHooks{parkNoPoll: o.noPoll}
	hooks.parkTrace = func(ev parkEvent) {
		if o.trace != nil {
			o.trace(ev)
		}
		select {
		case events <- ev:
		default:
		}
	}
	return startEdgeHooks(t, cfg, hooks, io.Discard), events
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

// requestID is the request ID in the edge's own error pages, one per request.
var requestID = regexp.MustCompile("request id: [^\n]*")

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
		body = requestID.ReplaceAll(body, nil) // the edge's own answer (a 400) names its request
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

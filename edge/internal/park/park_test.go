package park_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maatproxy/maat/edge/internal/park"
	"github.com/maatproxy/maat/httpfp"
)

// TestIdleConnectionsPark: an HTTP/1 connection idle past the time to park
// is parked, and the client, sending its next requests on it as if nothing
// happened, gets them answered on the same connection, fingerprinted by its
// tap as before — again and again, and with a body.
func TestIdleConnectionsPark(t *testing.T) {
	t.Parallel()
	bothWaits(t, func(t *testing.T, noPoll bool) {
		s := newServer(t, serverOpts{noPoll: noPoll})
		c, br := s.dial(t)
		for i := range 3 {
			fmt.Fprintf(c, get, fmt.Sprint("n", i))
			if code, body := answer(t, br); code != 200 || body != fmt.Sprintf(`GET /n%d "" fp=true`, i) {
				t.Fatalf("request %d: %d %q", i, code, body)
			}
			s.waitParked(t, 1)
		}
		io.WriteString(c, "POST /form HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nhello")
		if code, body := answer(t, br); code != 200 || body != `POST /form "hello" fp=true` {
			t.Fatalf("POST after parking: %d %q", code, body)
		}
		s.waitParked(t, 1)
		c.Close()
		s.waitParked(t, 0)
	})
}

// TestWrap: Wrap gives net/http a Conn that parks, or with parking off
// (limits.park_after: 0s) the connection itself, untouched; a reload
// (SetOptions) switches it.
func TestWrap(t *testing.T) {
	t.Parallel()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	hc := httpfp.NewConn(a, httpfp.H1, httpfp.Config{})
	pk := park.New(nil, park.Options{})
	for _, tc := range []struct {
		name string
		o    park.Options
		park bool
	}{
		{"zero", park.Options{}, false},
		{"after", park.Options{After: time.Second}, true},
		{"disabled", park.Options{Disabled: true}, false},
		{"disabled with after", park.Options{After: time.Second, Disabled: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) { // one after the other: one Parker
			pk.SetOptions(tc.o)
			switch c := pk.Wrap(hc).(type) {
			case *park.Conn:
				if !tc.park {
					t.Error("a Conn that parks, want the tap itself")
				}
				if c.Conn != hc {
					t.Error("a Conn over another tap")
				}
			case *httpfp.Conn:
				if tc.park {
					t.Error("the tap itself, want a Conn that parks")
				}
				if c != hc {
					t.Error("another tap")
				}
			default:
				t.Errorf("a %T", c)
			}
		})
	}
}

// TestParkDisabled: with parking off, an idle connection is never tried.
func TestParkDisabled(t *testing.T) {
	t.Parallel()
	s := newServer(t, serverOpts{after: -1})
	s.requested(t)
	if ev, ok := s.events.tryWithin(20 * testAfter); ok {
		t.Fatalf("parking off, the server tried to park a connection: %+v", ev)
	}
}

// TestParkKeepsUnreadBytes: a connection that falls idle with part of a
// pipelined request read, however little, is not parked — parking it would
// lose what net/http holds — and the request, finished late, is answered
// whole.
func TestParkKeepsUnreadBytes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, first, rest, want string }{
		{"pipelined, 2 bytes", fmt.Sprintf(get, "a") + "GE", // less than net/http's Peek: it reads
			"T /b HTTP/1.1\r\nHost: localhost\r\n\r\n", `GET /b "" fp=true`},
		{"pipelined request line", fmt.Sprintf(get, "a") + "GET /b HT",
			"TP/1.1\r\nHost: localhost\r\n\r\n", `GET /b "" fp=true`},
		{"pipelined head", fmt.Sprintf(get, "a") + "POST /b HTTP/1.1\r\nHost: localhost\r\n",
			"Content-Length: 2\r\n\r\nok", `POST /b "ok" fp=true`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newServer(t, serverOpts{}) // one each: the events are the one connection's
			c, br := s.dial(t)
			io.WriteString(c, tc.first)
			if code, body := answer(t, br); code != 200 || body != `GET /a "" fp=true` {
				t.Fatalf("first request: %d %q", code, body)
			}
			// The server may try to park the connection, and must not.
			if ev, ok := s.events.tryWithin(20 * testAfter); ok && ev.AtRest {
				t.Fatal("a connection holding part of a request stood at rest")
			}
			io.WriteString(c, tc.rest)
			if code, body := answer(t, br); code != 200 || body != tc.want {
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
	bothWaits(t, func(t *testing.T, noPoll bool) {
		const idle = 400 * time.Millisecond
		s := newServer(t, serverOpts{noPoll: noPoll, idle: idle})
		start := time.Now()
		_, br := s.parked(t)
		if _, err := br.ReadByte(); err != io.EOF {
			t.Fatalf("the parked connection: read %v, want EOF when the idle timeout passes", err)
		}
		if d := time.Since(start); d < idle {
			t.Fatalf("closed after %v, before the idle timeout of %v", d, idle)
		}
		s.waitParked(t, 0)
	})
}

// TestParkedTrickleCut: a client that wakes its parked connection with one
// byte and sends nothing more is cut when the header timeout passes, as
// on a connection never parked: trickling a byte now and then does not
// hold a connection for ever.
func TestParkedTrickleCut(t *testing.T) {
	t.Parallel()
	bothWaits(t, func(t *testing.T, noPoll bool) {
		const readHeader = 300 * time.Millisecond
		s := newServer(t, serverOpts{noPoll: noPoll, readHeader: readHeader})
		c, br := s.parked(t)
		start := time.Now()
		io.WriteString(c, "G")
		s.waitParked(t, 0) // woken, and back with net/http
		// net/http answers a request head cut short by its timeout with a
		// 400, or just closes: either way the connection ends.
		rest, err := io.ReadAll(br)
		if err != nil {
			t.Fatalf("the trickling connection: %v after %v, want it closed", err, time.Since(start))
		}
		if len(rest) > 0 && !strings.HasPrefix(string(rest), "HTTP/1.1 4") {
			t.Fatalf("the trickling connection got %q", rest)
		}
		if d := time.Since(start); d < readHeader {
			t.Fatalf("cut after %v, before the header timeout", d)
		}
	})
}

var dateField = regexp.MustCompile("(?m)^Date: [^\r]*\r\n")

// TestParkedDesync: the requests that could desynchronize a proxy and its
// upstream get the same answer on a parked connection as on a fresh one:
// the connection comes back to net/http's parser whole, with nothing of
// the earlier request left over.
func TestParkedDesync(t *testing.T) {
	t.Parallel()
	s := newServer(t, serverOpts{})
	answerOn := func(raw string, parked bool) string {
		dial := s.dial
		if parked {
			dial = s.parked
		}
		c, br := dial(t)
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
		"POST /d HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\n\r\nabcGET /smuggled HTTP/1.1\r\nHost: localhost\r\n\r\n",
	} {
		fresh, parked := answerOn(raw, false), answerOn(raw, true)
		if fresh != parked {
			t.Errorf("%q:\n fresh connection:  %s\n parked connection: %s", raw, fresh, parked)
		}
		s.waitParked(t, 0)
	}
}

// TestParkingUnderChurn: many clients send requests — whole, or split in
// two writes — with pauses around the time to park, so that connections
// park and wake while bytes arrive at every moment of it; every request is
// answered, in order, on its own connection.
func TestParkingUnderChurn(t *testing.T) {
	t.Parallel()
	bothWaits(t, func(t *testing.T, noPoll bool) {
		s := newServer(t, serverOpts{noPoll: noPoll})
		var wg sync.WaitGroup
		for client := range 24 {
			wg.Go(func() {
				c, br := s.dial(t)
				rnd := rand.New(rand.NewPCG(uint64(client), 7))
				for i := range 6 {
					path := fmt.Sprintf("c%dr%d", client, i)
					req := fmt.Sprintf(get, path)
					if cut := rnd.IntN(len(req)); rnd.IntN(2) == 0 {
						io.WriteString(c, req[:cut])
						time.Sleep(time.Duration(30+rnd.IntN(40)) * time.Millisecond)
						io.WriteString(c, req[cut:])
					} else {
						io.WriteString(c, req)
					}
					res, err := http.ReadResponse(br, nil)
					if err != nil {
						t.Errorf("%s (parked now %d): %v", path, s.pk.Parked(), err)
						return
					}
					body, _ := io.ReadAll(res.Body)
					res.Body.Close()
					if want := fmt.Sprintf(`GET /%s "" fp=true`, path); res.StatusCode != 200 || string(body) != want {
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
	})
}

// TestParkPipelined: requests written all at once (HTTP/1.1 pipelining),
// with and without bodies, are answered with what the handler says, in
// order, however long past the time to park the handler takes over one
// of them: net/http holds the requests after it in its buffer, and a
// connection is never parked while a request is in flight or net/http
// holds bytes of one. The slow answer is released once the server has
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
	arrived, release := make(chan struct{}), make(chan struct{})
	s := newServer(t, serverOpts{handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
			fmt.Fprintf(&raw, "GET %s HTTP/1.1\r\nHost: localhost\r\n\r\n", path)
			want = append(want, fmt.Sprintf("GET %s %q", path, ""))
		case "length":
			fmt.Fprintf(&raw, "POST %s HTTP/1.1\r\nHost: localhost\r\nContent-Length: %d\r\n\r\n%s", path, len(b), b)
			want = append(want, fmt.Sprintf("POST %s %q", path, b))
		case "chunked":
			fmt.Fprintf(&raw, "POST %s HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", path, len(b), b)
			want = append(want, fmt.Sprintf("POST %s %q", path, b))
		}
	}
	c, br := s.dial(t)
	if _, err := io.WriteString(c, raw.String()); err != nil { // one write, one TLS record
		t.Fatal(err)
	}
	select {
	case <-arrived:
	case <-time.After(20 * time.Second):
		t.Fatal("the slow request never reached the handler")
	}
	if ev, ok := s.events.tryWithin(20 * testAfter); ok {
		t.Errorf("the server tried to park the connection (at rest: %v) while a request was in flight", ev.AtRest)
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
	s.waitParked(t, 1) // and once all are answered, the connection parks
}

// TestParkBlankLines: a connection whose client sent an empty line after
// a request — net/http keeps it, and takes it for the start of the next
// request, which gets a 400 — is not parked: the next request gets the
// answer it gets with parking off.
func TestParkBlankLines(t *testing.T) {
	t.Parallel()
	answerAfter := func(after time.Duration) int {
		s := newServer(t, serverOpts{after: after})
		c, br := s.dial(t)
		io.WriteString(c, fmt.Sprintf(get, "a")+"\r\n")
		if code, _ := answer(t, br); code != 200 {
			t.Fatalf("request: %d", code)
		}
		if after > 0 && s.events.nextIdle(t).AtRest {
			t.Error("a connection with an empty line read stood at rest")
		}
		fmt.Fprintf(c, get, "b")
		code, _ := answer(t, br)
		return code
	}
	if on, off := answerAfter(testAfter), answerAfter(-1); on != off {
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
		s := newServer(t, serverOpts{noPoll: noPoll, trace: func(ev park.Event) {
			if ev.Kind == park.Checked && !ev.First {
				select {
				case checked <- struct{}{}:
					<-proceed
				case <-done:
				}
			}
		}})
		t.Cleanup(func() { close(done) }) // before the server's shutdown
		c, br := s.requested(t)
		for i := range 5 {
			wait(t, checked, "the server deciding to park the connection") // now
			fmt.Fprintf(c, get, fmt.Sprint("at", i))
			proceed <- struct{}{}
			if code, body := answer(t, br); code != 200 || body != fmt.Sprintf(`GET /at%d "" fp=true`, i) {
				t.Fatalf("request %d: %d %q", i, code, body)
			}
		}
	})
}

// TestShutdownAsParking: the http.Server's Shutdown closing an idle
// connection (net/http's closeIdleConns) while the Parker parks it ends
// the connection once, and the shutdown returns.
func TestShutdownAsParking(t *testing.T) {
	t.Parallel()
	checked, proceed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	s := newServer(t, serverOpts{trace: func(ev park.Event) {
		if ev.Kind == park.Checked && !ev.First {
			once.Do(func() {
				checked <- struct{}{}
				<-proceed
			})
		}
	}})
	_, br := s.requested(t)
	wait(t, checked, "the server deciding to park the connection")
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		shut <- s.shutdown(ctx)
	}()
	if _, err := br.ReadByte(); err != io.EOF { // closed by net/http's Shutdown
		t.Fatalf("the connection as the shutdown began: %v, want EOF", err)
	}
	close(proceed)
	select {
	case err := <-shut:
		if err != nil {
			t.Fatalf("shutdown: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the shutdown never returned")
	}
	if n := s.pk.Parked(); n != 0 {
		t.Fatalf("parked after the shutdown: %d", n)
	}
}

// TestShutdownClosesParked: Shutdown closes parked connections at once,
// as net/http closes idle ones: the server's shutdown does not wait for
// them until it times out.
func TestShutdownClosesParked(t *testing.T) {
	t.Parallel()
	bothWaits(t, func(t *testing.T, noPoll bool) {
		s := newServer(t, serverOpts{noPoll: noPoll})
		_, br := s.parked(t)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.shutdown(ctx); err != nil {
			t.Fatalf("shutdown: %v", err)
		}
		if _, err := br.ReadByte(); err != io.EOF {
			t.Fatalf("the parked connection after the shutdown: read %v, want EOF", err)
		}
	})
}

// wait waits for a value on ch, for 20 seconds at most.
func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatalf("no sign of %s in 20s", what)
	}
}

// TestParkTinyAfter: with Options.After shorter than a read takes to
// begin (a nanosecond), a parked connection still wakes and is answered:
// the wake waits minWake for the first byte's record, not After.
func TestParkTinyAfter(t *testing.T) {
	t.Parallel()
	bothWaits(t, func(t *testing.T, noPoll bool) {
		s := newServer(t, serverOpts{after: time.Nanosecond, noPoll: noPoll})
		c, br := s.parked(t)
		for i := range 3 {
			fmt.Fprintf(c, get, fmt.Sprint("n", i))
			if code, body := answer(t, br); code != 200 || body != fmt.Sprintf(`GET /n%d "" fp=true`, i) {
				t.Fatalf("request %d after parking: %d %q", i, code, body)
			}
			s.waitParked(t, 1)
		}
	})
}

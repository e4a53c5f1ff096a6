package edge

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"golang.org/x/net/websocket"
)

// confExchanges is the table of the conformance suite.
func confExchanges() []*confExchange {
	get := func(path string, header ...string) confReq { return confReq{method: "GET", path: path, header: header} }
	post := func(body string, chunked bool) confReq {
		return confReq{method: "POST", path: "/echo", body: body, chunked: chunked, header: []string{"X-Test: " + fmt.Sprint(len(body))}}
	}
	noTrailers := "nginx does not forward an upstream's trailers"
	// RFC 9112 §2.2: a server SHOULD ignore at least one empty line before
	// a request line; net/http, in front of the upstream as in the edge,
	// answers 400 to one after a GET.
	emptyLine := "nginx ignores an empty line before a request line, as RFC 9112 §2.2 says it should; net/http (the upstream's server, and the edge's) answers 400"
	return []*confExchange{
		{name: "fixed body", reqs: []confReq{get("/fixed/100")}},
		{name: "large fixed body", reqs: []confReq{get("/fixed/300000")}},
		{name: "chunked body", reqs: []confReq{get("/chunked")}},
		{name: "HEAD fixed", reqs: []confReq{{method: "HEAD", path: "/fixed/100"}}},
		{name: "HEAD chunked", reqs: []confReq{{method: "HEAD", path: "/chunked"}}},
		{name: "204", reqs: []confReq{get("/status/204")}},
		{name: "304", reqs: []confReq{get("/status/304", `If-None-Match: "v1"`)}},
		{name: "POST fixed body", reqs: []confReq{post("hello, upstream", false)}},
		{name: "POST chunked body", reqs: []confReq{post(confBody(100), true)}},
		{name: "POST large body", reqs: []confReq{post(confBody(200000), false)}},
		{name: "100-continue", protos: "h1", reqs: []confReq{{method: "POST", path: "/echo", body: "after continue", expect: true}}},
		{name: "103 early hints", reqs: []confReq{get("/early")}, nginx: "nginx 1.22 knows no 1xx but 101: on HTTP/2 its client gets a protocol error (DATA before HEADERS)"},
		{name: "trailers", reqs: []confReq{get("/trailers")}, nginx: noTrailers},
		{name: "request trailers", reqs: []confReq{{method: "POST", path: "/echo", body: "summed", chunked: true, sum: "42"}},
			nginx: "nginx does not forward a client's trailers"},
		{name: "sequence across parking", reqs: []confReq{get("/a"), get("/slow/300ms/b"), post("c", false), get("/chunked"), {method: "HEAD", path: "/fixed/7"}, get("/d")}},
		{name: "pipeline 2", pipeline: true, reqs: []confReq{get("/a"), get("/b")}},
		{name: "pipeline 3, slow middle", pipeline: true, reqs: []confReq{get("/c"), get("/slow/400ms/d"), get("/e")}},
		{name: "pipeline 3, slow first", pipeline: true, reqs: []confReq{get("/slow/300ms/c"), get("/d"), get("/e")}},
		{name: "pipeline 10 mixed", pipeline: true, reqs: []confReq{get("/p0"), get("/slow/100ms/p1"), get("/fixed/1000"), {method: "HEAD", path: "/fixed/10"},
			get("/chunked"), get("/slow/300ms/p5"), get("/status/204"), get("/p7"), get("/dribble"), get("/p9")}},
		{name: "pipeline with bodies", pipeline: true, reqs: []confReq{post("first body", false), post(confBody(70), true), get("/slow/300ms/x"), post("last", false)}},
		{name: "empty line before a request", protos: "h1", reqs: []confReq{get("/a"), {method: "GET", path: "/b", lead: "\r\n"}}, nginx: emptyLine},
		{name: "pipeline, empty line between", protos: "h1", pipeline: true, reqs: []confReq{get("/a"), {method: "GET", path: "/b", lead: "\r\n"}}, nginx: emptyLine},
		{name: "client Connection: close", protos: "h1", closed: true, reqs: []confReq{get("/fixed/10", "Connection: close")}},
		{name: "upstream Connection: close", reqs: []confReq{get("/close")}},
		{name: "half-close", protos: "h1", halfClose: true, closed: true, reqs: []confReq{get("/slow/100ms/h")},
			aborts: "net/http ends a request's context when it reads the end of the client's stream, as it does when the client closed; " +
				"the edge cannot tell a half-close from a close (a FIN after TLS close_notify either way), so it stops the upstream's request and closes the connection without an answer " +
				"rather than work on for a client that may be gone (direct and nginx answer)"},
		{name: "slow upstream headers", reqs: []confReq{get("/slow/500ms/late")}},
		{name: "slow upstream body", reqs: []confReq{get("/dribble")}},
		{name: "upstream reset, fixed", reqs: []confReq{{method: "GET", path: "/reset/fixed", cut: true}}},
		{name: "upstream reset, chunked", reqs: []confReq{{method: "GET", path: "/reset/chunked", cut: true}}},
		{name: "upstream reset after a POST", reqs: []confReq{{method: "POST", path: "/reset/chunked", body: "posted", cut: true}}},
		{name: "request trailers, large body", reqs: []confReq{{method: "POST", path: "/echo", body: confBody(40000), chunked: true, sum: "42"}},
			nginx: "nginx does not forward a client's trailers"},
		{name: "SSE", h1: h1SSE, hx: hxSSE},
		{name: "websocket", protos: "h1", h1: h1Websocket},
		{name: "client reset mid-body", h1: h1ClientReset, hx: hxClientReset},
		{name: "CL+TE", protos: "h1", h1: h1Status("POST /echo HTTP/1.1\r\nHost: localhost\r\nUser-Agent: Go-http-client/1.1\r\n"+
			"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", true),
			want: "HTTP/1.1 400\nthen the connection closed\n"},
		{name: "upstream header timeout", h1: h1Timeout, hx: hxTimeout,
			want: "{proto} 504\nthe upstream saw the request 1 time(s)\n"},
		{name: "TRACE", h1: h1Status("TRACE /x HTTP/1.1\r\nHost: localhost\r\nUser-Agent: Go-http-client/1.1\r\n\r\n", false),
			hx: hxStatus(confReq{method: "TRACE", path: "/x"}), want: "{proto} 405\n"},
	}
}

// h1Status sends raw (its {id} filled in) and writes the answer's
// protocol and status code (the contract; not the reason phrase), and then whether the connection closed when closed.
func h1Status(raw string, closed bool) func(*confRun, *tls.Conn, *strings.Builder) {
	return func(x *confRun, c *tls.Conn, out *strings.Builder) {
		io.WriteString(c, x.path(raw))
		br := bufio.NewReader(c)
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			fmt.Fprintf(out, "no answer: %s\n", confErr(err))
			return
		}
		_, _ = io.Copy(io.Discard, res.Body)
		fmt.Fprintf(out, "%s %d\n", res.Proto, res.StatusCode)
		if closed {
			out.WriteString(h1After(c, br) + "\n")
		}
	}
}

// h1Timeout, hxTimeout ask for an answer whose head comes after the
// upstream header timeout (confHeaderTimeout): a 504, and the request,
// which the upstream may have acted on, is not sent again.
func h1Timeout(x *confRun, c *tls.Conn, out *strings.Builder) {
	h1Status("GET /count/{id}/"+(2*confHeaderTimeout).String()+" HTTP/1.1\r\nHost: localhost\r\nUser-Agent: Go-http-client/1.1\r\n\r\n", false)(x, c, out)
	fmt.Fprintf(out, "the upstream saw the request %d time(s)\n", x.up.hitCount(x.id))
}

func hxTimeout(x *confRun, c *http.Client, out *strings.Builder) {
	hxStatus(confReq{method: "GET", path: "/count/{id}/" + (2 * confHeaderTimeout).String()})(x, c, out)
	fmt.Fprintf(out, "the upstream saw the request %d time(s)\n", x.up.hitCount(x.id))
}

// hxStatus makes the request r and writes the answer's protocol and
// status code.
func hxStatus(r confReq) func(*confRun, *http.Client, *strings.Builder) {
	return func(x *confRun, c *http.Client, out *strings.Builder) {
		res, err := c.Do(x.newRequest(context.Background(), r))
		if err != nil {
			fmt.Fprintf(out, "no answer: %s\n", confErr(err))
			return
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		fmt.Fprintf(out, "%s %d\n", res.Proto, res.StatusCode)
	}
}

// h1SSE reads the events of /sse/{id} one by one: the upstream sends each
// only once the client said it read the one before; with parking on, the
// stream is quiet past the time to park before each.
func h1SSE(x *confRun, c *tls.Conn, out *strings.Builder) {
	io.WriteString(c, confReq{method: "GET", path: "/sse/{id}", header: []string{"Accept: text/event-stream"}}.head(x))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		fmt.Fprintf(out, "no answer: %s\n", confErr(err))
		return
	}
	confEvents(x, res, out)
}

func hxSSE(x *confRun, c *http.Client, out *strings.Builder) {
	res, err := c.Do(x.newRequest(context.Background(), confReq{method: "GET", path: "/sse/{id}", header: []string{"Accept: text/event-stream"}}))
	if err != nil {
		fmt.Fprintf(out, "no answer: %s\n", confErr(err))
		return
	}
	confEvents(x, res, out)
}

func confEvents(x *confRun, res *http.Response, out *strings.Builder) {
	defer res.Body.Close()
	confHead(out, res.Proto+" "+res.Status, res.Header)
	br := bufio.NewReader(res.Body)
	for i := range 3 {
		var event strings.Builder
		for {
			line, err := br.ReadString('\n')
			event.WriteString(line)
			if err != nil {
				fmt.Fprintf(out, "event %d: %q, then %s\n", i, event.String(), confErr(err))
				return
			}
			if line == "\n" {
				break
			}
		}
		fmt.Fprintf(out, "event %q\n", event.String())
		if x.tg.park {
			time.Sleep(5 * confParkAfter) // a quiet stream, past the time to park: not a synchronization
		}
		x.up.ack(x.id)
	}
	rest, err := io.ReadAll(br)
	confBodyEnd(out, rest, err, res.Trailer)
	out.WriteString("upstream: " + x.up.sseVerdict(x.id) + "\n")
}

// h1Websocket opens a websocket (which the edge must not park) and has
// messages echoed, with a pause past the time to park between them.
func h1Websocket(x *confRun, c *tls.Conn, out *strings.Builder) {
	wcfg, _ := websocket.NewConfig("wss://localhost/ws", "https://localhost/")
	wcfg.Header = http.Header{"User-Agent": {"Go-http-client/1.1"}}
	ws, err := websocket.NewClient(wcfg, c)
	if err != nil {
		fmt.Fprintf(out, "websocket handshake: %v\n", err)
		return
	}
	out.WriteString("websocket open\n")
	for i := range 3 {
		if i > 0 && x.tg.park {
			time.Sleep(5 * confParkAfter) // the pause the exchange runs across, not a synchronization
		}
		msg := fmt.Sprintf("message %d", i)
		if err := websocket.Message.Send(ws, msg); err != nil {
			fmt.Fprintf(out, "send: %s\n", confErr(err))
			return
		}
		var got string
		if err := websocket.Message.Receive(ws, &got); err != nil {
			fmt.Fprintf(out, "receive: %s\n", confErr(err))
			return
		}
		fmt.Fprintf(out, "echo %q\n", got)
	}
}

// h1ClientReset reads the start of /hold/{id}'s answer, then resets the
// connection: the upstream must see the client go.
func h1ClientReset(x *confRun, c *tls.Conn, out *strings.Builder) {
	io.WriteString(c, confReq{method: "GET", path: "/hold/{id}"}.head(x))
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		fmt.Fprintf(out, "no answer: %s\n", confErr(err))
		return
	}
	confHead(out, res.Proto+" "+res.Status, res.Header)
	line, err := bufio.NewReader(res.Body).ReadString('\n')
	fmt.Fprintf(out, "first line %q %v\n", line, err)
	if tc, ok := c.NetConn().(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // close with a reset
	}
	c.Close()
	out.WriteString(confAborted(x) + "\n")
}

func hxClientReset(x *confRun, c *http.Client, out *strings.Builder) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, err := c.Do(x.newRequest(ctx, confReq{method: "GET", path: "/hold/{id}"}))
	if err != nil {
		fmt.Fprintf(out, "no answer: %s\n", confErr(err))
		return
	}
	confHead(out, res.Proto+" "+res.Status, res.Header)
	line, err := bufio.NewReader(res.Body).ReadString('\n')
	fmt.Fprintf(out, "first line %q %v\n", line, err)
	cancel() // resets the stream
	res.Body.Close()
	out.WriteString(confAborted(x) + "\n")
}

// confAborted waits for the upstream to see the client of /hold/{id} go.
func confAborted(x *confRun) string {
	select {
	case <-x.up.abortedChan(x.id):
		return "the upstream saw the client go"
	case <-time.After(confWait):
		return "the upstream never saw the client go"
	}
}

package edge

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/maatproxy/maat/edge/config"
)

// confReq is a request of an exchange.
type confReq struct {
	method, path string
	header       []string // "Name: value"
	body         string
	chunked      bool   // the body in chunks, its length unsaid (HTTP/2, HTTP/3: a body of unknown length)
	expect       bool   // HTTP/1.1: Expect: 100-continue, the body sent once 100 Continue came
	sum          string // the value of an X-Sum trailer after a chunked body
	lead         string // HTTP/1.1: bytes before the request line (empty lines, RFC 9112 §2.2)
	// cut: the upstream dies mid-answer; the client must not get a
	// clean answer, and whether the head came before the end does not
	// matter (HTTP/2 and HTTP/3 may drop what a reset stream carried).
	cut bool
}

// confAnswer writes an answer with write, which reports whether it ended
// cleanly; for a request whose answer is cut, only that it was.
func confAnswer(r confReq, out *strings.Builder, write func(*strings.Builder) bool) bool {
	if !r.cut {
		return write(out)
	}
	var tmp strings.Builder
	if write(&tmp) {
		out.WriteString(tmp.String())
		return true
	}
	out.WriteString("answer cut short\n")
	return false
}

// head is r's request line and header section as sent on HTTP/1.1.
func (r confReq) head(x *confRun) string {
	var b strings.Builder
	b.WriteString(r.lead)
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: localhost\r\nUser-Agent: Go-http-client/1.1\r\n", r.method, x.path(r.path))
	for _, h := range r.header {
		b.WriteString(h + "\r\n")
	}
	switch {
	case r.chunked:
		b.WriteString("Transfer-Encoding: chunked\r\n")
		if r.sum != "" {
			b.WriteString("Trailer: X-Sum\r\n")
		}
	case r.body != "":
		b.WriteString("Content-Length: " + strconv.Itoa(len(r.body)) + "\r\n")
	}
	if r.expect {
		b.WriteString("Expect: 100-continue\r\n")
	}
	return b.String() + "\r\n"
}

// wireBody is r's body as sent on HTTP/1.1: in chunks of up to 7 bytes
// when chunked.
func (r confReq) wireBody() string {
	if !r.chunked {
		return r.body
	}
	var b strings.Builder
	for s := r.body; s != ""; {
		n := min(len(s), 7)
		fmt.Fprintf(&b, "%x\r\n%s\r\n", n, s[:n])
		s = s[n:]
	}
	b.WriteString("0\r\n")
	if r.sum != "" {
		b.WriteString("X-Sum: " + r.sum + "\r\n")
	}
	return b.String() + "\r\n"
}

// h1Dial opens an HTTP/1.1 connection to the target.
func (x *confRun) h1Dial() (*tls.Conn, error) {
	c, err := tls.Dial("tcp", x.tg.addr, x.tg.tlsConfig("http/1.1"))
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(3 * confWait))
	return c, nil
}

// h1 runs ex on HTTP/1.1: a first request, the pause in which the
// connection parks, then the exchange.
func (x *confRun) h1(ex *confExchange) string {
	c, err := x.h1Dial()
	if err != nil {
		return "dial: " + err.Error()
	}
	defer c.Close()
	var out strings.Builder
	br := bufio.NewReader(c)
	warm := confReq{method: "GET", path: "/fixed/5"}
	io.WriteString(c, warm.head(x))
	if !x.h1Answer(br, "GET", &out, nil) {
		return out.String()
	}
	x.h1Gap(c, &out)
	if ex.want != "" {
		out.Reset() // a contract says nothing of the first answer
	}
	if ex.h1 != nil {
		ex.h1(x, c, &out)
		return out.String()
	}
	x.h1Exchange(c, br, ex, &out)
	return out.String()
}

// h1Gap waits, with parking on, until the edge has parked c: the pause
// between two requests that the exchange then runs across. With parking
// off, the first pause lasts past the default time to park, and c must
// not have parked.
func (x *confRun) h1Gap(c *tls.Conn, out *strings.Builder) {
	if !x.tg.park {
		if x.tg.edge != nil && !x.pausedOff {
			x.pausedOff = true
			time.Sleep(2 * config.DefaultParkAfter) // the pause the exchange runs across, not a synchronization
			if x.tg.parked(c.LocalAddr()) {
				x.parks++
			}
		}
		return
	}
	if confPoll(func() bool { return x.tg.parked(c.LocalAddr()) }) {
		x.parks++
	} else {
		out.WriteString("(the connection never parked)\n")
	}
}

// h1Exchange sends ex.reqs on c and reads their answers.
func (x *confRun) h1Exchange(c *tls.Conn, br *bufio.Reader, ex *confExchange, out *strings.Builder) {
	if ex.pipeline {
		var all strings.Builder
		for _, r := range ex.reqs {
			all.WriteString(r.head(x) + r.wireBody())
		}
		io.WriteString(c, all.String()) // one write
		for _, r := range ex.reqs {
			if !confAnswer(r, out, func(out *strings.Builder) bool { return x.h1Answer(br, r.method, out, nil) }) {
				return
			}
		}
	} else {
		for i, r := range ex.reqs {
			if i > 0 {
				x.h1Gap(c, out)
			}
			io.WriteString(c, r.head(x))
			var on100 func()
			if r.expect {
				on100 = func() { io.WriteString(c, r.wireBody()) }
			} else {
				io.WriteString(c, r.wireBody())
			}
			if i == len(ex.reqs)-1 && ex.halfClose {
				if err := c.CloseWrite(); err != nil {
					fmt.Fprintf(out, "close write: %v\n", err)
				}
			}
			if !confAnswer(r, out, func(out *strings.Builder) bool { return x.h1Answer(br, r.method, out, on100) }) {
				return
			}
		}
	}
	if ex.closed {
		out.WriteString(h1After(c, br) + "\n")
	}
}

// h1After reads on after the last answer: whether the server closed.
func h1After(c *tls.Conn, br *bufio.Reader) string {
	_ = c.SetReadDeadline(time.Now().Add(confWait))
	n, err := io.Copy(io.Discard, br)
	switch {
	case n > 0:
		return fmt.Sprintf("then %d bytes more", n)
	case err == nil:
		return "then the connection closed"
	}
	return "then the connection " + confErr(err)
}

// h1Answer reads the answer to a request of method, 1xx ones included
// (on100, if set, is called at a 100 Continue), and reports whether it
// ended cleanly.
func (x *confRun) h1Answer(br *bufio.Reader, method string, out *strings.Builder, on100 func()) bool {
	for {
		res, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			fmt.Fprintf(out, "no answer: %s\n", confErr(err))
			return false
		}
		confHead(out, res.Proto+" "+res.Status, res.Header)
		switch {
		case res.StatusCode == http.StatusSwitchingProtocols:
			return true
		case res.StatusCode == http.StatusContinue && on100 != nil:
			on100()
			on100 = nil
			continue
		case res.StatusCode < 200:
			continue
		}
		body, err := io.ReadAll(res.Body)
		confBodyEnd(out, body, err, res.Trailer)
		return err == nil
	}
}

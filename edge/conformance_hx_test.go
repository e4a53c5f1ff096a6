package edge

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"sync"
	"time"

	"github.com/quic-go/quic-go/http3"
)

// hxClient is an HTTP/2 or HTTP/3 client of the target whose requests
// share one connection; conn, on HTTP/2, is that connection once dialed.
func (x *confRun) hxClient() (c *http.Client, conn func() net.Conn, closeIdle func()) {
	var rt http.RoundTripper
	var mu sync.Mutex
	var tc net.Conn
	switch x.proto {
	case "h2": // net/http's own HTTP/2 (x/net's http2.Transport is deprecated)
		tr := &http.Transport{TLSClientConfig: x.tg.tlsConfig("h2"), DisableCompression: true, Protocols: new(http.Protocols),
			DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := (&tls.Dialer{Config: x.tg.tlsConfig("h2")}).DialContext(ctx, network, addr)
				if err == nil {
					mu.Lock()
					tc = c
					mu.Unlock()
				}
				return c, err
			}}
		tr.Protocols.SetHTTP2(true)
		rt, closeIdle = tr, tr.CloseIdleConnections
	case "h3":
		tr := &http3.Transport{TLSClientConfig: x.tg.tlsConfig("h3"), DisableCompression: true}
		rt, closeIdle = tr, func() { _ = tr.Close() }
	}
	c = &http.Client{Transport: rt, Timeout: 3 * confWait,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return c, func() net.Conn { mu.Lock(); defer mu.Unlock(); return tc }, closeIdle
}

// url is path's on the target, for HTTP/2 or HTTP/3.
func (x *confRun) url(path string) string {
	addr := x.tg.addr
	if x.proto == "h3" {
		addr = x.tg.h3addr
	}
	return "https://" + addr + x.path(path)
}

// newRequest builds r for the target's site.
func (x *confRun) newRequest(ctx context.Context, r confReq) *http.Request {
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
		if r.chunked {
			body = struct{ io.Reader }{body} // no length known: sent in DATA frames as it comes
		}
	}
	req, err := http.NewRequestWithContext(ctx, r.method, x.url(r.path), body)
	if err != nil {
		panic(err) // the table's requests are well formed
	}
	req.Host = "localhost"
	if r.sum != "" {
		req.Trailer = http.Header{"X-Sum": {r.sum}} // sent after the body
	}
	req.Header.Set("User-Agent", "Go-http-client/1.1")
	for _, h := range r.header {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Add(k, v)
	}
	return req
}

// hx runs ex on HTTP/2 or HTTP/3: a first request, a pause past the time
// to park, then the exchange.
func (x *confRun) hx(ex *confExchange) string {
	c, conn, closeIdle := x.hxClient()
	defer closeIdle()
	var out strings.Builder
	if !x.hxDo(c, confReq{method: "GET", path: "/fixed/5"}, &out) {
		return out.String()
	}
	x.hxGap(conn)
	if ex.want != "" {
		out.Reset() // a contract says nothing of the first answer
	}
	if ex.hx != nil {
		ex.hx(x, c, &out)
		return out.String()
	}
	if ex.pipeline {
		outs := make([]strings.Builder, len(ex.reqs))
		var wg sync.WaitGroup
		for i, r := range ex.reqs {
			wg.Go(func() { confAnswer(r, &outs[i], func(out *strings.Builder) bool { return x.hxDo(c, r, out) }) })
		}
		wg.Wait()
		for i := range outs {
			out.WriteString(outs[i].String())
		}
		return out.String()
	}
	for i, r := range ex.reqs {
		if i > 0 {
			x.hxGap(conn)
		}
		if !confAnswer(r, &out, func(out *strings.Builder) bool { return x.hxDo(c, r, out) }) {
			break
		}
	}
	return out.String()
}

// hxGap is the pause between two requests with parking on: longer than
// the time to park (HTTP/2 and HTTP/3 connections do not say when they
// park, if they do; an HTTP/2 one seen parked then is counted).
func (x *confRun) hxGap(conn func() net.Conn) {
	if !x.tg.park {
		return
	}
	time.Sleep(5 * confParkAfter) // the pause the exchange runs across, not a synchronization
	if c := conn(); c != nil && x.tg.parked(c.LocalAddr()) {
		x.parks++
	}
}

// hxDo makes the request r and writes its answer, 1xx ones first;
// it reports whether the answer ended cleanly.
func (x *confRun) hxDo(c *http.Client, r confReq, out *strings.Builder) bool {
	var mu sync.Mutex
	var early strings.Builder
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		mu.Lock()
		defer mu.Unlock()
		confHead(&early, fmt.Sprintf("%d %s", code, http.StatusText(code)), http.Header(h))
		return nil
	}}
	req := x.newRequest(httptrace.WithClientTrace(context.Background(), trace), r)
	res, err := c.Do(req)
	mu.Lock()
	out.WriteString(early.String())
	mu.Unlock()
	if err != nil {
		fmt.Fprintf(out, "no answer: %s\n", confErr(err))
		return false
	}
	defer res.Body.Close()
	confHead(out, res.Proto+" "+res.Status, res.Header)
	body, err := io.ReadAll(res.Body)
	confBodyEnd(out, body, err, res.Trailer)
	return err == nil
}

package testattack

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// idle opens p.IdleConns HTTP/2 connections from p.IdleSources client
// addresses, makes one request on each and leaves it idle; once all are
// open it waits p.IdleHold, calls t.OnHeld, and hangs up.
func idle(ctx context.Context, t Target, p Params, out *Outcome) error {
	start := time.Now()
	conns := make([]*h2Conn, p.IdleConns) // nil where the dial failed
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	fanOut(ctx, p.IdleConns, idleDials, func(i int) {
		c, err := t.dialH2(ctx, source(blockIdle, i%max(p.IdleSources, 1)), false)
		if err != nil {
			out.Answers.Add("dial: "+errKind(err), 1)
			return
		}
		conns[i] = c
		if c.request(1, t.Host, "GET", fmt.Sprintf("/idle/%d", i), nil, true, true) == nil {
			c.waitEnded(ctx, 10*time.Second)
		}
	})
	opened := time.Since(start)
	hold(ctx, p.IdleHold)
	alive := 0
	for _, c := range conns {
		if c != nil && c.alive() {
			alive++
		}
	}
	out.Held = alive
	out.Note("%d of %d connections open and idle (opened in %v)", alive, p.IdleConns, opened.Round(100*time.Millisecond))
	if t.OnHeld != nil {
		t.OnHeld(alive)
	}
	for _, c := range conns {
		if c != nil {
			c.tally(&out.Answers, "")
			if !c.alive() {
				out.Answers.Add("conn closed by the edge", 1)
			}
		}
	}
	return nil
}

// idleH1 opens p.IdleConns HTTP/1.1 connections from p.IdleSources client
// addresses, makes one request on each and leaves it idle, as browsers
// leave their keep-alive connections; once all are open it waits
// p.IdleHold, calls t.OnHeld, and hangs up.
func idleH1(ctx context.Context, t Target, p Params, out *Outcome) error {
	start := time.Now()
	conns := make([]*tls.Conn, p.IdleConns) // nil where the dial or the request failed
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	fanOut(ctx, p.IdleConns, idleDials, func(i int) {
		c, err := t.dialTLS(ctx, source(blockIdleH1, i%max(p.IdleSources, 1)), "http/1.1")
		if err != nil {
			out.Answers.Add("dial: "+errKind(err), 1)
			return
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "GET /idle/%d HTTP/1.1\r\nHost: %s\r\nUser-Agent: Go-http-client/1.1\r\n\r\n", i, t.Host)
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil {
			_, err = io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
		if err != nil {
			out.Answers.Add("request: "+errKind(err), 1)
			c.Close()
			return
		}
		out.Answers.Add(strconv.Itoa(res.StatusCode), 1)
		_ = c.SetDeadline(time.Time{})
		conns[i] = c
	})
	opened := time.Since(start)
	hold(ctx, p.IdleHold)
	// A connection the edge closed has its end waiting to be read; an
	// open one has nothing, and a read gives up after a millisecond.
	var alive atomic.Int64
	fanOut(ctx, len(conns), idleDials, func(i int) {
		c := conns[i]
		if c == nil {
			return
		}
		_ = c.SetReadDeadline(time.Now().Add(time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); errors.Is(err, os.ErrDeadlineExceeded) {
			alive.Add(1)
		} else {
			out.Answers.Add("conn closed by the edge", 1)
		}
	})
	out.Held = int(alive.Load())
	out.Note("%d of %d connections open and idle (opened in %v)", alive.Load(), p.IdleConns, opened.Round(100*time.Millisecond))
	if t.OnHeld != nil {
		t.OnHeld(out.Held)
	}
	return nil
}

// idleDials is how many idle connections are opened (or looked at) at once.
const idleDials = 32

// fanOut calls f(0) … f(n-1) on goroutines, at most limit at once, until
// ctx ends, and waits for those it started.
func fanOut(ctx context.Context, n, limit int, f func(i int)) {
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		wg.Go(func() {
			defer func() { <-sem }()
			f(i)
		})
	}
}

// hold waits d, or until ctx ends.
func hold(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

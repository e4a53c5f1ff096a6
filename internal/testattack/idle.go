package testattack

import (
	"context"
	"fmt"
	"sync"
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
	sem := make(chan struct{}, 32) // dials at once
	var wg sync.WaitGroup
	for i := range p.IdleConns {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
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
	}
	wg.Wait()
	opened := time.Since(start)
	hold := time.NewTimer(p.IdleHold)
	defer hold.Stop()
	select {
	case <-hold.C:
	case <-ctx.Done():
	}
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

package testattack

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// rapidReset opens p.ResetStreams streams on one connection, each reset
// (CANCEL) right after its HEADERS, as fast as the connection takes them;
// then it waits until the edge falls quiet (or closes) and hangs up.
func rapidReset(ctx context.Context, t Target, p Params, out *Outcome) error {
	c, err := t.dialH2(ctx, source(blockReset, 0), false)
	if err != nil {
		return err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.conn.Close() })
	defer stop()
	start := time.Now()
	sent := 0
	for i := range p.ResetStreams {
		id := uint32(2*i + 1)
		if err := c.request(id, t.Host, "GET", fmt.Sprintf("/reset/%d", i), nil, true, false); err != nil {
			break
		}
		if err := c.cancel(id); err != nil {
			break
		}
		sent++
		if i%64 == 63 {
			if err := c.flush(); err != nil {
				break
			}
		}
	}
	_ = c.flush()
	out.Note("%d of %d streams opened and reset in %v", sent, p.ResetStreams, time.Since(start).Round(time.Millisecond))
	out.Held = sent
	waitUntil(ctx, 10*time.Second, func() bool { return c.quiet(500 * time.Millisecond) })
	c.tally(&out.Answers, "")
	return nil
}

// heldHeaders opens p.HeldConns connections from one client, each with
// p.HeldStreams POST requests whose HEADERS do not end the stream and
// whose body never comes, and waits until the edge has answered or reset
// every stream (or closed the connections), or p.Hold has passed.
func heldHeaders(ctx context.Context, t Target, p Params, out *Outcome) error {
	conns := make([]*h2Conn, 0, p.HeldConns)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range p.HeldConns {
		c, err := t.dialH2(ctx, source(blockHeld, 0), false)
		if err != nil {
			return err
		}
		conns = append(conns, c)
	}
	stop := context.AfterFunc(ctx, func() {
		for _, c := range conns {
			c.conn.Close()
		}
	})
	defer stop()
	start := time.Now()
	var wg sync.WaitGroup
	for n, c := range conns {
		wg.Go(func() {
			for i := range p.HeldStreams {
				if c.request(uint32(2*i+1), t.Host, "POST", fmt.Sprintf("/held/%d/%d", n, i), nil, false, true) != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	out.Held = p.HeldConns * p.HeldStreams
	ended := waitUntil(ctx, p.Hold, func() bool {
		for _, c := range conns {
			if !c.settled() {
				return false
			}
		}
		return true
	})
	if ended {
		out.Note("every stream ended after %v", time.Since(start).Round(100*time.Millisecond))
	} else {
		out.Note("streams still open after %v", p.Hold)
	}
	for _, c := range conns {
		c.tally(&out.Answers, "")
	}
	return nil
}

package testattack

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// trickle sends, from p.TrickleClients clients, an HTTP/1.1 POST of
// 100,000 bytes whose body comes one byte every p.TrickleEvery, until the
// edge answers (or hangs up), or p.Hold passes.
func trickle(ctx context.Context, t Target, p Params, out *Outcome) error {
	start := time.Now()
	var cuts spread
	var wg sync.WaitGroup
	for i := range p.TrickleClients {
		wg.Go(func() {
			c, err := t.dialTLS(ctx, source(blockTrickle, i), "http/1.1")
			if err != nil {
				out.Answers.Add("dial: "+errKind(err), 1)
				return
			}
			defer c.Close()
			answered := make(chan string, 1)
			go func() { // ends when c does; waited for below
				res, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					answered <- errKind(err)
					return
				}
				res.Body.Close()
				answered <- strconv.Itoa(res.StatusCode)
			}()
			_, _ = fmt.Fprintf(c, "POST /trickle/%d HTTP/1.1\r\nHost: %s\r\nUser-Agent: Go-http-client/1.1\r\nContent-Length: 100000\r\n\r\nx", i, t.Host)
			tick := time.NewTicker(p.TrickleEvery)
			defer tick.Stop()
			hold := time.NewTimer(p.Hold - time.Since(start))
			defer hold.Stop()
			for {
				select {
				case k := <-answered:
					out.Answers.Add(k, 1)
					cuts.add(time.Since(start))
					return
				case <-hold.C:
				case <-ctx.Done():
				case <-tick.C:
					_, _ = c.Write([]byte("x")) // a failure shows in the reader
					continue
				}
				out.Answers.Add("held", 1)
				c.Close()
				<-answered
				return
			}
		})
	}
	wg.Wait()
	out.Held = p.TrickleClients
	if s := cuts.String(); s != "" {
		out.Note("answered or cut after %s", s)
	}
	return nil
}

// slowRead asks, on p.SlowConns HTTP/1.1 connections of one client, for
// the upstream's large response and never reads past its head; and, on
// one HTTP/2 connection of another client whose streams have a zero
// window, for it p.SlowStreams times. It waits until the upstream has
// stopped writing every large response (the edge finished or dropped
// them) and every stream has ended, or p.Hold has passed.
func slowRead(ctx context.Context, t Target, p Params, out *Outcome) error {
	start := time.Now()
	var mu sync.Mutex
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	var wg sync.WaitGroup
	for i := range p.SlowConns {
		wg.Go(func() {
			c, err := t.dialTLS(ctx, source(blockSlowH1, 0), "http/1.1")
			if err != nil {
				out.Answers.Add("h1: dial: "+errKind(err), 1)
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
			_ = c.SetReadDeadline(start.Add(p.Hold))
			_, _ = fmt.Fprintf(c, "GET /big/h1/%d HTTP/1.1\r\nHost: %s\r\nUser-Agent: Go-http-client/1.1\r\n\r\n", i, t.Host)
			res, err := http.ReadResponse(bufio.NewReaderSize(c, 4096), nil)
			if err != nil {
				out.Answers.Add("h1: "+errKind(err), 1)
				return
			}
			out.Answers.Add("h1: "+strconv.Itoa(res.StatusCode), 1) // and not a byte more is read
		})
	}
	h, err := t.dialH2(ctx, source(blockSlowH2, 0), true)
	if err != nil {
		wg.Wait()
		return err
	}
	defer h.Close()
	stop := context.AfterFunc(ctx, func() { h.conn.Close() })
	defer stop()
	for i := range p.SlowStreams {
		if h.request(uint32(2*i+1), t.Host, "GET", fmt.Sprintf("/big/h2/%d", i), nil, true, i%50 == 49) != nil {
			break
		}
	}
	_ = h.flush()
	wg.Wait()
	out.Held = p.SlowConns + p.SlowStreams
	// Done when no large response is being written any more, and every
	// stream has ended — or, answered with an error page that the zero
	// window keeps from arriving, is left for the edge to hold.
	done := waitUntil(ctx, p.Hold-time.Since(start), func() bool {
		return t.Upstream.Stats().BigInFlight == 0 && (!h.alive() || h.unfinished() == 0)
	})
	if done {
		out.Note("the last large response ended %v after the attack began", time.Since(start).Round(100*time.Millisecond))
	} else {
		out.Note("%d large responses still being written after %v", t.Upstream.Stats().BigInFlight, p.Hold)
	}
	h.tally(&out.Answers, "h2: ")
	return nil
}

// spread is the least and the most of some durations.
type spread struct {
	mu          sync.Mutex
	n           int
	least, most time.Duration
}

func (s *spread) add(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == 0 || d < s.least {
		s.least = d
	}
	if d > s.most {
		s.most = d
	}
	s.n++
}

// String is "1.2s–3.4s" (or "" if empty).
func (s *spread) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == 0 {
		return ""
	}
	return s.least.Round(10*time.Millisecond).String() + "–" + s.most.Round(10*time.Millisecond).String()
}

package testattack

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/quic-go/quic-go/http3"
)

// Prober is the honest client, from 127.0.0.1: it asks the edge for a
// small page every so often, whether or not the last answer came (an open
// loop, so that a stall shows in every request it delays), by turns on a
// kept-alive HTTP/2 connection, on a new HTTP/1.1 connection, and on a
// new HTTP/3 connection when the target has HTTP/3.
type Prober struct {
	t      Target
	cancel context.CancelFunc // ends the requests left when Stop's grace is over
	stop   chan struct{}
	wg     sync.WaitGroup
	h1     *http.Transport
	h2     *http.Transport // HTTP/2 only

	born  time.Time // when it started
	mu    sync.Mutex
	took  map[string][]time.Duration // by protocol; every request's, failed ones included
	fails Tally
	slow  []time.Duration // when each request of 100 ms or more started, since born
}

// Latency is what the honest client saw.
type Latency struct {
	N, Failed     int
	P50, P99, Max time.Duration     // over every request, failed ones included
	Fails         string            // the failures, by kind
	ByProto       map[string][2]int // protocol → requests, and those slower than 100 ms
	// SlowFrom and SlowTo are when the first and the last request of
	// 100 ms or more started, since the prober did.
	SlowFrom, SlowTo time.Duration
}

func (l Latency) String() string {
	s := fmt.Sprintf("%v / %v (%d", ms(l.P50), ms(l.P99), l.N)
	if l.Failed > 0 {
		s += fmt.Sprintf(", %d failed: %s", l.Failed, l.Fails)
	}
	return s + ")"
}

// Slow says, by protocol, how many requests took 100 ms or more, and when
// they started: "h3 5/60, from 0.2 s to 1.4 s".
func (l Latency) Slow() string {
	var parts []string
	for _, p := range []string{"h2", "h1", "h3"} {
		if c, ok := l.ByProto[p]; ok && c[1] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d/%d", p, c[1], c[0]))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("%s, from %.1f s to %.1f s", strings.Join(parts, ", "), l.SlowFrom.Seconds(), l.SlowTo.Seconds())
}

// ms writes d in milliseconds, with a decimal below 10 ms.
func ms(d time.Duration) string {
	if d < 10*time.Millisecond {
		return strconv.FormatFloat(float64(d)/1e6, 'f', 1, 64) + " ms"
	}
	return strconv.FormatInt(d.Milliseconds(), 10) + " ms"
}

// StartProber starts the honest client, one request every every.
func StartProber(t Target, every time.Duration) *Prober {
	ctx, cancel := context.WithCancel(context.Background())
	p := &Prober{t: t, cancel: cancel, born: time.Now(), stop: make(chan struct{}), took: map[string][]time.Duration{},
		h1: &http.Transport{TLSClientConfig: t.tlsConfig("http/1.1"), DisableKeepAlives: true, DisableCompression: true},
		h2: &http.Transport{TLSClientConfig: t.tlsConfig("h2"), DisableCompression: true, Protocols: new(http.Protocols)},
	}
	p.h2.Protocols.SetHTTP2(true)
	p.wg.Go(func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-p.stop:
				return
			case <-tick.C:
			}
			p.wg.Go(func() { p.one(ctx, n) })
		}
	})
	return p
}

// one makes request n and records how long it took.
func (p *Prober) one(ctx context.Context, n int) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var rt http.RoundTripper
	proto := []string{"h2", "h1", "h3"}[n%3]
	switch {
	case proto == "h1":
		rt = p.h1
	case proto == "h3" && p.t.HTTP3 != "":
		tr := &http3.Transport{TLSClientConfig: p.t.tlsConfig("h3")}
		defer tr.Close()
		rt = tr
	default:
		proto, rt = "h2", p.h2
	}
	host := p.t.HTTPS
	if proto == "h3" {
		host = p.t.HTTP3
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("https://%s/honest/%s/%d", host, proto, n), nil)
	req.Host = p.t.Host
	req.Header.Set("User-Agent", "Go-http-client/1.1")
	start := time.Now()
	res, err := rt.RoundTrip(req)
	fail := ""
	if err != nil {
		fail = proto + " " + errKind(err)
	} else {
		_, err = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		switch {
		case err != nil:
			fail = proto + " body " + errKind(err)
		case res.StatusCode != http.StatusOK:
			fail = proto + " " + strconv.Itoa(res.StatusCode)
		}
	}
	took := time.Since(start)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.took[proto] = append(p.took[proto], took)
	if took >= 100*time.Millisecond {
		p.slow = append(p.slow, start.Sub(p.born))
	}
	if fail != "" {
		p.fails.Add(fail, 1)
	}
}

// Stop stops sending, gives the requests under way a second to finish
// (those that do not count as failed, with the time they had taken), and
// returns what the honest client saw.
func (p *Prober) Stop() Latency {
	close(p.stop)
	grace := time.AfterFunc(time.Second, p.cancel)
	p.wg.Wait()
	grace.Stop()
	p.cancel()
	p.h1.CloseIdleConnections()
	p.h2.CloseIdleConnections()
	p.mu.Lock()
	defer p.mu.Unlock()
	l := Latency{Failed: p.fails.Total(), Fails: p.fails.String(), ByProto: map[string][2]int{}}
	var all []time.Duration
	for proto, took := range p.took {
		slow := 0
		for _, d := range took {
			if d >= 100*time.Millisecond {
				slow++
			}
		}
		l.ByProto[proto] = [2]int{len(took), slow}
		all = append(all, took...)
	}
	if len(p.slow) > 0 {
		l.SlowFrom, l.SlowTo = slices.Min(p.slow), slices.Max(p.slow)
	}
	l.N = len(all)
	if l.N == 0 {
		return l
	}
	slices.Sort(all)
	l.P50, l.P99, l.Max = percentiles(all)
	return l
}

// percentiles returns the median, the 99th percentile (nearest rank: the
// smallest value at least 99 % of d do not exceed) and the largest of d,
// sorted and not empty.
func percentiles(d []time.Duration) (p50, p99, top time.Duration) {
	n := len(d)
	return d[(n+1)/2-1], d[(n*99+99)/100-1], d[n-1]
}

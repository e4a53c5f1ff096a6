package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/maatproxy/maat/internal/testattack"
)

// snapshot is the edge process at one time.
type snapshot struct {
	at         time.Time
	goroutines int
	rss        int64
	cpu        time.Duration
	metrics    testattack.Metrics
}

func (e *edgeProc) snapshot(ctx context.Context) (snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	m, err := testattack.Scrape(ctx, "http://"+e.admin+"/metrics")
	if err != nil {
		return snapshot{}, err
	}
	rss, cpu, err := procStats(e.cmd.Process.Pid)
	if err != nil {
		return snapshot{}, err
	}
	return snapshot{at: time.Now(), goroutines: int(m.Value("go_goroutines")), rss: rss, cpu: cpu, metrics: m}, nil
}

// sampler follows the edge's peaks: RSS from /proc every 100 ms,
// goroutines from /metrics every 500 ms (a scrape costs the edge a little).
type sampler struct {
	stop, done chan struct{}
	mu         sync.Mutex
	goroutines int
	rss        int64
}

func (e *edgeProc) startSampler() *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
			g := 0
			if n%5 == 0 {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				if m, err := testattack.Scrape(ctx, "http://"+e.admin+"/metrics"); err == nil {
					g = int(m.Value("go_goroutines"))
				}
				cancel()
			}
			rss, _, _ := procStats(e.cmd.Process.Pid)
			s.mu.Lock()
			s.goroutines, s.rss = max(s.goroutines, g), max(s.rss, rss)
			s.mu.Unlock()
		}
	}()
	return s
}

// peaks stops the sampler and returns the highest goroutine count and RSS
// it saw, and those of last (taken at the attack's end).
func (s *sampler) peaks(last snapshot) (int, int64) {
	close(s.stop)
	<-s.done
	return max(s.goroutines, last.goroutines), max(s.rss, last.rss)
}

// row is what one attack cost.
type row struct {
	title                      string
	upMax, upEnd, upAfter      int64
	upRequests                 int64
	gBase, gPeak, gAfter       int
	rssBase, rssPeak, rssAfter int64
	cpu                        float64 // the edge's CPU time over the attack's, in cores
	took, settled              time.Duration
	honest                     testattack.Latency
	fired, answers             string
	notes                      []string
}

func (r row) brief() string {
	return fmt.Sprintf("took %v; honest p50/p99 %s; upstream conns max %d; goroutines %d→%d→%d; fired: %s",
		r.took.Round(100*time.Millisecond), r.honest, r.upMax, r.gBase, r.gPeak, r.gAfter, r.fired)
}

// runScenario runs one attack against a fresh edge and upstream.
func runScenario(ctx context.Context, o options, bin, dir string, sc testattack.Scenario, stderr io.Writer) (row, error) {
	upp, err := startUpstream(o.bigMB << 20)
	if err != nil {
		return row{}, err
	}
	defer upp.Close()
	up := upp.Upstream
	e, err := startEdge(ctx, o, bin, dir, up.URL, stderr)
	if err != nil {
		return row{}, err
	}
	defer e.stop()
	r := row{title: sc.Title}
	var base snapshot
	t := testattack.Target{HTTPS: e.https, HTTP3: e.https, TLS: e.tls, Host: "localhost", Upstream: up,
		AuthPath: authPath, AuthPassword: authPassword}
	t.OnHeld = func(held int) {
		s, err := e.snapshot(ctx)
		if err != nil || held == 0 {
			return
		}
		r.notes = append(r.notes, fmt.Sprintf("per held connection: %.1f KiB RSS, %.1f goroutines",
			float64(s.rss-base.rss)/1024/float64(held), float64(s.goroutines-base.goroutines)/float64(held)))
	}
	// Warm up: the honest client's connections, the upstream's pool.
	warm := testattack.StartProber(t, 20*time.Millisecond)
	time.Sleep(600 * time.Millisecond) // an amount of warm-up traffic, not a synchronization
	if w := warm.Stop(); w.N == 0 || w.Failed > 0 {
		return row{}, fmt.Errorf("the edge did not serve the honest client before the attack: %s", w)
	}
	if base, err = e.snapshot(ctx); err != nil {
		return row{}, err
	}
	up.ResetMax()
	upBase := up.Stats()
	smp := e.startSampler()
	prober, err := e.startProbe(o.probeEvery)
	if err != nil {
		return row{}, err
	}
	var out testattack.Outcome
	runErr := sc.Run(ctx, t, o.p, &out)
	if r.honest, err = prober.Stop(); err != nil {
		return row{}, err
	}
	end, err := e.snapshot(ctx)
	if err != nil {
		return row{}, err
	}
	upEnd := up.Stats()
	r.gPeak, r.rssPeak = smp.peaks(end)
	if runErr != nil {
		return row{}, runErr
	}
	r.took = end.at.Sub(base.at)
	r.cpu = float64(end.cpu-base.cpu) / float64(r.took)
	after, settled := e.settle(ctx, base, end, up, upBase.Conns, o.settle)
	r.settled = after.at.Sub(end.at)
	upAfter := up.Stats()
	r.upMax, r.upEnd, r.upAfter = upEnd.MaxConns, upEnd.Conns, upAfter.Conns
	r.upRequests = upAfter.Requests - upBase.Requests
	r.gBase, r.gAfter = base.goroutines, after.goroutines
	r.rssBase, r.rssAfter = base.rss, after.rss
	r.fired = after.metrics.Fired(base.metrics).String()
	r.answers = out.Answers.String()
	r.notes = append(out.Notes(), r.notes...)
	if slow := r.honest.Slow(); slow != "" {
		r.notes = append(r.notes, "honest requests ≥ 100 ms: "+slow)
	}
	if !settled {
		r.notes = append(r.notes, fmt.Sprintf("goroutines not back to baseline %v after the attack", o.settle))
	}
	return r, nil
}

// settle polls the edge from end until its goroutines are back to base,
// but for the upstream connections it keeps in its pool (two goroutines
// each, for 90 s) beyond the upConns it had, or within has passed; it returns
// the last snapshot and whether the edge settled.
func (e *edgeProc) settle(ctx context.Context, base, end snapshot, up *testattack.Upstream, upConns int64, within time.Duration) (snapshot, bool) {
	settled := func(s snapshot) bool {
		pooled := int(up.Stats().Conns - upConns)
		return s.goroutines <= base.goroutines+5+2*pooled
	}
	after := end
	for !settled(after) && time.Since(end.at) < within && ctx.Err() == nil {
		time.Sleep(250 * time.Millisecond) // polling the edge, with a deadline
		if s, err := e.snapshot(ctx); err == nil {
			after = s
		}
	}
	return after, settled(after)
}

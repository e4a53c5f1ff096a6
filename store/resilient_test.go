package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/maatproxy/maat/internal/testredis"
)

// newTestResilient returns a Resilient store over r with a new Memory
// store, closed when the test ends. Its Run is not started.
func newTestResilient(t testing.TB, r *Redis, timeout time.Duration) *Resilient {
	t.Helper()
	s, err := NewResilient(r, NewMemory(), ResilientConfig{Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// stateLog records the changes a Resilient store reports.
type stateLog struct {
	mu      sync.Mutex
	changes []bool
	errs    []error
	changed chan struct{} // signalled at each change (buffered, 1)
}

func newStateLog() *stateLog { return &stateLog{changed: make(chan struct{}, 1)} }

func (l *stateLog) record(degraded bool, err error) {
	l.mu.Lock()
	l.changes = append(l.changes, degraded)
	l.errs = append(l.errs, err)
	l.mu.Unlock()
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

func (l *stateLog) get() ([]bool, []error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]bool(nil), l.changes...), append([]error(nil), l.errs...)
}

// await waits until n changes are recorded, for at most limit.
func (l *stateLog) await(t *testing.T, n int, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		if c, _ := l.get(); len(c) >= n {
			return time.Since(start)
		}
		select {
		case <-l.changed:
		case <-timer.C:
			c, _ := l.get()
			t.Fatalf("%d state changes after %v, want %d (changes %v)", len(c), limit, n, c)
		}
	}
}

// awaitLast waits until the last change recorded is to degraded, for at
// most limit.
func (l *stateLog) awaitLast(t *testing.T, degraded bool, limit time.Duration) {
	t.Helper()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		if c, _ := l.get(); len(c) > 0 && c[len(c)-1] == degraded {
			return
		}
		select {
		case <-l.changed:
		case <-timer.C:
			c, _ := l.get()
			t.Fatalf("changes %v after %v; want the last to be degraded = %v", c, limit, degraded)
		}
	}
}

// traffic calls a store from a few goroutines, as requests would, until
// stopped: MarkOnce of fresh keys (always first), Take with a limit never
// reached, each goroutine at most once a millisecond (thousands of calls a
// second, not the millions memory could answer, whose marks would all have
// to be written back). It records failures and the slowest call.
type traffic struct {
	calls    atomic.Int64
	failures atomic.Int64
	slowest  atomic.Int64 // nanoseconds
	firstErr atomic.Pointer[error]
	stop     chan struct{}
	wg       sync.WaitGroup
}

func startTraffic(s Store) *traffic {
	tr := &traffic{stop: make(chan struct{})}
	for g := range 4 {
		tr.wg.Go(func() {
			pace := time.NewTicker(time.Millisecond)
			defer pace.Stop()
			for n := 0; ; n++ {
				select {
				case <-tr.stop:
					return
				case <-pace.C:
				}
				start := time.Now()
				first, err := s.MarkOnce(context.Background(), fmt.Sprintf("traffic/%d/%d", g, n), time.Minute)
				if err == nil && !first {
					err = errors.New("a fresh token was refused")
				}
				if err == nil {
					var ok bool
					ok, _, err = s.Take(context.Background(), "traffic", 1e9, 1<<30)
					if err == nil && !ok {
						err = errors.New("a request was rate limited")
					}
				}
				d := int64(time.Since(start))
				raiseMax(&tr.slowest, d)
				if err != nil {
					tr.failures.Add(1)
					tr.firstErr.CompareAndSwap(nil, &err)
				}
				tr.calls.Add(1)
			}
		})
	}
	return tr
}

// waitCalls waits until n more calls have been made, for at most 10 s.
func (tr *traffic) waitCalls(t *testing.T, n int64) {
	t.Helper()
	target := tr.calls.Load() + n
	deadline := time.Now().Add(10 * time.Second)
	for tr.calls.Load() < target {
		if time.Now().After(deadline) {
			t.Fatalf("traffic stalled: %d calls, want %d", tr.calls.Load(), target)
		}
		time.Sleep(time.Millisecond) // polling, bounded by the deadline
	}
}

func (tr *traffic) end(t *testing.T) {
	t.Helper()
	close(tr.stop)
	tr.wg.Wait()
	if n := tr.failures.Load(); n > 0 {
		t.Errorf("%d of %d calls failed; first: %v", n, tr.calls.Load(), *tr.firstErr.Load())
	}
}

// runResilient starts s.Run and returns the function that stops it and
// checks that it returned nil.
func runResilient(t *testing.T, s *Resilient) (stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run() = %v, want nil", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// TestResilientRedisKilled kills redis-server under traffic and starts it
// again on the same port: no call fails, the store says degraded, reports
// each change once, recovers, and writes back what was set meanwhile.
func TestResilientRedisKilled(t *testing.T) {
	t.Parallel()
	srv := testredis.Start(t)
	r, err := OpenRedis(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	log := newStateLog()
	// A timeout that a slow call on a loaded machine does not reach: the
	// test counts state changes, and the refused connections of a killed
	// server fail at once anyway.
	s, err := NewResilient(r, NewMemory(), ResilientConfig{Timeout: time.Second, ProbeInterval: 20 * time.Millisecond, OnStateChange: log.record})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	stopRun := runResilient(t, s)
	ctx := t.Context()

	tr := startTraffic(s)
	tr.waitCalls(t, 100)
	if first, err := s.MarkOnce(ctx, "before", time.Hour); err != nil || !first {
		t.Fatalf("MarkOnce before the outage = %v, %v", first, err)
	}
	if err := s.Put(ctx, "cert", []byte("held")); err != nil {
		t.Fatal(err)
	}
	if ok, _, _ := s.Health(); !ok {
		_, _, err := s.Health()
		t.Fatalf("Health() says degraded before the outage: %v", err)
	}

	srv.Kill()
	took := log.await(t, 1, 2*time.Second)
	t.Logf("degraded %v after the kill", took)
	ok, since, lastErr := s.Health()
	if ok || lastErr == nil || since.IsZero() {
		t.Fatalf("Health() during the outage = %v, %v, %v; want degraded with an error", ok, since, lastErr)
	}
	tr.waitCalls(t, 100) // traffic goes on
	outage := []struct {
		name string
		call func() (any, error)
		want any
	}{
		{"a mark set before is refused (mirrored)", func() (any, error) { return s.MarkOnce(ctx, "before", time.Hour) }, false},
		{"a new mark", func() (any, error) { return s.MarkOnce(ctx, "during", time.Hour) }, true},
		{"the new mark again", func() (any, error) { return s.MarkOnce(ctx, "during", time.Hour) }, false},
		{"a blob read before (mirrored)", func() (any, error) { b, err := s.Get(ctx, "cert"); return string(b), err }, "held"},
		{"a blob put", func() (any, error) { return nil, s.Put(ctx, "ordered", []byte("during")) }, nil},
		{"a lock, in memory", func() (any, error) {
			unlock, err := s.Lock(ctx, "l", time.Minute)
			if err == nil {
				unlock()
			}
			return nil, err
		}, nil},
	}
	for _, c := range outage {
		if got, err := c.call(); err != nil || got != c.want {
			t.Errorf("during the outage, %s: %v, %v; want %v", c.name, got, err, c.want)
		}
	}

	if err := srv.Restart(); err != nil {
		t.Fatalf("restarting redis-server on its port: %v", err)
	}
	took = log.await(t, 2, 5*time.Second)
	t.Logf("recovered %v after the restart", took)
	if ok, _, lastErr := s.Health(); !ok || lastErr != nil {
		t.Fatalf("Health() after the restart = %v, %v; want ok", ok, lastErr)
	}
	tr.waitCalls(t, 100)
	tr.end(t)

	// What was set during the outage is in Redis now: another node sees it.
	other, err := NewRedis(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if first, err := s.MarkOnce(ctx, "during", time.Hour); err != nil || first {
		t.Errorf("MarkOnce after recovery of a mark set during the outage = %v, %v; want false", first, err)
	}
	if first, err := other.MarkOnce(ctx, "during", time.Hour); err != nil || first {
		t.Errorf("another node's MarkOnce of a mark set during the outage = %v, %v; want false", first, err)
	}
	if ttl, err := other.client.PTTL(ctx, prefixMark+"during").Result(); err != nil || ttl < 50*time.Minute || ttl > time.Hour {
		t.Errorf("PTTL of the written-back mark = %v, %v; want its remaining hour", ttl, err)
	}
	if b, err := other.Get(ctx, "ordered"); err != nil || string(b) != "during" {
		t.Errorf("another node's Get of a blob put during the outage = %q, %v", b, err)
	}

	stopRun()
	changes, errs := log.get()
	if len(changes) != 2 || !changes[0] || changes[1] || errs[0] == nil || errs[1] != nil {
		t.Errorf("state changes %v (errors %v); want exactly [degraded, recovered]", changes, errs)
	}
}

// TestResilientRedisStopped pauses redis-server (SIGSTOP: connections stay
// open, nothing answers) for longer than go-redis's 3 s read timeout: calls
// are answered from memory after the store's timeout, not after that read
// timeout or the end of the pause; after SIGCONT the store recovers, and
// Redis, which kept its data, gets the changes made meanwhile, deletions
// included.
func TestResilientRedisStopped(t *testing.T) {
	t.Parallel()
	const pause = 3500 * time.Millisecond
	srv := testredis.Start(t)
	r, err := OpenRedis(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	log := newStateLog()
	s, err := NewResilient(r, NewMemory(), ResilientConfig{Timeout: 200 * time.Millisecond, ProbeInterval: 20 * time.Millisecond, OnStateChange: log.record})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	runResilient(t, s)
	ctx := t.Context()
	for _, k := range []string{"old-cert", "kept-cert"} {
		if err := s.Put(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}

	tr := startTraffic(s)
	tr.waitCalls(t, 100)
	srv.Signal(syscall.SIGSTOP)
	paused := time.Now()
	log.awaitLast(t, true, 5*time.Second)
	if first, err := s.MarkOnce(ctx, "paused", time.Hour); err != nil || !first {
		t.Errorf("MarkOnce while paused = %v, %v; want true", first, err)
	}
	if err := s.Delete(ctx, "old-cert"); err != nil {
		t.Errorf("Delete while paused: %v", err)
	}
	if err := s.Put(ctx, "kept-cert", []byte("renewed")); err != nil {
		t.Errorf("Put while paused: %v", err)
	}
	for time.Since(paused) < pause { // the outage lasts; traffic goes on
		tr.waitCalls(t, 10)
	}
	srv.Signal(syscall.SIGCONT)
	// Reported once the write-back is done. (A call slowed by the
	// machine's load may have made changes of its own: only the last one
	// counts here.)
	log.awaitLast(t, false, 10*time.Second)
	tr.end(t)
	// Without a deadline on each command, calls made at the pause would
	// have waited for go-redis's read timeout (3 s) or the end of the pause
	// (3.5 s).
	if slowest := time.Duration(tr.slowest.Load()); slowest >= 3*time.Second {
		t.Errorf("slowest call %v with a 200ms timeout; want well under 3s", slowest)
	}

	other, err := NewRedis(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if first, err := other.MarkOnce(ctx, "paused", time.Hour); err != nil || first {
		t.Errorf("MarkOnce in Redis of a mark set while paused = %v, %v; want false", first, err)
	}
	if _, err := other.Get(ctx, "old-cert"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get of a blob deleted while paused: %v; want ErrNotFound", err)
	}
	if b, err := other.Get(ctx, "kept-cert"); err != nil || !bytes.Equal(b, []byte("renewed")) {
		t.Errorf("Get of a blob replaced while paused = %q, %v; want renewed", b, err)
	}
}

func TestNewResilientErrors(t *testing.T) {
	t.Parallel()
	r, err := OpenRedis("redis://" + closedPort(t) + "/0")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	mem := NewMemory()
	defer mem.Close()
	tests := []struct {
		name  string
		r     *Redis
		mem   *Memory
		cfg   ResilientConfig
		wants int // problems reported
	}{
		{name: "no redis", mem: mem, wants: 1},
		{name: "negative durations", r: r, mem: mem, cfg: ResilientConfig{Timeout: -1, ProbeInterval: -time.Second}, wants: 2},
		{name: "all at once", cfg: ResilientConfig{Timeout: -1}, wants: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := NewResilient(tt.r, tt.mem, tt.cfg)
			if s != nil || !errors.Is(err, ErrInvalid) {
				t.Fatalf("NewResilient() = %v, %v; want ErrInvalid", s, err)
			}
			if n := len(err.(interface{ Unwrap() []error }).Unwrap()); n != tt.wants {
				t.Errorf("%d problems reported (%v); want %d", n, err, tt.wants)
			}
		})
	}
}

func BenchmarkResilientMarkOnce(b *testing.B) {
	tests := []struct {
		name string
		open func(b *testing.B) *Redis
	}{
		{"redis", func(b *testing.B) *Redis { return newTestRedis(b) }},
		{"degraded", func(b *testing.B) *Redis {
			r, err := OpenRedis("redis://" + closedPort(b) + "/0")
			if err != nil {
				b.Fatal(err)
			}
			return r
		}},
	}
	for _, tt := range tests {
		b.Run(tt.name, func(b *testing.B) {
			s := newTestResilient(b, tt.open(b), time.Second)
			ctx := b.Context()
			if _, err := s.MarkOnce(ctx, "warm-up", time.Minute); err != nil { // connects, or finds Redis down
				b.Fatal(err)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := s.MarkOnce(ctx, fmt.Sprint(i), time.Minute); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

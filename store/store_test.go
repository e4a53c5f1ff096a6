package store

import (
	"bytes"
	"context"
	"errors"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// behaviour is what every Store does, run against each implementation.
var behaviour = []struct {
	name string
	run  func(t *testing.T, s Store, key string)
}{
	{"mark_once", func(t *testing.T, s Store, key string) {
		ctx := t.Context()
		for i, want := range []bool{true, false, false} {
			first, err := s.MarkOnce(ctx, key, time.Hour)
			if err != nil || first != want {
				t.Fatalf("MarkOnce #%d = %v, %v; want %v, nil", i, first, err, want)
			}
		}
		if first, err := s.MarkOnce(ctx, key+"/other", time.Hour); err != nil || !first {
			t.Fatalf("MarkOnce of another key = %v, %v; want true, nil", first, err)
		}
	}},
	{"mark_once_parallel", func(t *testing.T, s Store, key string) {
		var firsts atomic.Int32
		var wg sync.WaitGroup
		for range 64 {
			wg.Go(func() {
				first, err := s.MarkOnce(t.Context(), key, time.Hour)
				if err != nil {
					t.Error(err)
				}
				if first {
					firsts.Add(1)
				}
			})
		}
		wg.Wait()
		if n := firsts.Load(); n != 1 {
			t.Fatalf("%d of 64 parallel MarkOnce were first; want exactly 1", n)
		}
	}},
	{"mark_once_bad_ttl", func(t *testing.T, s Store, key string) {
		for _, ttl := range []time.Duration{0, -time.Second} {
			if _, err := s.MarkOnce(t.Context(), key, ttl); !errors.Is(err, ErrInvalid) {
				t.Errorf("MarkOnce(ttl %v) error = %v; want ErrInvalid", ttl, err)
			}
		}
	}},
	{"take_burst_then_refuse", func(t *testing.T, s Store, key string) {
		ctx := t.Context()
		const rate = 0.001 // one token per 1000 s: no refill during the test
		for i := range 3 {
			ok, wait, err := s.Take(ctx, key, rate, 3)
			if err != nil || !ok || wait != 0 {
				t.Fatalf("Take #%d = %v, %v, %v; want true, 0, nil", i, ok, wait, err)
			}
		}
		ok, wait, err := s.Take(ctx, key, rate, 3)
		if err != nil || ok {
			t.Fatalf("Take after burst = %v, %v; want false, nil", ok, err)
		}
		if wait <= 990*time.Second || wait > 1000*time.Second {
			t.Fatalf("retryAfter = %v; want just under 1000s", wait)
		}
		if ok, _, err := s.Take(ctx, key+"/other", rate, 3); err != nil || !ok {
			t.Fatalf("Take of another bucket = %v, %v; want true, nil", ok, err)
		}
	}},
	{"take_parallel", func(t *testing.T, s Store, key string) {
		var taken atomic.Int32
		var wg sync.WaitGroup
		for range 64 {
			wg.Go(func() {
				ok, _, err := s.Take(t.Context(), key, 0.001, 10)
				if err != nil {
					t.Error(err)
				}
				if ok {
					taken.Add(1)
				}
			})
		}
		wg.Wait()
		if n := taken.Load(); n != 10 {
			t.Fatalf("%d of 64 parallel Take succeeded with burst 10; want 10", n)
		}
	}},
	{"take_extreme_limits", func(t *testing.T, s Store, key string) {
		ctx := t.Context()
		for _, c := range []struct {
			name  string
			rate  float64
			burst int
		}{{"tiny_rate", 1e-20, 1}, {"huge_burst", 1e-9, 1 << 62}} {
			if ok, _, err := s.Take(ctx, key+c.name, c.rate, c.burst); err != nil || !ok {
				t.Fatalf("%s: first Take = %v, %v; want true, nil", c.name, ok, err)
			}
		}
		ok, wait, err := s.Take(ctx, key+"tiny_rate", 1e-20, 1)
		if err != nil || ok || wait != maxWait {
			t.Fatalf("second Take at a tiny rate = %v, %v, %v; want false, %v, nil", ok, wait, err, maxWait)
		}
	}},
	{"take_bad_limit", func(t *testing.T, s Store, key string) {
		for _, c := range []struct {
			rate  float64
			burst int
		}{{0, 1}, {-1, 1}, {math.NaN(), 1}, {math.Inf(1), 1}, {1, 0}, {1, -5}} {
			if _, _, err := s.Take(t.Context(), key, c.rate, c.burst); !errors.Is(err, ErrInvalid) {
				t.Errorf("Take(rate %v, burst %d) error = %v; want ErrInvalid", c.rate, c.burst, err)
			}
		}
	}},
	{"blob", func(t *testing.T, s Store, key string) {
		ctx := t.Context()
		if _, err := s.Get(ctx, key); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get of a missing blob error = %v; want ErrNotFound", err)
		}
		data := []byte("-----BEGIN CERTIFICATE-----\x00\xff")
		if err := s.Put(ctx, key, data); err != nil {
			t.Fatal(err)
		}
		data[0] = 'X' // Put must have copied
		got, err := s.Get(ctx, key)
		if err != nil || string(got) != "-----BEGIN CERTIFICATE-----\x00\xff" {
			t.Fatalf("Get = %q, %v", got, err)
		}
		if err := s.Put(ctx, key, []byte("second")); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Get(ctx, key); err != nil || string(got) != "second" {
			t.Fatalf("Get after overwrite = %q, %v", got, err)
		}
		if err := s.Put(ctx, key+"/empty", nil); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Get(ctx, key+"/empty"); err != nil || len(got) != 0 {
			t.Fatalf("Get of an empty blob = %q, %v; want empty, nil", got, err)
		}
		for range 2 { // deleting a missing key is no error
			if err := s.Delete(ctx, key); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Get(ctx, key); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get after Delete error = %v; want ErrNotFound", err)
		}
	}},
	{"kinds_are_distinct", func(t *testing.T, s Store, key string) {
		ctx := t.Context()
		if err := s.Put(ctx, key, []byte("blob")); err != nil {
			t.Fatal(err)
		}
		if first, err := s.MarkOnce(ctx, key, time.Hour); err != nil || !first {
			t.Fatalf("MarkOnce on a blob's key = %v, %v; want true, nil", first, err)
		}
		if ok, _, err := s.Take(ctx, key, 1, 1); err != nil || !ok {
			t.Fatalf("Take on a mark's key = %v, %v; want true, nil", ok, err)
		}
		unlock, err := s.Lock(ctx, key, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		unlock()
		if got, err := s.Get(ctx, key); err != nil || !bytes.Equal(got, []byte("blob")) {
			t.Fatalf("Get = %q, %v; want the blob", got, err)
		}
	}},
	{"lock_excludes", func(t *testing.T, s Store, key string) {
		unlock, err := s.Lock(t.Context(), key, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		if _, err := s.Lock(ctx, key, time.Hour); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Lock of a held lock error = %v; want DeadlineExceeded", err)
		}
		unlock()
		unlock2, err := s.Lock(t.Context(), key, time.Hour)
		if err != nil {
			t.Fatalf("Lock after unlock: %v", err)
		}
		unlock2()
	}},
	{"lock_parallel", func(t *testing.T, s Store, key string) {
		var holders, maxHolders, done atomic.Int32
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				unlock, err := s.Lock(t.Context(), key, time.Hour)
				if err != nil {
					t.Error(err)
					return
				}
				n := holders.Add(1)
				raiseMax(&maxHolders, n)
				runtime.Gosched() // let the others try while it is held
				holders.Add(-1)
				done.Add(1)
				unlock()
			})
		}
		wg.Wait()
		if maxHolders.Load() != 1 || done.Load() != 8 {
			t.Fatalf("%d held the lock at once, %d of 8 got it; want 1 and 8", maxHolders.Load(), done.Load())
		}
	}},
	{"lock_bad_ttl", func(t *testing.T, s Store, key string) {
		if _, err := s.Lock(t.Context(), key, 0); !errors.Is(err, ErrInvalid) {
			t.Fatalf("Lock(ttl 0) error = %v; want ErrInvalid", err)
		}
	}},
	{"canceled_context", func(t *testing.T, s Store, key string) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := s.MarkOnce(ctx, key, time.Hour); !errors.Is(err, context.Canceled) {
			t.Fatalf("MarkOnce with a canceled context error = %v; want Canceled", err)
		}
	}},
}

// raiseMax raises m to n if n is larger, with compare-and-swap, so that no
// concurrent raise is lost.
func raiseMax[T int32 | int64](m interface {
	Load() T
	CompareAndSwap(old, new T) bool
}, n T) {
	for old := m.Load(); n > old; old = m.Load() {
		if m.CompareAndSwap(old, n) {
			return
		}
	}
}

// TestBehaviour runs the behaviour table against Memory, a real
// redis-server, a Resilient store over it, Sealed stores over memory and
// Redis, and a Resilient store whose Redis never answers (degraded:
// everything from memory).
func TestBehaviour(t *testing.T) {
	t.Parallel()
	mem := NewMemory()
	t.Cleanup(func() { mem.Close() })
	stores := []struct {
		name string
		open func(t *testing.T) Store
	}{
		{"memory", func(*testing.T) Store { return mem }},
		{"redis", func(t *testing.T) Store { return newTestRedis(t) }},
		// A generous timeout: a slow call under -race must not switch
		// the store to memory halfway through a lock test.
		{"resilient", func(t *testing.T) Store { return newTestResilient(t, newTestRedis(t), 5*time.Second) }},
		{"sealed_memory", func(t *testing.T) Store { return newTestSealed(t, NewMemory()) }},
		{"sealed_redis", func(t *testing.T) Store { return newTestSealed(t, newTestRedis(t)) }},
		{"resilient_degraded", func(t *testing.T) Store {
			r, err := OpenRedis("redis://" + closedPort(t) + "/0")
			if err != nil {
				t.Fatal(err)
			}
			return newTestResilient(t, r, time.Second)
		}},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			s := st.open(t)
			for _, b := range behaviour {
				t.Run(b.name, func(t *testing.T) {
					t.Parallel()
					b.run(t, s, t.Name())
				})
			}
		})
	}
}

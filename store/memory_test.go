package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

func TestMemoryMarkExpiry(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := NewMemory()
		defer m.Close()
		ctx := t.Context()
		steps := []struct {
			sleep time.Duration
			want  bool
		}{
			{0, true},
			{10*time.Second - 1, false}, // 1 ns before the mark expires
			{1, true},                   // exactly at its expiry: marked anew
			{5 * time.Second, false},
		}
		for i, s := range steps {
			time.Sleep(s.sleep)
			first, err := m.MarkOnce(ctx, "token", 10*time.Second)
			if err != nil || first != s.want {
				t.Fatalf("step %d: MarkOnce = %v, %v; want %v", i, first, err, s.want)
			}
		}
	})
}

func TestMemoryTakeRefill(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := NewMemory()
		defer m.Close()
		steps := []struct {
			sleep time.Duration
			ok    bool
			wait  time.Duration
		}{
			{0, true, 0},
			{0, true, 0},
			{0, false, time.Second}, // rate 1/s: the next token in 1 s
			{400 * time.Millisecond, false, 600 * time.Millisecond},
			{600 * time.Millisecond, true, 0},
			{10 * time.Second, true, 0}, // refilled to the burst, not beyond
			{0, true, 0},
			{0, false, time.Second},
		}
		for i, s := range steps {
			time.Sleep(s.sleep)
			ok, wait, err := m.Take(t.Context(), "ip", 1, 2)
			if err != nil || ok != s.ok || wait != s.wait {
				t.Fatalf("step %d: Take = %v, %v, %v; want %v, %v", i, ok, wait, err, s.ok, s.wait)
			}
		}
	})
}

func TestMemorySweep(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := NewMemoryConfig(MemoryConfig{SweepInterval: time.Minute})
		defer m.Close()
		ctx := t.Context()
		for i := range 100 {
			m.MarkOnce(ctx, fmt.Sprint("mark", i), 30*time.Second)
			m.Take(ctx, fmt.Sprint("bucket", i), 1, 10) // full again in 1 s
		}
		m.Put(ctx, "blob", []byte("kept"))
		lockCtx, abandon := context.WithCancel(ctx)
		unlock, _ := m.Lock(lockCtx, "lock", 2*time.Minute)
		defer unlock()
		abandon() // the lock expires 2 minutes from now
		if n := m.Len(); n != 202 {
			t.Fatalf("Len = %d; want 202", n)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := m.Len(); n != 2 {
			t.Fatalf("Len after a sweep = %d; want 2 (the blob and the lock)", n)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := m.Len(); n != 1 {
			t.Fatalf("Len after the lock expired = %d; want 1", n)
		}
	})
}

func TestMemoryFull(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		add     func(m *Memory, key string) error
		wantErr error
	}{
		{"marks_refused", func(m *Memory, key string) error {
			_, err := m.MarkOnce(context.Background(), key, time.Minute)
			return err
		}, ErrFull},
		{"blobs_refused", func(m *Memory, key string) error {
			return m.Put(context.Background(), key, []byte("x"))
		}, ErrFull},
		{"buckets_replaced", func(m *Memory, key string) error {
			_, _, err := m.Take(context.Background(), key, 0.01, 5)
			return err
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				const maxEntries = 2 * numShards
				m := NewMemoryConfig(MemoryConfig{MaxEntries: maxEntries})
				defer m.Close()
				var firstErr error
				var refused string
				for i := range 10 * maxEntries {
					if err := tt.add(m, fmt.Sprint("k", i)); err != nil {
						firstErr, refused = err, fmt.Sprint("k", i)
						break
					}
				}
				if !errors.Is(firstErr, tt.wantErr) {
					t.Fatalf("error when full = %v; want %v", firstErr, tt.wantErr)
				}
				if n := m.Len(); n > maxEntries {
					t.Fatalf("Len = %d; want at most %d", n, maxEntries)
				}
				if tt.wantErr == nil {
					return
				}
				// Expired marks make room again; blobs never expire.
				time.Sleep(time.Minute)
				err := tt.add(m, refused)
				if wantErr := map[bool]error{true: ErrFull, false: nil}[tt.name == "blobs_refused"]; !errors.Is(err, wantErr) {
					t.Fatalf("add after a minute error = %v; want %v", err, wantErr)
				}
			})
		})
	}
}

// TestMemoryLockExpiry: a lock is held past its ttl while its owner lives,
// and expires ttl after the owner's context ends without unlock.
func TestMemoryLockExpiry(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := NewMemory()
		defer m.Close()
		ownerCtx, die := context.WithCancel(t.Context())
		unlockA, err := m.Lock(ownerCtx, "cert", 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 3*30*time.Second)
		defer cancel()
		if _, err := m.Lock(ctx, "cert", time.Hour); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Lock of a lock held for 3×ttl error = %v; want DeadlineExceeded", err)
		}
		die()
		start := time.Now()
		unlockB, err := m.Lock(t.Context(), "cert", time.Hour) // waits for A's lock to expire
		if err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(start); waited < 30*time.Second || waited > 30*time.Second+lockPollMax {
			t.Fatalf("B got the lock %v after A's owner died; want 30s (+ one poll)", waited)
		}
		unlockA() // stale: must not release B's lock
		ctx, cancel = context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		if _, err := m.Lock(ctx, "cert", time.Hour); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Lock after a stale unlock error = %v; want DeadlineExceeded", err)
		}
		unlockB()
		unlockB() // twice is no error
		before := time.Now()
		unlockC, err := m.Lock(t.Context(), "cert", time.Hour)
		if err != nil {
			t.Fatalf("Lock after unlock: %v", err)
		}
		if waited := time.Since(before); waited != 0 {
			t.Errorf("Lock after unlock waited %v; want no wait", waited)
		}
		unlockC()
	})
}

func TestMemoryClosed(t *testing.T) {
	t.Parallel()
	m := NewMemory()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	ctx := t.Context()
	if _, err := m.MarkOnce(ctx, "k", time.Second); !errors.Is(err, ErrClosed) {
		t.Errorf("MarkOnce after Close error = %v; want ErrClosed", err)
	}
	if _, err := m.Get(ctx, "k"); !errors.Is(err, ErrClosed) {
		t.Errorf("Get after Close error = %v; want ErrClosed", err)
	}
}

func BenchmarkMemoryMarkOnce(b *testing.B) {
	m := NewMemory()
	defer m.Close()
	ctx := context.Background()
	keys := make([]string, 1<<16)
	for i := range keys {
		keys[i] = fmt.Sprint("token-", i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		m.MarkOnce(ctx, keys[i&(len(keys)-1)], time.Millisecond)
		i++
	}
}

func BenchmarkMemoryTake(b *testing.B) {
	m := NewMemory()
	defer m.Close()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		m.Take(ctx, "203.0.113.7", 1e9, 100)
	}
}

func BenchmarkMemoryTakeParallel(b *testing.B) {
	m := NewMemory()
	defer m.Close()
	ctx := context.Background()
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprint("198.51.100.", i)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			m.Take(ctx, keys[i&1023], 1e9, 100)
			i++
		}
	})
}

package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/maatproxy/maat/internal/testredis"
)

// newTestRedis starts a redis-server and returns a Redis store connected to
// it. Both are closed when the test ends.
func newTestRedis(t testing.TB) *Redis {
	t.Helper()
	srv := testredis.Start(t)
	r, err := NewRedis(t.Context(), srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// closedPort returns a loopback address where nothing listens.
func closedPort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestRedisExpiry(t *testing.T) {
	t.Parallel()
	r := newTestRedis(t)
	ctx := t.Context()
	if _, err := r.MarkOnce(ctx, "m", 90*time.Second+500*time.Microsecond); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Take(ctx, "b", 0.01, 10); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		key      string
		min, max time.Duration
	}{
		{"mark", prefixMark + "m", 80 * time.Second, 90*time.Second + time.Millisecond},
		// one token of ten taken at 0.01/s: full again in 100 s
		{"bucket", prefixRate + "b", 80 * time.Second, 100*time.Second + time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ttl, err := r.client.PTTL(ctx, tt.key).Result()
			if err != nil || ttl < tt.min || ttl > tt.max {
				t.Fatalf("PTTL %s = %v, %v; want in [%v, %v]", tt.key, ttl, err, tt.min, tt.max)
			}
		})
	}
}

// lockTTL is the ttl of the lock tests against a real server: long enough
// that a renewal every ttl/3 keeps up on a machine loaded far beyond its
// cores (the race detector, other test binaries), short enough for a test.
const lockTTL = 2 * time.Second

// TestRedisLockRenewal: a lock held for three times its ttl stays
// exclusive, because its owner renews it; released, it is taken at once.
func TestRedisLockRenewal(t *testing.T) {
	t.Parallel()
	r := newTestRedis(t)
	unlock, err := r.Lock(t.Context(), "renewed", lockTTL)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*lockTTL)
	defer cancel()
	if _, err := r.Lock(ctx, "renewed", lockTTL); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock of a lock held for 3×ttl error = %v; want DeadlineExceeded", err)
	}
	if ttl, err := r.client.PTTL(t.Context(), prefixLock+"renewed").Result(); err != nil || ttl <= 0 || ttl > lockTTL {
		t.Fatalf("PTTL after 3×ttl = %v, %v; want in (0, %v]", ttl, err, lockTTL)
	}
	unlock()
	unlock() // twice is no error
	ctx, cancel = context.WithTimeout(t.Context(), lockTTL/3)
	defer cancel()
	unlock2, err := r.Lock(ctx, "renewed", lockTTL)
	if err != nil {
		t.Fatalf("Lock right after unlock: %v", err)
	}
	unlock2()
}

// TestRedisLockOwnerGone: when the owner's context ends without unlock (the
// node died), renewal stops and another takes the lock once it expires, not
// before; an unlock that comes after its context ended still releases.
func TestRedisLockOwnerGone(t *testing.T) {
	t.Parallel()
	r := newTestRedis(t)
	tests := []struct {
		name   string
		unlock bool // the owner unlocks after its context ended
	}{
		{name: "vanished"},
		{name: "unlock_after_context", unlock: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			key := t.Name()
			ownerCtx, die := context.WithCancel(t.Context())
			unlockA, err := r.Lock(ownerCtx, key, lockTTL)
			if err != nil {
				t.Fatal(err)
			}
			die()
			if tt.unlock {
				unlockA()
				ctx, cancel := context.WithTimeout(t.Context(), lockTTL/3)
				defer cancel()
				unlockB, err := r.Lock(ctx, key, lockTTL)
				if err != nil {
					t.Fatalf("Lock after the owner unlocked: %v", err)
				}
				unlockB()
				return
			}
			start := time.Now()
			// Renewed at most ttl/3 ago: held for 2/3 of ttl at least.
			ctx, cancel := context.WithTimeout(t.Context(), lockTTL/4)
			defer cancel()
			if _, err := r.Lock(ctx, key, lockTTL); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Lock right after the owner died error = %v; want DeadlineExceeded", err)
			}
			ctx, cancel = context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			unlockB, err := r.Lock(ctx, key, time.Hour)
			if err != nil {
				t.Fatalf("Lock after the dead owner's lock expired: %v", err)
			}
			defer unlockB()
			if waited := time.Since(start); waited > lockTTL+lockPollMax+time.Second {
				t.Errorf("took the lock %v after its owner died; want within ttl %v", waited, lockTTL)
			}
			unlockA() // stale: must leave B's lock alone
			ctx, cancel = context.WithTimeout(t.Context(), 50*time.Millisecond)
			defer cancel()
			if _, err := r.Lock(ctx, key, time.Hour); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Lock after a stale unlock error = %v; want DeadlineExceeded", err)
			}
		})
	}
}

func TestNewRedisErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, url string
	}{
		{"bad_scheme", "http://127.0.0.1:6379"},
		{"nothing_listening", "redis://" + closedPort(t) + "/0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			if r, err := NewRedis(ctx, tt.url); err == nil {
				r.Close()
				t.Fatalf("NewRedis(%q) succeeded; want an error", tt.url)
			}
		})
	}
}

func BenchmarkRedisTake(b *testing.B) {
	r := newTestRedis(b)
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := r.Take(ctx, "203.0.113.7", 1e9, 100); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRedisMarkOnce(b *testing.B) {
	r := newTestRedis(b)
	ctx := b.Context()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := r.MarkOnce(ctx, strconv.Itoa(i), time.Minute); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// TestRedisLogger: go-redis's messages reach the edge's structured log as
// warnings, not its own standard-error lines.
func TestRedisLogger(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	redisLogger{slog.New(slog.NewJSONHandler(&buf, nil))}.Printf(context.Background(), "redis: pool: %s after %d tries", "dial tcp: refused", 3)
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("%v: %s", err, buf.Bytes())
	}
	if rec["level"] != "WARN" || rec["msg"] != "redis" || rec["component"] != "redis" || rec["message"] != "redis: pool: dial tcp: refused after 3 tries" {
		t.Errorf("record %v", rec)
	}
}

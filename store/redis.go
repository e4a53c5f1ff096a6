package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis is a Store kept in a Redis (or Valkey) server, shared by every node
// that uses the same server. Its methods are safe for concurrent use.
type Redis struct {
	client *redis.Client
	take   *redis.Script
	unlock *redis.Script
	renew  *redis.Script
}

// takeScript is the token bucket. KEYS[1] is the bucket, ARGV[1] the rate in
// tokens per second, ARGV[2] the burst, ARGV[3] the cap of waits and expiries
// in milliseconds. The clock is the server's (TIME), the
// same for every node. It returns {taken (0 or 1), microseconds to wait}.
const takeScript = `
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local maxms = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local v = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(v[1])
local ts = tonumber(v[2])
if tokens == nil or ts == nil then
  tokens = burst
  ts = now
end
if now > ts then
  tokens = math.min(burst, tokens + (now - ts) * rate / 1000000)
end
local taken = 0
local wait = 0
if tokens >= 1 then
  tokens = tokens - 1
  taken = 1
else
  wait = math.min(math.ceil((1 - tokens) * 1000000 / rate), maxms * 1000)
end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens), 'ts', string.format('%d', now))
redis.call('PEXPIRE', KEYS[1], string.format('%d', math.min(math.ceil((burst - tokens) * 1000 / rate) + 1, maxms)))
return {taken, wait}
`

// unlockScript deletes KEYS[1] if it still holds ARGV[1].
const unlockScript = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`

// renewScript sets the expiry of KEYS[1] to ARGV[2] milliseconds if it still
// holds ARGV[1]; it returns 1 if so, 0 if the lock was lost.
const renewScript = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`

// lockCallTimeout bounds a renewal of a lock and its release: background
// commands that no request waits for.
const lockCallTimeout = 5 * time.Second

// NewRedis connects to the Redis server at url (redis://[user:password@]host:port/db,
// rediss:// for TLS, or unix://path, as redis.ParseURL reads them) and checks
// that it answers.
func NewRedis(ctx context.Context, url string) (*Redis, error) {
	r, err := OpenRedis(url)
	if err != nil {
		return nil, err
	}
	if err := r.Ping(ctx); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// OpenRedis returns a Redis store for the server at url (as [NewRedis] reads
// it) without contacting the server: connections are made on first use. A
// node that must start while Redis is down opens it so and wraps it in a
// [Resilient] store.
//
// Every command is bounded by its context's deadline, so that a caller's
// timeout holds even when the server has stopped answering.
func OpenRedis(url string) (*Redis, error) {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("store: redis url: %w", err)
	}
	opts.ContextTimeoutEnabled = true
	return &Redis{
		client: redis.NewClient(opts),
		take:   redis.NewScript(takeScript),
		unlock: redis.NewScript(unlockScript),
		renew:  redis.NewScript(renewScript),
	}, nil
}

// Ping checks that the server answers.
func (r *Redis) Ping(ctx context.Context) error {
	if err := r.client.Ping(ctx).Err(); err != nil {
		return wrap(ctx, err)
	}
	return nil
}

// Close closes the connections to the server.
func (r *Redis) Close() error { return r.client.Close() }

// milliseconds rounds d up to whole milliseconds, the precision of PX.
func milliseconds(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// wrap returns the error of a command: ErrClosed, or err with the
// package's prefix, or rather ctx's own error when ctx is done (a command
// cut by ctx's deadline fails with an I/O timeout, possibly before ctx
// notices), so that callers can tell their deadline from a failure.
func wrap(ctx context.Context, err error) error {
	if cerr := ctxDone(ctx); cerr != nil {
		err = cerr
	}
	if errors.Is(err, redis.ErrClosed) {
		return ErrClosed
	}
	return fmt.Errorf("store: redis: %w", err)
}

// ctxDone returns ctx's error if ctx is done or its deadline has passed.
func ctxDone(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// MarkOnce implements Store.
func (r *Redis) MarkOnce(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	if err := checkTTL(ttl); err != nil {
		return false, err
	}
	err := r.client.Do(ctx, "set", prefixMark+key, "1", "px", milliseconds(ttl), "nx").Err()
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, redis.Nil):
		return false, nil
	default:
		return false, wrap(ctx, err)
	}
}

// Take implements Store.
func (r *Redis) Take(ctx context.Context, key string, rate float64, burst int) (bool, time.Duration, error) {
	if err := checkLimit(rate, burst); err != nil {
		return false, 0, err
	}
	res, err := r.take.Run(ctx, r.client, []string{prefixRate + key}, rate, burst, maxWait.Milliseconds()).Int64Slice()
	if err != nil {
		return false, 0, wrap(ctx, err)
	}
	if len(res) != 2 {
		return false, 0, fmt.Errorf("store: redis: token bucket script returned %d values", len(res))
	}
	return res[0] == 1, time.Duration(res[1]) * time.Microsecond, nil
}

// Get implements Store.
func (r *Redis) Get(ctx context.Context, key string) ([]byte, error) {
	data, err := r.client.Get(ctx, prefixBlob+key).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, wrap(ctx, err)
	}
	return data, nil
}

// Put implements Store.
func (r *Redis) Put(ctx context.Context, key string, data []byte) error {
	if err := r.client.Set(ctx, prefixBlob+key, data, 0).Err(); err != nil {
		return wrap(ctx, err)
	}
	return nil
}

// Delete implements Store.
func (r *Redis) Delete(ctx context.Context, key string) error {
	if err := r.client.Del(ctx, prefixBlob+key).Err(); err != nil {
		return wrap(ctx, err)
	}
	return nil
}

// Lock implements Store. While the lock is held, a goroutine that belongs
// to it renews its expiry to ttl every ttl/3, with a compare-and-extend
// script that touches the key only if it still holds this lock's random
// token; unlock stops that goroutine, waits for it, and deletes the key if it
// still holds the token (with a context without ctx's cancellation, so that
// a lock whose ctx ended is still released). When ctx is done the renewal
// stops and the lock expires within ttl, unless unlock comes first: a node
// that dies holding a lock holds it at most ttl longer. A renewal that finds
// the lock gone (Redis lost it, or the owner was stalled past ttl and
// another took it) stops; the owner is not told. Call unlock exactly when
// done: a lock whose unlock is never called and whose ctx never ends is
// renewed for ever.
func (r *Redis) Lock(ctx context.Context, key string, ttl time.Duration) (func(), error) {
	if err := checkTTL(ttl); err != nil {
		return nil, err
	}
	k := prefixLock + key
	token := newLockToken()
	for delay := lockPollMin; ; {
		ok, err := r.tryLock(ctx, k, token, ttl)
		if err != nil {
			return nil, err
		}
		if ok {
			return r.hold(ctx, k, token, ttl), nil
		}
		if delay, err = waitLock(ctx, delay); err != nil {
			return nil, err
		}
	}
}

// newLockToken returns the random value that identifies one holder of a
// lock.
func newLockToken() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// tryLock sets the lock key k to token if it is free. An error is ctx's when
// ctx is done.
func (r *Redis) tryLock(ctx context.Context, k, token string, ttl time.Duration) (bool, error) {
	err := r.client.Do(ctx, "set", k, token, "px", milliseconds(ttl), "nx").Err()
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, redis.Nil):
		return false, nil
	default:
		return false, wrap(ctx, err)
	}
}

// hold starts the renewal of the lock k held with token, and returns its
// unlock.
func (r *Redis) hold(ctx context.Context, k, token string, ttl time.Duration) func() {
	lctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.renewLoop(lctx, k, token, ttl)
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			stop()
			<-done
			uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lockCallTimeout)
			defer cancel()
			// A failure leaves the lock to expire after ttl; there is
			// nobody to tell.
			_ = r.unlock.Run(uctx, r.client, []string{k}, token).Err()
		})
	}
}

// renewLoop extends the lock k to ttl every ttl/3 until ctx is done or the
// lock is found lost. A renewal may take until the lock would expire (at
// most lockCallTimeout); one that fails (the server does not answer) is
// tried again at the next tick, so a lock survives a slow server for up to
// ttl.
func (r *Redis) renewLoop(ctx context.Context, k, token string, ttl time.Duration) {
	every := max(ttl/3, time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	expires := time.Now().Add(ttl)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		rctx, cancel := context.WithTimeout(ctx, min(lockCallTimeout, max(expires.Sub(start), every)))
		held, err := r.renew.Run(rctx, r.client, []string{k}, token, milliseconds(ttl)).Int()
		cancel()
		switch {
		case err != nil:
		case held == 0:
			return
		default:
			expires = start.Add(ttl)
		}
	}
}

// LogRedisTo sends go-redis's own messages (reconnects, pool and
// handshake trouble), which it otherwise prints to the standard error
// through a process-wide logger, to l at level Warn with the attribute
// component=redis. The setting is process-wide, as go-redis's is.
func LogRedisTo(l *slog.Logger) { redis.SetLogger(redisLogger{l}) }

type redisLogger struct{ l *slog.Logger }

func (r redisLogger) Printf(ctx context.Context, format string, v ...any) {
	r.l.LogAttrs(ctx, slog.LevelWarn, "redis", slog.String("component", "redis"), slog.String("message", fmt.Sprintf(format, v...)))
}

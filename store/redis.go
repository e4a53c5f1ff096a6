package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis is a Store kept in a Redis (or Valkey) server, shared by every node
// that uses the same server. Its methods are safe for concurrent use.
type Redis struct {
	client *redis.Client
	take   *redis.Script
	unlock *redis.Script
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

// NewRedis connects to the Redis server at url (redis://[user:password@]host:port/db,
// rediss:// for TLS, or unix://path, as redis.ParseURL reads them) and checks
// that it answers.
func NewRedis(ctx context.Context, url string) (*Redis, error) {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("store: redis url: %w", err)
	}
	client := redis.NewClient(opts)
	if err := client.Ping(ctx).Err(); err != nil {
		client.Close()
		return nil, fmt.Errorf("store: redis: %w", err)
	}
	return &Redis{
		client: client,
		take:   redis.NewScript(takeScript),
		unlock: redis.NewScript(unlockScript),
	}, nil
}

// Close closes the connections to the server.
func (r *Redis) Close() error { return r.client.Close() }

// milliseconds rounds d up to whole milliseconds, the precision of PX.
func milliseconds(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

func wrap(err error) error {
	if errors.Is(err, redis.ErrClosed) {
		return ErrClosed
	}
	return fmt.Errorf("store: redis: %w", err)
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
		return false, wrap(err)
	}
}

// Take implements Store.
func (r *Redis) Take(ctx context.Context, key string, rate float64, burst int) (bool, time.Duration, error) {
	if err := checkLimit(rate, burst); err != nil {
		return false, 0, err
	}
	res, err := r.take.Run(ctx, r.client, []string{prefixRate + key}, rate, burst, maxWait.Milliseconds()).Int64Slice()
	if err != nil {
		return false, 0, wrap(err)
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
		return nil, wrap(err)
	}
	return data, nil
}

// Put implements Store.
func (r *Redis) Put(ctx context.Context, key string, data []byte) error {
	if err := r.client.Set(ctx, prefixBlob+key, data, 0).Err(); err != nil {
		return wrap(err)
	}
	return nil
}

// Delete implements Store.
func (r *Redis) Delete(ctx context.Context, key string) error {
	if err := r.client.Del(ctx, prefixBlob+key).Err(); err != nil {
		return wrap(err)
	}
	return nil
}

// Lock implements Store. Unlock uses a context without ctx's cancellation, so
// that a lock taken under a request's context is still released after the
// request ends.
func (r *Redis) Lock(ctx context.Context, key string, ttl time.Duration) (func(), error) {
	if err := checkTTL(ttl); err != nil {
		return nil, err
	}
	var b [16]byte
	rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	k := prefixLock + key
	for delay := lockPollMin; ; {
		err := r.client.Do(ctx, "set", k, token, "px", milliseconds(ttl), "nx").Err()
		if err == nil {
			break
		}
		if !errors.Is(err, redis.Nil) {
			return nil, wrap(err)
		}
		if delay, err = waitLock(ctx, delay); err != nil {
			return nil, err
		}
	}
	unlockCtx := context.WithoutCancel(ctx)
	return func() {
		// A failure leaves the lock to expire after ttl; there is nobody
		// to tell.
		_ = r.unlock.Run(unlockCtx, r.client, []string{k}, token).Err()
	}, nil
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

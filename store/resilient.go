package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultTimeout is how long a Resilient store waits for Redis in one call
// when ResilientConfig.Timeout is zero. A Redis on the same network answers
// in well under a millisecond; past this the call is answered from memory.
const DefaultTimeout = 50 * time.Millisecond

// DefaultProbeInterval is how often [Resilient.Run] checks Redis when
// ResilientConfig.ProbeInterval is zero.
const DefaultProbeInterval = time.Second

const (
	// maxPending bounds the marks and blob changes a degraded store keeps
	// to write back; beyond it, expired marks are forgotten first, then new
	// ones are not written back.
	maxPending = 1 << 20
	// writeBackBatch is the number of commands sent in one pipeline when
	// writing back, and writeBackTimeout bounds one such pipeline.
	writeBackBatch   = 1024
	writeBackTimeout = 5 * time.Second
	// maxWriteBackPasses bounds the passes that write back blobs in one
	// recovery: each pass writes what degraded calls changed during the
	// previous one, until none is left and the store switches back.
	maxWriteBackPasses = 8
)

// ResilientConfig configures a [Resilient] store. The zero value is ready to
// use.
type ResilientConfig struct {
	// Timeout bounds each call to Redis; a call that takes longer is
	// answered from memory and the store turns degraded. If zero,
	// DefaultTimeout is used.
	Timeout time.Duration
	// ProbeInterval is how often Run pings Redis, to notice that it left
	// while no call is made, and that it came back. If zero,
	// DefaultProbeInterval is used.
	ProbeInterval time.Duration
	// OnStateChange, if not nil, is called once per change of state, in
	// the order of the changes, from the goroutine of Run: degraded is
	// true when Redis has failed (err says how) and false when the store
	// uses Redis again and has written back what changed meanwhile (err is
	// nil). It must not block.
	OnStateChange func(degraded bool, err error)
}

// Validate reports every problem of the configuration at once; each wraps
// ErrInvalid.
func (c *ResilientConfig) Validate() error {
	var errs []error
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("%w: timeout %v is negative", ErrInvalid, c.Timeout))
	}
	if c.ProbeInterval < 0 {
		errs = append(errs, fmt.Errorf("%w: probe interval %v is negative", ErrInvalid, c.ProbeInterval))
	}
	return errors.Join(errs...)
}

func (c *ResilientConfig) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return DefaultTimeout
}

func (c *ResilientConfig) probeInterval() time.Duration {
	if c.ProbeInterval > 0 {
		return c.ProbeInterval
	}
	return DefaultProbeInterval
}

// Resilient is a Store that keeps serving while Redis is away. Calls go to
// Redis, each bounded by a short timeout; when one fails the store turns
// degraded and answers every call from memory until [Resilient.Run] finds
// Redis answering again, writes back what changed meanwhile, and switches
// back. No call fails because Redis is down.
//
// While degraded:
//   - MarkOnce marks in memory. Marks this node set while Redis answered
//     are mirrored in memory too, and MarkOnce refuses a mark memory holds,
//     so a token redeemed on this node is refused here during the outage
//     and after it, even by a Redis that came back empty. A token redeemed on
//     another node during the outage can be redeemed once more here: nodes
//     cut off from each other cannot agree. On recovery every mark set
//     during the outage is written to Redis with SET NX and its remaining
//     ttl, so that no other node accepts a replay after it.
//   - Take counts in memory, in buckets that start full. Counters are not
//     written back: on recovery Redis's buckets, as the outage left them,
//     count again and the memory ones expire unused. A client may get one
//     extra burst per node from an outage, no more.
//   - Get reads the blobs this node wrote or read while Redis answered
//     (mirrored in memory); Put and Delete change memory and are written
//     back on recovery (last writer wins), so a certificate ordered during
//     an outage reaches the other nodes.
//   - Lock takes an in-memory lock: during an outage locks exclude within
//     this node only.
//
// A Redis that restarts without persistence comes back empty: marks other
// nodes set before the outage are gone from it. Run that Redis with
// persistence (appendonly) when that matters.
type Resilient struct {
	redis *Redis
	mem   *Memory
	cfg   ResilientConfig
	wake  chan struct{} // tells Run that a change waits to be reported (buffered, 1)

	// degraded is written under mu, read without it on the fast path.
	degraded atomic.Bool

	mu      sync.Mutex
	since   time.Time
	lastErr error
	changes []stateChange        // to report, oldest first
	marks   map[string]time.Time // set in memory while degraded: key → expiry
	blobs   map[string]blobChange
}

type stateChange struct {
	degraded bool
	err      error
}

// blobChange is a Put (data) or a Delete (deleted) made while degraded.
type blobChange struct {
	data    []byte
	deleted bool
}

// NewResilient returns a store that uses r and falls back to mem; it takes
// ownership of both and closes them on Close. It starts using Redis and
// turns degraded at the first failed call; the caller must run
// [Resilient.Run] for it to probe, report and recover.
func NewResilient(r *Redis, mem *Memory, cfg ResilientConfig) (*Resilient, error) {
	err := cfg.Validate()
	if r == nil || mem == nil {
		err = errors.Join(err, fmt.Errorf("%w: a Redis and a Memory store are needed", ErrInvalid))
	}
	if err != nil {
		return nil, err
	}
	return &Resilient{
		redis: r,
		mem:   mem,
		cfg:   cfg,
		wake:  make(chan struct{}, 1),
		since: time.Now(),
		marks: map[string]time.Time{},
		blobs: map[string]blobChange{},
	}, nil
}

// Close closes the Redis and the Memory store. Call it after Run has
// returned.
func (s *Resilient) Close() error {
	return errors.Join(s.redis.Close(), s.mem.Close())
}

// Health reports whether the store uses Redis (ok), since when it is in its
// current state, and, when degraded, the error that made it so.
func (s *Resilient) Health() (ok bool, since time.Time, lastErr error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.degraded.Load(), s.since, s.lastErr
}

// Run probes Redis every ProbeInterval (and once at once), reports state
// changes to OnStateChange, and switches back to Redis once it answers and
// the changes made meanwhile are written back. It blocks until ctx is done
// and then returns nil; it has no other way out.
func (s *Resilient) Run(ctx context.Context) error {
	t := time.NewTicker(s.cfg.probeInterval())
	defer t.Stop()
	for {
		s.probe(ctx)
		s.report()
		for wait := true; wait; {
			select {
			case <-ctx.Done():
				s.report()
				return nil
			case <-s.wake:
				s.report()
			case <-t.C:
				wait = false
			}
		}
	}
}

// probe pings Redis: it turns the store degraded if Redis fails, and
// recovers it if Redis answers.
func (s *Resilient) probe(ctx context.Context) {
	pctx, cancel := context.WithTimeout(ctx, s.cfg.timeout())
	err := s.redis.Ping(pctx)
	cancel()
	switch {
	case ctx.Err() != nil:
	case err != nil:
		s.degrade(err)
	case s.degraded.Load():
		s.recover(ctx)
	}
}

// report calls OnStateChange for each change not yet reported.
func (s *Resilient) report() {
	s.mu.Lock()
	changes := s.changes
	s.changes = nil
	s.mu.Unlock()
	if s.cfg.OnStateChange == nil {
		return
	}
	for _, c := range changes {
		s.cfg.OnStateChange(c.degraded, c.err)
	}
}

// setState records a change of state; s.mu is held.
func (s *Resilient) setState(degraded bool, err error) {
	s.degraded.Store(degraded)
	s.since = time.Now()
	s.lastErr = err
	s.changes = append(s.changes, stateChange{degraded, err})
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// degrade turns the store degraded because of err, unless it is already.
func (s *Resilient) degrade(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.degraded.Load() {
		s.setState(true, err)
	}
}

// recover writes back what changed while degraded and switches back to
// Redis. Blobs are written first, in passes until none is left, and the
// store switches back only then, so that no Get from Redis misses a blob put
// during the outage. Marks are taken at the switch and written after it:
// the marks set during the outage stay in memory, where MarkOnce looks too,
// so this node refuses their replay meanwhile, and their number does not
// hold the switch back however fast calls come. If a write fails, what was
// not written waits for the next recovery and the store stays (or turns
// again) degraded.
func (s *Resilient) recover(ctx context.Context) {
	for range maxWriteBackPasses {
		s.mu.Lock()
		blobs := s.blobs
		if len(blobs) == 0 {
			marks := s.marks
			s.marks = map[string]time.Time{}
			s.setState(false, nil)
			s.mu.Unlock()
			if err := s.writeBack(ctx, marks, nil); err != nil {
				s.mu.Lock()
				s.keep(marks, nil)
				s.mu.Unlock()
				s.degrade(err)
			}
			return
		}
		s.blobs = map[string]blobChange{}
		s.mu.Unlock()
		if err := s.writeBack(ctx, nil, blobs); err != nil {
			s.mu.Lock()
			s.keep(nil, blobs)
			s.lastErr = err
			s.mu.Unlock()
			return
		}
	}
}

// keep puts back changes that were not written; a change made since wins.
// s.mu is held.
func (s *Resilient) keep(marks map[string]time.Time, blobs map[string]blobChange) {
	for k, exp := range marks {
		if _, ok := s.marks[k]; !ok {
			s.marks[k] = exp
		}
	}
	for k, b := range blobs {
		if _, ok := s.blobs[k]; !ok {
			s.blobs[k] = b
		}
	}
}

// writeBack writes marks (SET NX with their remaining ttl: a mark another
// node set meanwhile stays as it is) and blob changes to Redis, in
// pipelines of writeBackBatch commands. Writing twice is harmless, so a
// failed batch is simply written again later.
func (s *Resilient) writeBack(ctx context.Context, marks map[string]time.Time, blobs map[string]blobChange) error {
	now := time.Now()
	pipe := s.redis.client.Pipeline()
	flush := func() error {
		if pipe.Len() == 0 {
			return nil
		}
		wctx, cancel := context.WithTimeout(ctx, writeBackTimeout)
		defer cancel()
		cmds, _ := pipe.Exec(wctx)
		for _, c := range cmds {
			if err := c.Err(); err != nil && !errors.Is(err, redis.Nil) { // Nil: SET NX found the mark set
				return wrap(wctx, err)
			}
		}
		return nil
	}
	for k, exp := range marks {
		left := exp.Sub(now)
		if left <= 0 {
			continue
		}
		pipe.Do(ctx, "set", prefixMark+k, "1", "px", milliseconds(left), "nx")
		if pipe.Len() >= writeBackBatch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	for k, b := range blobs {
		if b.deleted {
			pipe.Del(ctx, prefixBlob+k)
		} else {
			pipe.Set(ctx, prefixBlob+k, b.data, 0)
		}
		if pipe.Len() >= writeBackBatch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// redisCall runs call against Redis, bounded by the configured timeout,
// unless the store is degraded. It returns whether call answered (done) and,
// if so, call's error; a failure of Redis turns the store degraded and is
// not returned. When the caller's ctx ends, or the store is closed, that is
// the error, and done is true.
func (s *Resilient) redisCall(ctx context.Context, call func(ctx context.Context) error) (done bool, err error) {
	if s.degraded.Load() {
		return false, nil
	}
	tctx, cancel := context.WithTimeout(ctx, s.cfg.timeout())
	err = call(tctx)
	cancel()
	switch {
	case err == nil:
		return true, nil
	case ctxDone(ctx) != nil: // the caller's context, not the timeout
		return true, ctxDone(ctx)
	case errors.Is(err, ErrClosed):
		return true, err
	}
	s.degrade(err)
	return false, nil
}

// degradedCall runs call with s.mu held if the store is degraded, and
// reports whether it did; when the store has recovered meanwhile it returns
// false and the caller tries Redis again.
func (s *Resilient) degradedCall(call func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.degraded.Load() {
		return false
	}
	call()
	return true
}

// remember records a mark set in memory while degraded; s.mu is held.
func (s *Resilient) remember(key string, ttl time.Duration) {
	if len(s.marks) >= maxPending {
		now := time.Now()
		for k, exp := range s.marks {
			if !now.Before(exp) {
				delete(s.marks, k)
			}
		}
		if len(s.marks) >= maxPending {
			return
		}
	}
	s.marks[key] = time.Now().Add(ttl)
}

// MarkOnce implements Store.
func (s *Resilient) MarkOnce(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	if err := checkTTL(ttl); err != nil {
		return false, err
	}
	for {
		var first bool
		done, err := s.redisCall(ctx, func(ctx context.Context) (err error) {
			first, err = s.redis.MarkOnce(ctx, key, ttl)
			return err
		})
		if done {
			if err != nil {
				return false, err
			}
			// A mark this node set is mirrored in memory, so that
			// this node refuses its replay while Redis is away, and
			// after, should Redis come back empty: a mark memory holds
			// was set first through this node within its ttl, so a
			// second first from Redis is a replay. (Marks Redis
			// refused are not mirrored: a concurrent first's mirror
			// would then find them.) A full memory store only loses
			// the mirror.
			if first {
				if again, err := s.mem.MarkOnce(ctx, key, ttl); err == nil && !again {
					first = false
				}
			}
			return first, nil
		}
		if s.degradedCall(func() {
			first, err = s.mem.MarkOnce(ctx, key, ttl)
			if err == nil && first {
				s.remember(key, ttl)
			}
		}) {
			return first, err
		}
	}
}

// Take implements Store.
func (s *Resilient) Take(ctx context.Context, key string, rate float64, burst int) (bool, time.Duration, error) {
	if err := checkLimit(rate, burst); err != nil {
		return false, 0, err
	}
	var ok bool
	var wait time.Duration
	done, err := s.redisCall(ctx, func(ctx context.Context) (err error) {
		ok, wait, err = s.redis.Take(ctx, key, rate, burst)
		return err
	})
	if done {
		return ok, wait, err
	}
	return s.mem.Take(ctx, key, rate, burst)
}

// Get implements Store.
func (s *Resilient) Get(ctx context.Context, key string) ([]byte, error) {
	var data []byte
	done, err := s.redisCall(ctx, func(ctx context.Context) (err error) {
		data, err = s.redis.Get(ctx, key)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		return err
	})
	if !done {
		return s.mem.Get(ctx, key)
	}
	if err != nil {
		return nil, err
	}
	// Mirrored for a later outage; a full memory store only loses that.
	if data == nil {
		_ = s.mem.Delete(ctx, key)
		return nil, ErrNotFound
	}
	_ = s.mem.Put(ctx, key, data)
	return data, nil
}

// Put implements Store.
func (s *Resilient) Put(ctx context.Context, key string, data []byte) error {
	return s.change(ctx, key, blobChange{data: data})
}

// Delete implements Store.
func (s *Resilient) Delete(ctx context.Context, key string) error {
	return s.change(ctx, key, blobChange{deleted: true})
}

// change makes a Put or a Delete: in Redis and mirrored in memory, or in
// memory and remembered for the write-back.
func (s *Resilient) change(ctx context.Context, key string, c blobChange) error {
	apply := func(st Store) error {
		if c.deleted {
			return st.Delete(ctx, key)
		}
		return st.Put(ctx, key, c.data)
	}
	for {
		done, err := s.redisCall(ctx, func(ctx context.Context) error {
			if c.deleted {
				return s.redis.Delete(ctx, key)
			}
			return s.redis.Put(ctx, key, c.data)
		})
		if done {
			if err == nil {
				_ = apply(s.mem)
			}
			return err
		}
		if s.degradedCall(func() {
			err = apply(s.mem)
			if _, known := s.blobs[key]; err == nil && (known || len(s.blobs) < maxPending) {
				if !c.deleted {
					c.data = append([]byte(nil), c.data...)
				}
				s.blobs[key] = c
			}
		}) {
			return err
		}
	}
}

// Lock implements Store. A lock taken in Redis is renewed as [Redis.Lock]
// says (renewals are background work: the configured timeout, meant for
// requests, does not bound them); if Redis fails while the lock is awaited,
// it is awaited in memory instead.
func (s *Resilient) Lock(ctx context.Context, key string, ttl time.Duration) (func(), error) {
	if err := checkTTL(ttl); err != nil {
		return nil, err
	}
	k := prefixLock + key
	token := newLockToken()
	for delay := lockPollMin; ; {
		var acquired bool
		done, err := s.redisCall(ctx, func(ctx context.Context) (err error) {
			acquired, err = s.redis.tryLock(ctx, k, token, ttl)
			return err
		})
		if !done {
			return s.mem.Lock(ctx, key, ttl)
		}
		if err != nil {
			return nil, err
		}
		if acquired {
			return s.redis.hold(ctx, k, token, ttl), nil
		}
		if delay, err = waitLock(ctx, delay); err != nil {
			return nil, err
		}
	}
}

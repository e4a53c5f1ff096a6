package store

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMaxEntries is the number of entries a Memory store holds at most
// when MemoryConfig.MaxEntries is zero: about 100 MB of marks and buckets.
const DefaultMaxEntries = 1 << 20

// DefaultSweepInterval is how often a Memory store removes expired entries
// when MemoryConfig.SweepInterval is zero.
const DefaultSweepInterval = time.Minute

// numShards is the number of independently locked parts of a Memory store.
const numShards = 64

// MemoryConfig configures a Memory store. The zero value is ready to use.
type MemoryConfig struct {
	// MaxEntries bounds the number of marks, buckets, blobs and locks held
	// together. If zero, DefaultMaxEntries is used. When the store is full
	// and no entry has expired, a new bucket replaces an old one (a rate
	// limit forgets a client rather than refusing everyone), and a new mark,
	// blob or lock is refused with ErrFull (a replay is never let through).
	MaxEntries int
	// SweepInterval is how often expired entries are removed in the
	// background. If zero, DefaultSweepInterval is used.
	SweepInterval time.Duration
}

// Memory is a Store held in the memory of one process. Its methods are safe
// for concurrent use; they never block on I/O, and only Lock waits.
type Memory struct {
	seed     maphash.Seed
	epoch    time.Time // the store's clock is the monotonic time since epoch
	perShard int
	shards   [numShards]shard
	lockID   atomic.Uint64
	closed   atomic.Bool
	stop     chan struct{}
	done     chan struct{}
}

type shard struct {
	mu      sync.Mutex
	marks   map[string]time.Duration // expiry
	buckets map[string]bucket
	blobs   map[string][]byte
	locks   map[string]heldLock
	// nextExpiry is no later than the earliest expiry in the shard, so that
	// a sweep before it would find nothing to remove.
	nextExpiry time.Duration
}

type bucket struct {
	tokens float64
	last   time.Duration // when tokens was computed
	full   time.Duration // when the bucket is full again, and can be forgotten
}

type heldLock struct {
	id     uint64
	expiry time.Duration
}

// NewMemory returns a Memory store with the default configuration. Close
// stops its background sweeper.
func NewMemory() *Memory { return NewMemoryConfig(MemoryConfig{}) }

// NewMemoryConfig returns a Memory store configured by cfg.
func NewMemoryConfig(cfg MemoryConfig) *Memory {
	maxEntries := cfg.MaxEntries
	if maxEntries <= 0 {
		maxEntries = DefaultMaxEntries
	}
	interval := cfg.SweepInterval
	if interval <= 0 {
		interval = DefaultSweepInterval
	}
	m := &Memory{
		seed:     maphash.MakeSeed(),
		epoch:    time.Now(),
		perShard: max(1, maxEntries/numShards),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	for i := range m.shards {
		s := &m.shards[i]
		s.marks = make(map[string]time.Duration)
		s.buckets = make(map[string]bucket)
		s.blobs = make(map[string][]byte)
		s.locks = make(map[string]heldLock)
	}
	go m.sweeper(interval)
	return m
}

// Close stops the background sweeper. Later calls return ErrClosed.
func (m *Memory) Close() error {
	if m.closed.Swap(true) {
		return nil
	}
	close(m.stop)
	<-m.done
	return nil
}

// Len returns the number of entries held, expired ones not yet swept
// included.
func (m *Memory) Len() int {
	n := 0
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		n += s.len()
		s.mu.Unlock()
	}
	return n
}

func (m *Memory) sweeper(interval time.Duration) {
	defer close(m.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			for i := range m.shards {
				s := &m.shards[i]
				s.mu.Lock()
				s.sweep(m.now())
				s.mu.Unlock()
			}
		}
	}
}

func (m *Memory) now() time.Duration { return time.Since(m.epoch) }

func (m *Memory) shard(key string) *shard {
	return &m.shards[maphash.String(m.seed, key)%numShards]
}

func (m *Memory) check(ctx context.Context) error {
	if m.closed.Load() {
		return ErrClosed
	}
	return ctx.Err()
}

// MarkOnce implements Store.
func (m *Memory) MarkOnce(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	if err := m.check(ctx); err != nil {
		return false, err
	}
	if err := checkTTL(ttl); err != nil {
		return false, err
	}
	s := m.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := m.now()
	exp, ok := s.marks[key]
	if ok && now < exp {
		return false, nil
	}
	if !ok && !s.room(now, m.perShard, false) {
		return false, ErrFull
	}
	s.marks[key] = now + ttl
	s.noteExpiry(now + ttl)
	return true, nil
}

// Take implements Store.
func (m *Memory) Take(ctx context.Context, key string, rate float64, burst int) (bool, time.Duration, error) {
	if err := m.check(ctx); err != nil {
		return false, 0, err
	}
	if err := checkLimit(rate, burst); err != nil {
		return false, 0, err
	}
	s := m.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := m.now()
	b, ok := s.buckets[key]
	if ok {
		b.tokens = refill(b.tokens, rate, burst, now-b.last)
	} else {
		if !s.room(now, m.perShard, true) {
			return false, 0, ErrFull
		}
		b.tokens = float64(burst)
	}
	b.last = now
	var wait time.Duration
	took := b.tokens >= 1
	if took {
		b.tokens--
	} else {
		wait = seconds((1 - b.tokens) / rate)
	}
	b.full = now + seconds((float64(burst)-b.tokens)/rate)
	s.buckets[key] = b
	s.noteExpiry(b.full)
	return took, wait, nil
}

// Get implements Store.
func (m *Memory) Get(ctx context.Context, key string) ([]byte, error) {
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	s := m.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	data, ok := s.blobs[key]
	if !ok {
		return nil, ErrNotFound
	}
	return append([]byte(nil), data...), nil
}

// Put implements Store.
func (m *Memory) Put(ctx context.Context, key string, data []byte) error {
	if err := m.check(ctx); err != nil {
		return err
	}
	data = append(make([]byte, 0, len(data)), data...)
	s := m.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.blobs[key]; !ok && !s.room(m.now(), m.perShard, false) {
		return ErrFull
	}
	s.blobs[key] = data
	return nil
}

// Delete implements Store.
func (m *Memory) Delete(ctx context.Context, key string) error {
	if err := m.check(ctx); err != nil {
		return err
	}
	s := m.shard(key)
	s.mu.Lock()
	delete(s.blobs, key)
	s.mu.Unlock()
	return nil
}

// Lock implements Store. The lock holds no timer while its owner lives:
// its expiry is set, ttl ahead, only when ctx is done (context.AfterFunc).
func (m *Memory) Lock(ctx context.Context, key string, ttl time.Duration) (func(), error) {
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	if err := checkTTL(ttl); err != nil {
		return nil, err
	}
	id := m.lockID.Add(1)
	s := m.shard(key)
	for delay := lockPollMin; ; {
		acquired, err := m.tryLock(s, key, id)
		if err != nil {
			return nil, err
		}
		if acquired {
			stop := context.AfterFunc(ctx, func() { m.abandon(s, key, id, ttl) })
			var once sync.Once
			return func() {
				once.Do(func() {
					stop()
					m.unlock(s, key, id)
				})
			}, nil
		}
		if delay, err = waitLock(ctx, delay); err != nil {
			return nil, err
		}
		if m.closed.Load() {
			return nil, ErrClosed
		}
	}
}

// held is the expiry of a lock whose owner lives.
const held = time.Duration(1<<63 - 1)

func (m *Memory) tryLock(s *shard, key string, id uint64) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := m.now()
	l, ok := s.locks[key]
	if ok && now < l.expiry {
		return false, nil
	}
	if !ok && !s.room(now, m.perShard, false) {
		return false, ErrFull
	}
	s.locks[key] = heldLock{id: id, expiry: held}
	return true, nil
}

// abandon starts the expiry of lock id, whose owner's context is done.
func (m *Memory) abandon(s *shard, key string, id uint64, ttl time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.locks[key]; ok && l.id == id {
		now := m.now()
		s.locks[key] = heldLock{id: id, expiry: now + ttl}
		s.noteExpiry(now + ttl)
	}
}

func (m *Memory) unlock(s *shard, key string, id uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.locks[key]; ok && l.id == id {
		delete(s.locks, key)
	}
}

func (s *shard) len() int {
	return len(s.marks) + len(s.buckets) + len(s.blobs) + len(s.locks)
}

func (s *shard) noteExpiry(t time.Duration) {
	if t < s.nextExpiry {
		s.nextExpiry = t
	}
}

// room reports whether the shard can take one more entry, sweeping expired
// entries and, for a bucket, forgetting another bucket if it must.
func (s *shard) room(now time.Duration, limit int, isBucket bool) bool {
	if s.len() < limit {
		return true
	}
	if now >= s.nextExpiry {
		s.sweep(now)
		if s.len() < limit {
			return true
		}
	}
	if isBucket {
		for k := range s.buckets { // an arbitrary bucket
			delete(s.buckets, k)
			return true
		}
	}
	return false
}

// sweep removes the entries expired at now.
func (s *shard) sweep(now time.Duration) {
	if now < s.nextExpiry {
		return
	}
	next := time.Duration(1<<63 - 1)
	for k, exp := range s.marks {
		if now >= exp {
			delete(s.marks, k)
		} else {
			next = min(next, exp)
		}
	}
	for k, b := range s.buckets {
		if now >= b.full {
			delete(s.buckets, k)
		} else {
			next = min(next, b.full)
		}
	}
	for k, l := range s.locks {
		if now >= l.expiry {
			delete(s.locks, k)
		} else {
			next = min(next, l.expiry)
		}
	}
	s.nextExpiry = next
}

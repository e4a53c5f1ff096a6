package certs

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"time"
)

// LayeredCache is a [Cache] shared between nodes (Shared: Redis, through the
// edge's store) over a cache of this node's own (Local: a [DirCache]), which
// keeps a warm copy so that the node serves when Shared is away.
//
//   - Get reads Shared first: it is the truth, since another node may have
//     renewed. A hit refreshes the local copy when it differs. When Shared
//     fails, or misses, Get reads Local. A key that Shared misses and Local
//     holds is not copied to Shared: a stale local copy (another node's
//     certificate renewed since, or an account this node alone used) must
//     not overwrite what the others read; the next order writes Shared.
//   - Put writes Shared, then Local; Delete deletes from both.
//   - Challenge answers (keys ending in "+token" or "+http-01") serve only
//     the other nodes while an order runs: they live in Shared alone.
//   - A failure of Shared that Local covers for is not returned but passed
//     to OnSharedError; so a Redis outage never stops a node from serving,
//     storing or renewing with what it has. Failures of Local are returned,
//     and so are failures of Shared for keys Shared alone holds.
//   - Lock takes Shared's lock when Shared is a [Locker]. When Shared cannot
//     be reached (an error that is not ctx's), Lock goes on without it: a
//     Manager orders a name once at a time within its process anyway, and
//     during an outage each node must be able to order its own
//     certificates (so two nodes may order the same name then). When
//     Shared is not a Locker, Lock holds nothing.
//
// Over the edge's store.Resilient, Shared itself answers from memory during
// an outage and writes back on recovery; LayeredCache's own fallback covers
// keys that this node never read through Shared.
type LayeredCache struct {
	Shared Cache // the cache of all nodes
	Local  Cache // this node's warm copy
	// OnError, if not nil, is called with each failure that did not fail
	// the call: of Shared when Local covered for it, of Local when its
	// copy was refreshed after a read from Shared. It must not block.
	OnError func(error)
}

var (
	_ Cache  = LayeredCache{}
	_ Locker = LayeredCache{}
	_ Cache  = StorageCache{}
	_ Locker = StorageCache{}
)

// sharedOnly reports whether key is a challenge answer, which only the
// other nodes read, for the minutes of an order.
func sharedOnly(key string) bool {
	return strings.HasSuffix(key, "+token") || strings.HasSuffix(key, "+http-01")
}

func (c LayeredCache) failed(err error) {
	if c.OnError != nil {
		c.OnError(err)
	}
}

// Get implements [Cache].
func (c LayeredCache) Get(ctx context.Context, key string) ([]byte, error) {
	data, err := c.Shared.Get(ctx, key)
	if sharedOnly(key) {
		return data, err
	}
	switch {
	case err == nil:
		if old, lerr := c.Local.Get(ctx, key); lerr != nil || !bytes.Equal(old, data) {
			if perr := c.Local.Put(ctx, key, data); perr != nil {
				c.failed(perr)
			}
		}
		return data, nil
	case errors.Is(err, ErrCacheMiss):
	case ctx.Err() != nil:
		return nil, err
	default:
		c.failed(err)
	}
	return c.Local.Get(ctx, key)
}

// Put implements [Cache].
func (c LayeredCache) Put(ctx context.Context, key string, data []byte) error {
	err := c.Shared.Put(ctx, key, data)
	if sharedOnly(key) {
		return err
	}
	if err != nil {
		c.failed(err)
	}
	return c.Local.Put(ctx, key, data)
}

// Delete implements [Cache].
func (c LayeredCache) Delete(ctx context.Context, key string) error {
	err := c.Shared.Delete(ctx, key)
	if sharedOnly(key) {
		return err
	}
	if err != nil {
		c.failed(err)
	}
	return c.Local.Delete(ctx, key)
}

// Lock implements [Locker].
func (c LayeredCache) Lock(ctx context.Context, key string) (func(), error) {
	l, ok := c.Shared.(Locker)
	if !ok {
		return func() {}, nil
	}
	unlock, err := l.Lock(ctx, key)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		c.failed(err)
		return func() {}, nil
	}
	return unlock, nil
}

// Storage is the method set of the blobs and locks of the edge's shared
// store (store.Store has it): [StorageCache] makes a [Cache] and a [Locker]
// of it, so that this package imports no store.
type Storage interface {
	// Get returns the blob under key, or an error that IsNotFound knows.
	Get(ctx context.Context, key string) ([]byte, error)
	// Put stores data under key.
	Put(ctx context.Context, key string, data []byte) error
	// Delete removes key; a missing key is no error.
	Delete(ctx context.Context, key string) error
	// Lock blocks until it holds key, or ctx is done. The lock is held
	// until unlock is called or ctx is done (the store renews it), and
	// expires within ttl after that.
	Lock(ctx context.Context, key string, ttl time.Duration) (unlock func(), err error)
}

// DefaultLockTTL is how long the lock of a [StorageCache] outlives a holder
// that died, when StorageCache.LockTTL is zero.
const DefaultLockTTL = time.Minute

// StorageCache is a [Cache] and a [Locker] kept in a [Storage]. The edge
// builds one over its store:
//
//	certs.StorageCache{
//		Storage:    st, // a store.Store
//		IsNotFound: func(err error) bool { return errors.Is(err, store.ErrNotFound) },
//	}
type StorageCache struct {
	Storage Storage
	// IsNotFound reports whether an error of Storage's Get means that the
	// key holds nothing; Get returns ErrCacheMiss for it. If nil, every
	// error is a failure, none a miss.
	IsNotFound func(error) bool
	// Prefix goes before every key, to keep certificates apart from other
	// blobs of the store. If empty, "certs:".
	Prefix string
	// LockTTL is how long a lock outlives a holder that died without
	// unlock. If zero, DefaultLockTTL.
	LockTTL time.Duration
}

func (c StorageCache) key(k string) string {
	if c.Prefix == "" {
		return "certs:" + k
	}
	return c.Prefix + k
}

// Get implements [Cache].
func (c StorageCache) Get(ctx context.Context, key string) ([]byte, error) {
	data, err := c.Storage.Get(ctx, c.key(key))
	if err != nil && c.IsNotFound != nil && c.IsNotFound(err) {
		return nil, ErrCacheMiss
	}
	return data, err
}

// Put implements [Cache].
func (c StorageCache) Put(ctx context.Context, key string, data []byte) error {
	return c.Storage.Put(ctx, c.key(key), data)
}

// Delete implements [Cache].
func (c StorageCache) Delete(ctx context.Context, key string) error {
	return c.Storage.Delete(ctx, c.key(key))
}

// Lock implements [Locker].
func (c StorageCache) Lock(ctx context.Context, key string) (func(), error) {
	ttl := c.LockTTL
	if ttl <= 0 {
		ttl = DefaultLockTTL
	}
	return c.Storage.Lock(ctx, c.key(key), ttl)
}

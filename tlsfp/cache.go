package tlsfp

import (
	"hash/maphash"
	"sync/atomic"
)

// cache remembers recent values by key. A server sees the same few clients
// over and over: every Chrome sends the same cipher suites, signature
// algorithms and set of extensions, only in a new extension order, so the
// parts of its fingerprint that do not depend on that order repeat.
//
// It is direct-mapped and lock-free: a slot holds one immutable entry, which
// a miss may replace. An entry keeps its whole key, so a hit is exact and no
// key can make another's value wrong; keys that fall on the same slot only
// evict each other. A key is admitted on its second sighting in a row on its
// slot, so that one-off keys (a client never seen again, a flood of random
// hellos) cost no allocation and do not evict the regulars. Memory is
// bounded by the slots times the largest entry.
type cache[V any] struct {
	seed  maphash.Seed
	slots [256]atomic.Pointer[cacheEntry[V]]
	seen  [256]atomic.Uint64 // maphash of the last key that missed
}

type cacheEntry[V any] struct {
	key string
	v   V
}

// maxCacheKey bounds the keys kept: longer lists are not those of common
// clients.
const maxCacheKey = 1024

func newCache[V any]() *cache[V] { return &cache[V]{seed: maphash.MakeSeed()} }

// get returns the value for key, or nil and the key's hash for add.
func (c *cache[V]) get(key []byte) (*V, uint64) {
	mh := maphash.Bytes(c.seed, key)
	if e := c.slots[mh%uint64(len(c.slots))].Load(); e != nil && e.key == string(key) {
		return &e.v, mh
	}
	return nil, mh
}

// add offers v for key, whose hash get returned, after a miss.
func (c *cache[V]) add(key []byte, mh uint64, v V) {
	i := mh % uint64(len(c.slots))
	if len(key) <= maxCacheKey && c.seen[i].Swap(mh) == mh {
		c.slots[i].Store(&cacheEntry[V]{key: string(key), v: v})
	}
}

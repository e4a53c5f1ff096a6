package tlsfp

import (
	"crypto/sha256"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// clear empties the cache.
func (c *cache[V]) clear() {
	for i := range c.slots {
		c.slots[i].Store(nil)
		c.seen[i].Store(0)
	}
}

// entries counts the cache's entries.
func (c *cache[V]) entries() int {
	n := 0
	for i := range c.slots {
		if c.slots[i].Load() != nil {
			n++
		}
	}
	return n
}

// TestCache asks a fresh cache for many more keys than it has slots, in
// several rounds and out of order, so that keys meet on slots and evict each
// other. Every hit must be the key's own value (its SHA-256, computed here).
func TestCache(t *testing.T) {
	c := newCache[[32]byte]()
	rng := rand.New(rand.NewPCG(1, 2))
	keys := make([][]byte, 4000)
	for i := range keys {
		n := rng.IntN(200)
		if i%100 == 0 {
			n = maxCacheKey + 1 + rng.IntN(100) // never cached
		}
		keys[i] = make([]byte, n)
		for j := range keys[i] {
			keys[i][j] = byte(rng.IntN(3)) // few symbols: near-equal keys
		}
	}
	// Keys that differ in their last byte only.
	keys = append(keys, []byte{1, 2, 3, 4}, []byte{1, 2, 3, 5})
	hits := 0
	for range 3 {
		for _, i := range rng.Perm(len(keys)) {
			key := keys[i]
			want := sha256.Sum256(key)
			// Twice in a row: the second sighting is admitted, so that
			// entries evict each other on shared slots.
			for range 2 {
				v, mh := c.get(key)
				if v == nil {
					c.add(key, mh, want)
					continue
				}
				hits++
				if *v != want {
					t.Fatalf("get(%v) returned another key's value", key)
				}
			}
		}
	}
	if hits == 0 {
		t.Fatal("no hits")
	}
	for i := range c.slots {
		if e := c.slots[i].Load(); e != nil && len(e.key) > maxCacheKey {
			t.Fatalf("slot %d holds a key of %d bytes", i, len(e.key))
		}
	}
	if n := c.entries(); n < len(c.slots)/2 {
		t.Errorf("%d of %d slots in use after %d keys", n, len(c.slots), len(keys))
	}
}

// TestCacheAdmission checks that a key is kept from its second sighting on,
// and that keys seen once cost no allocation.
func TestCacheAdmission(t *testing.T) {
	c := newCache[int]()
	key := []byte("t13d1516h2 1301 1302 1303")
	miss := func(key []byte) {
		if v, mh := c.get(key); v == nil {
			c.add(key, mh, len(key))
		}
	}
	miss(key)
	if n := c.entries(); n != 0 {
		t.Fatalf("%d entries after one sighting, want 0", n)
	}
	miss(key)
	if n := c.entries(); n != 1 {
		t.Fatalf("%d entries after two sightings, want 1", n)
	}
	if v, _ := c.get(key); v == nil || *v != len(key) {
		t.Fatalf("get = %v after two sightings", v)
	}
	if a := testing.AllocsPerRun(100, func() { c.get(key) }); a != 0 {
		t.Errorf("a hit allocates %v times", a)
	}
	i := 0
	buf := []byte("0000 1301 1302")
	allocs := testing.AllocsPerRun(1000, func() {
		i++
		buf[0], buf[1] = byte(i>>8), byte(i)
		miss(buf)
	})
	if allocs != 0 {
		t.Errorf("keys seen once allocate %v times each", allocs)
	}
}

// TestCachedFingerprint checks that a fingerprint computed from the cache
// equals the one computed without it, field for field, for every vector.
func TestCachedFingerprint(t *testing.T) {
	for _, v := range loadVectors(t) {
		quic := v.Transport == "quic"
		var fps [3]*Fingerprint
		for i := range fps {
			if i == 0 {
				sortedParts.clear()
			}
			fp, err := FingerprintHandshake(v.handshake, quic)
			if err != nil {
				t.Fatal(err)
			}
			fps[i] = fp
		}
		if *fps[2] != *fps[0] {
			t.Errorf("%s: from the cache\n%+v\nwithout\n%+v", v.name(), fps[2], fps[0])
		}
	}
}

// TestVectorsConcurrent fingerprints every vector from several goroutines
// at once through the listener's path, with the shared cache emptied now
// and then, and checks every field each time.
func TestVectorsConcurrent(t *testing.T) {
	vs := loadVectors(t)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for round := range 5 {
				for i, v := range vs {
					if g == 0 && i%50 == 0 {
						sortedParts.clear()
					}
					fp, err := FingerprintHandshake(v.handshake, v.Transport == "quic")
					if err != nil {
						t.Errorf("round %d, %s: %v", round, v.name(), err)
						return
					}
					if checkVector(t, v, fp); t.Failed() {
						t.Logf("round %d, %s", round, v.name())
						return
					}
				}
			}
		})
	}
	wg.Wait()
}

// TestSortUint16s compares sortUint16s with slices.Sort on random lists of
// every length up to past the short-list bound, with values small and
// large, duplicates included.
func TestSortUint16s(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for n := range 80 {
		for range 50 {
			vs := make([]uint16, n)
			for i := range vs {
				switch rng.IntN(3) {
				case 0:
					vs[i] = uint16(rng.IntN(64))
				case 1:
					vs[i] = uint16(rng.IntN(70))
				default:
					vs[i] = uint16(rng.Uint32())
				}
			}
			want := slices.Clone(vs)
			slices.Sort(want)
			sortUint16s(vs)
			if !slices.Equal(vs, want) {
				t.Fatalf("sortUint16s gave %v, want %v", vs, want)
			}
		}
	}
}

package certs_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/maatproxy/maat/certs"
)

var errDown = errors.New("test: shared cache down")

// mapCache is a Cache (and a Locker) in a map that can be taken down, as a
// Redis would go away.
type mapCache struct {
	mu    sync.Mutex
	data  map[string][]byte
	down  bool
	locks int // locks taken
}

func newMapCache(entries map[string]string) *mapCache {
	c := &mapCache{data: map[string][]byte{}}
	for k, v := range entries {
		c.data[k] = []byte(v)
	}
	return c
}

func (c *mapCache) Get(_ context.Context, key string) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down {
		return nil, errDown
	}
	b, ok := c.data[key]
	if !ok {
		return nil, certs.ErrCacheMiss
	}
	return b, nil
}

func (c *mapCache) Put(_ context.Context, key string, data []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down {
		return errDown
	}
	c.data[key] = data
	return nil
}

func (c *mapCache) Delete(_ context.Context, key string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down {
		return errDown
	}
	delete(c.data, key)
	return nil
}

func (c *mapCache) Lock(ctx context.Context, key string) (func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down {
		return nil, errDown
	}
	c.locks++
	return func() {}, ctx.Err()
}

func (c *mapCache) setDown(down bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = down
}

func (c *mapCache) entries() map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := map[string]string{}
	for k, v := range c.data {
		m[k] = string(v)
	}
	return m
}

// plainCache is a Cache that is no Locker.
type plainCache struct{ certs.Cache }

func TestLayeredCache(t *testing.T) {
	t.Parallel()
	type state = map[string]string
	tests := []struct {
		name          string
		shared, local state
		sharedDown    bool
		op            func(ctx context.Context, c certs.LayeredCache) (string, error)
		want          string
		wantErr       error
		wantShared    state // nil: unchanged
		wantLocal     state
		wantErrors    int // reported to OnError
	}{
		{
			name:      "get: shared is the truth, local refreshed",
			shared:    state{"a.test": "renewed"},
			local:     state{"a.test": "old"},
			op:        get("a.test"),
			want:      "renewed",
			wantLocal: state{"a.test": "renewed"},
		},
		{
			name:       "get: shared down, local serves",
			local:      state{"a.test": "local"},
			sharedDown: true,
			op:         get("a.test"),
			want:       "local",
			wantErrors: 1,
		},
		{
			name:  "get: shared misses, local serves and is not copied",
			local: state{"acme_account+key": "node key"},
			op:    get("acme_account+key"),
			want:  "node key",
		},
		{
			name:    "get: a miss in both",
			op:      get("a.test"),
			wantErr: certs.ErrCacheMiss,
		},
		{
			name:    "get: a challenge answer is read from shared only",
			local:   state{"a.test+token": "stale"},
			op:      get("a.test+token"),
			wantErr: certs.ErrCacheMiss,
		},
		{
			name:       "get: a challenge answer with shared down fails",
			local:      state{"a.test+token": "stale"},
			sharedDown: true,
			op:         get("a.test+token"),
			wantErr:    errDown,
		},
		{
			name:       "put: both",
			op:         put("a.test", "new"),
			wantShared: state{"a.test": "new"},
			wantLocal:  state{"a.test": "new"},
		},
		{
			name:       "put: shared down, local written, no error",
			sharedDown: true,
			op:         put("a.test", "ordered in the outage"),
			wantLocal:  state{"a.test": "ordered in the outage"},
			wantErrors: 1,
		},
		{
			name:       "put: a challenge answer to shared only",
			op:         put("a.test+token", "cert"),
			wantShared: state{"a.test+token": "cert"},
			wantLocal:  state{},
		},
		{
			name:       "delete: both",
			shared:     state{"a.test": "x", "b.test": "y"},
			local:      state{"a.test": "x"},
			op:         del("a.test"),
			wantShared: state{"b.test": "y"},
			wantLocal:  state{},
		},
		{
			name:       "delete: shared down, local deleted",
			local:      state{"a.test": "x"},
			sharedDown: true,
			op:         del("a.test"),
			wantLocal:  state{},
			wantErrors: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			shared, local := newMapCache(tt.shared), newMapCache(tt.local)
			shared.down = tt.sharedDown
			var reported []error
			c := certs.LayeredCache{Shared: shared, Local: local, OnError: func(err error) { reported = append(reported, err) }}
			got, err := tt.op(t.Context(), c)
			if !errors.Is(err, tt.wantErr) || got != tt.want {
				t.Errorf("= %q, %v; want %q, %v", got, err, tt.want, tt.wantErr)
			}
			if len(reported) != tt.wantErrors || tt.wantErrors > 0 && !errors.Is(reported[0], errDown) {
				t.Errorf("OnError got %v; want %d errDown", reported, tt.wantErrors)
			}
			shared.down = false
			for _, c := range []struct {
				which string
				cache *mapCache
				want  state
				was   state
			}{{"shared", shared, tt.wantShared, tt.shared}, {"local", local, tt.wantLocal, tt.local}} {
				want := c.want
				if want == nil {
					want = c.was
				}
				if got := c.cache.entries(); !equalState(got, want) {
					t.Errorf("%s holds %v; want %v", c.which, got, want)
				}
			}
		})
	}
}

func equalState(got, want map[string]string) bool {
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			return false
		}
	}
	return true
}

func get(key string) func(context.Context, certs.LayeredCache) (string, error) {
	return func(ctx context.Context, c certs.LayeredCache) (string, error) {
		b, err := c.Get(ctx, key)
		return string(b), err
	}
}

func put(key, data string) func(context.Context, certs.LayeredCache) (string, error) {
	return func(ctx context.Context, c certs.LayeredCache) (string, error) {
		return "", c.Put(ctx, key, []byte(data))
	}
}

func del(key string) func(context.Context, certs.LayeredCache) (string, error) {
	return func(ctx context.Context, c certs.LayeredCache) (string, error) {
		return "", c.Delete(ctx, key)
	}
}

func TestLayeredCacheLock(t *testing.T) {
	t.Parallel()
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name       string
		shared     certs.Cache
		ctx        context.Context
		wantErr    error
		wantLocked bool // the shared lock was taken
		wantErrors int
	}{
		{name: "shared lock", shared: newMapCache(nil), wantLocked: true},
		{name: "shared down: go on unlocked", shared: &mapCache{data: map[string][]byte{}, down: true}, wantErrors: 1},
		{name: "context ended", shared: newMapCache(nil), ctx: canceled, wantErr: context.Canceled, wantLocked: true},
		{name: "shared is no Locker", shared: plainCache{newMapCache(nil)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := tt.ctx
			if ctx == nil {
				ctx = t.Context()
			}
			var reported int
			c := certs.LayeredCache{Shared: tt.shared, Local: newMapCache(nil), OnError: func(error) { reported++ }}
			unlock, err := c.Lock(ctx, "a.test+lock")
			if !errors.Is(err, tt.wantErr) || (err == nil) != (unlock != nil) {
				t.Fatalf("Lock() = %v; want %v (and an unlock exactly without error)", err, tt.wantErr)
			}
			if unlock != nil {
				unlock()
			}
			locked := false
			if m, ok := tt.shared.(*mapCache); ok {
				locked = m.locks > 0
			}
			if locked != tt.wantLocked || reported != tt.wantErrors {
				t.Errorf("shared lock taken %v, %d errors reported; want %v, %d", locked, reported, tt.wantLocked, tt.wantErrors)
			}
		})
	}
}

// errNotFound stands for the store's ErrNotFound.
var errNotFound = errors.New("test store: not found")

// fakeStorage is a Storage in a map, recording lock calls.
type fakeStorage struct {
	mu    sync.Mutex
	blobs map[string][]byte
	locks []string        // key of each Lock
	ttls  []time.Duration // ttl of each Lock
}

func (s *fakeStorage) Get(_ context.Context, key string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.blobs[key]
	if !ok {
		return nil, errNotFound
	}
	return b, nil
}

func (s *fakeStorage) Put(_ context.Context, key string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.blobs[key] = data
	return nil
}

func (s *fakeStorage) Delete(_ context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.blobs, key)
	return nil
}

func (s *fakeStorage) Lock(_ context.Context, key string, ttl time.Duration) (func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.locks = append(s.locks, key)
	s.ttls = append(s.ttls, ttl)
	return func() {}, nil
}

func TestStorageCache(t *testing.T) {
	t.Parallel()
	isNotFound := func(err error) bool { return errors.Is(err, errNotFound) }
	tests := []struct {
		name       string
		cache      certs.StorageCache
		wantKey    string        // where "a.test" is stored
		wantTTL    time.Duration // of the lock
		wantMissIs error         // what Get of a missing key wraps
	}{
		{name: "defaults", cache: certs.StorageCache{IsNotFound: isNotFound},
			wantKey: "certs:a.test", wantTTL: certs.DefaultLockTTL, wantMissIs: certs.ErrCacheMiss},
		{name: "configured", cache: certs.StorageCache{IsNotFound: isNotFound, Prefix: "site1/", LockTTL: 5 * time.Minute},
			wantKey: "site1/a.test", wantTTL: 5 * time.Minute, wantMissIs: certs.ErrCacheMiss},
		{name: "no IsNotFound: a miss is a failure", cache: certs.StorageCache{},
			wantKey: "certs:a.test", wantTTL: certs.DefaultLockTTL, wantMissIs: errNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st := &fakeStorage{blobs: map[string][]byte{}}
			c := tt.cache
			c.Storage = st
			ctx := t.Context()
			if _, err := c.Get(ctx, "a.test"); !errors.Is(err, tt.wantMissIs) {
				t.Errorf("Get of a missing key: %v; want %v", err, tt.wantMissIs)
			}
			if err := c.Put(ctx, "a.test", []byte("pem")); err != nil {
				t.Fatal(err)
			}
			if string(st.blobs[tt.wantKey]) != "pem" {
				t.Errorf("stored under %v; want %q", slices.Collect(maps.Keys(st.blobs)), tt.wantKey)
			}
			if b, err := c.Get(ctx, "a.test"); err != nil || string(b) != "pem" {
				t.Errorf("Get = %q, %v", b, err)
			}
			if err := c.Delete(ctx, "a.test"); err != nil || len(st.blobs) != 0 {
				t.Errorf("Delete: %v, left %d blobs", err, len(st.blobs))
			}
			unlock, err := c.Lock(ctx, "a.test+lock")
			if err != nil {
				t.Fatal(err)
			}
			unlock()
			if len(st.locks) != 1 || st.locks[0] != tt.wantKey+"+lock" || st.ttls[0] != tt.wantTTL {
				t.Errorf("locks %v with ttls %v; want %q with %v", st.locks, st.ttls, tt.wantKey+"+lock", tt.wantTTL)
			}
		})
	}
}

package certs

import (
	"context"

	"golang.org/x/crypto/acme/autocert"
)

// ErrCacheMiss is returned by a [Cache]'s Get for a key it does not hold. It
// is autocert's, so that autocert caches work unchanged.
var ErrCacheMiss = autocert.ErrCacheMiss

// Cache stores certificates, keys and ACME state as opaque bytes under short
// keys. It has the method set of autocert.Cache, so any autocert cache (a
// directory, Redis) fits. Implementations must be safe for concurrent use.
type Cache interface {
	// Get returns the data for key, or ErrCacheMiss.
	Get(ctx context.Context, key string) ([]byte, error)
	// Put stores data under key.
	Put(ctx context.Context, key string, data []byte) error
	// Delete removes key; a missing key is not an error.
	Delete(ctx context.Context, key string) error
}

// DirCache is a [Cache] in a directory: one file per key, written with mode
// 0600 through a temporary file and a rename, in a directory created with
// mode 0700. It is autocert.DirCache.
type DirCache = autocert.DirCache

// Locker is implemented by a [Cache] that several nodes share (Redis, for
// instance). Before ordering a name's certificate a Manager takes the lock
// named after it, then looks in the cache again: so one node orders and the
// others read what it stored. Challenge answers go to the cache too, so that
// whichever node the CA reaches can answer. A Manager whose cache is a
// Locker also shares its TLS session ticket keys through it, and reads its
// certificates again now and then to serve what another node renewed.
type Locker interface {
	// Lock blocks until it holds key across all nodes, or ctx is done. The
	// lock is held until unlock is called or ctx is done, however long the
	// order takes; a holder that dies without unlock must lose it after a
	// bounded time (a Redis lock's ttl), so that another node takes over.
	Lock(ctx context.Context, key string) (unlock func(), err error)
}

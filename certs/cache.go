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

package store

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"
)

// Sealing errors. Open and Sealed.Get wrap one of them.
var (
	// ErrNotSealed is wrapped by the error about a value stored without a
	// seal (written by a version that did not seal) that may not be read
	// as it is.
	ErrNotSealed = errors.New("store: value not sealed")
	// ErrOpen is wrapped by the errors about a sealed value that does not
	// open: sealed with another key (the nodes do not share one secret, or
	// it changed), moved from another key name, altered, cut short, or of
	// a seal version this one does not know.
	ErrOpen = errors.New("store: sealed value does not open")
)

// SealKeySize is the size of a sealing key: AES-256.
const SealKeySize = 32

// The sealed format (version 1):
//
//	"maat-sealed-v1:" | key id (4 bytes) | nonce (12 bytes) | AES-256-GCM ciphertext and tag
//
// The additional data is the name the value is stored under (the Redis
// key), so that a value copied to another name does not open there. The
// key id is the first 4 bytes of HMAC-SHA-256(key, "maat-sealed key id"):
// it tells a value sealed with another key from one altered, and says
// nothing of the key.
const (
	sealFamily   = "maat-sealed-" // every version's prefix
	sealPrefix   = sealFamily + "v1:"
	sealIDSize   = 4
	sealNonce    = 12 // GCM's standard nonce
	sealTag      = 16 // GCM's tag
	sealHeader   = len(sealPrefix) + sealIDSize + sealNonce
	sealOverhead = sealHeader + sealTag
)

// Sealer seals values with AES-256-GCM (NIST SP 800-38D) under one key, and
// opens them. Its methods are safe for concurrent use. Each seal draws a
// random 96-bit nonce; a key stays far below the 2^32 seals after which
// random nonces could repeat (certificates and keys are written a few
// times a day).
type Sealer struct {
	aead cipher.AEAD
	id   [sealIDSize]byte
}

// NewSealer returns a Sealer for key, which must be SealKeySize bytes.
func NewSealer(key []byte) (*Sealer, error) {
	if len(key) != SealKeySize {
		return nil, fmt.Errorf("%w: sealing key of %d bytes, want %d", ErrInvalid, len(key), SealKeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("store: sealing key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("store: sealing key: %w", err)
	}
	s := &Sealer{aead: aead}
	m := hmac.New(sha256.New, key)
	m.Write([]byte("maat-sealed key id"))
	copy(s.id[:], m.Sum(nil))
	return s, nil
}

// Seal returns plain sealed for the name it is stored under.
func (s *Sealer) Seal(name string, plain []byte) []byte {
	out := make([]byte, sealHeader, sealOverhead+len(plain))
	copy(out, sealPrefix)
	copy(out[len(sealPrefix):], s.id[:])
	nonce := out[len(sealPrefix)+sealIDSize : sealHeader]
	_, _ = rand.Read(nonce) // never fails (crypto/rand)
	return s.aead.Seal(out, nonce, plain, []byte(name))
}

// Open returns the plain value of sealed, which was stored under name. A
// value without the seal returns an error wrapping ErrNotSealed; one that
// does not open, an error wrapping ErrOpen that says why. It allocates no
// more than len(sealed).
func (s *Sealer) Open(name string, sealed []byte) ([]byte, error) {
	if !bytes.HasPrefix(sealed, []byte(sealFamily)) {
		return nil, fmt.Errorf("%w: %s holds a value without a seal", ErrNotSealed, name)
	}
	if !bytes.HasPrefix(sealed, []byte(sealPrefix)) {
		v, _, _ := bytes.Cut(sealed[len(sealFamily):min(len(sealed), len(sealFamily)+8)], []byte(":"))
		return nil, fmt.Errorf("%w: %s is sealed in an unknown version %q (written by a newer version?)", ErrOpen, name, v)
	}
	if len(sealed) < sealOverhead {
		return nil, fmt.Errorf("%w: %s holds a sealed value cut short (%d bytes)", ErrOpen, name, len(sealed))
	}
	rest := sealed[len(sealPrefix):]
	if id := rest[:sealIDSize]; !bytes.Equal(id, s.id[:]) {
		return nil, fmt.Errorf("%w: %s was sealed with another key (key id %x, this node's %x): the nodes do not share one secret, or it changed",
			ErrOpen, name, id, s.id[:])
	}
	nonce, ct := rest[sealIDSize:sealIDSize+sealNonce], rest[sealIDSize+sealNonce:]
	plain, err := s.aead.Open(nil, nonce, ct, []byte(name))
	if err != nil {
		return nil, fmt.Errorf("%w: %s does not authenticate: it was sealed under another name, or altered", ErrOpen, name)
	}
	return plain, nil
}

// IsSealed reports whether b carries a seal of any version (whether or not
// it opens).
func IsSealed(b []byte) bool { return bytes.HasPrefix(b, []byte(sealFamily)) }

// SealConfig configures a [Sealed] store.
type SealConfig struct {
	// Key is the sealing key, SealKeySize bytes. Every node sharing the
	// store must have the same.
	Key []byte
	// Plain reports whether a value found without a seal under key, as a
	// version that did not seal wrote it, may be read: Get then returns it
	// and writes it back sealed. If nil, no value is read without a seal.
	Plain func(key string, data []byte) bool
	// OnError, if not nil, is called with each error of Get about a value
	// that did not open or was not sealed (ErrOpen, ErrNotSealed), and
	// with each failure to write back a plain value sealed. It must not
	// block.
	OnError func(key string, err error)
	// OnResealed, if not nil, is called for each value that Plain let Get
	// read and that was written back sealed. It must not block.
	OnResealed func(key string)
}

// Sealed is a [Store] whose blobs are sealed (see [Sealer]) before they
// reach the store underneath, and opened when read: whoever reads the store
// (a Redis dump, a replica, a client of the same Redis) learns nothing of
// them, and a value moved to another key or altered does not open. A
// blob's name for the seal is its Redis key ("maat:blob:" + key), in
// memory as in Redis. Marks, buckets and locks hold no secret and pass
// through.
type Sealed struct {
	inner  Store
	sealer *Sealer
	cfg    SealConfig
}

var _ Store = (*Sealed)(nil)

// NewSealed returns s with its blobs sealed as cfg says.
func NewSealed(s Store, cfg SealConfig) (*Sealed, error) {
	sealer, err := NewSealer(cfg.Key)
	if err != nil {
		return nil, err
	}
	cfg.Key = nil // kept in the cipher only
	return &Sealed{inner: s, sealer: sealer, cfg: cfg}, nil
}

// sealName is the name a blob is sealed for: its key in Redis.
func sealName(key string) string { return prefixBlob + key }

// Get returns the blob under key, opened. A value that does not open
// returns an error wrapping ErrOpen; one without a seal, unless
// SealConfig.Plain lets it be read, an error wrapping ErrNotSealed.
func (s *Sealed) Get(ctx context.Context, key string) ([]byte, error) {
	b, err := s.inner.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	name := sealName(key)
	plain, err := s.sealer.Open(name, b)
	switch {
	case err == nil:
		return plain, nil
	case errors.Is(err, ErrNotSealed) && s.cfg.Plain != nil && s.cfg.Plain(key, b):
		// Written before sealing: sealed now, so that it is read plain
		// once. (Another node writing the key at this moment may see its
		// value replaced by this older one, once, during an upgrade.)
		if perr := s.inner.Put(ctx, key, s.sealer.Seal(name, b)); perr != nil {
			s.failed(key, fmt.Errorf("store: sealing the plain value of %s: %w", name, perr))
		} else if s.cfg.OnResealed != nil {
			s.cfg.OnResealed(key)
		}
		return b, nil
	}
	s.failed(key, err)
	return nil, err
}

func (s *Sealed) failed(key string, err error) {
	if s.cfg.OnError != nil {
		s.cfg.OnError(key, err)
	}
}

// Put stores data sealed under key.
func (s *Sealed) Put(ctx context.Context, key string, data []byte) error {
	return s.inner.Put(ctx, key, s.sealer.Seal(sealName(key), data))
}

// Delete removes the blob under key.
func (s *Sealed) Delete(ctx context.Context, key string) error { return s.inner.Delete(ctx, key) }

// MarkOnce is the underlying store's.
func (s *Sealed) MarkOnce(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	return s.inner.MarkOnce(ctx, key, ttl)
}

// Take is the underlying store's.
func (s *Sealed) Take(ctx context.Context, key string, rate float64, burst int) (bool, time.Duration, error) {
	return s.inner.Take(ctx, key, rate, burst)
}

// Lock is the underlying store's.
func (s *Sealed) Lock(ctx context.Context, key string, ttl time.Duration) (func(), error) {
	return s.inner.Lock(ctx, key, ttl)
}

// Close closes the underlying store.
func (s *Sealed) Close() error { return s.inner.Close() }

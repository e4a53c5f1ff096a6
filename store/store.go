package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// Store is the behaviour that [Memory] and [Redis] share. Packages that need
// only part of it declare their own smaller interface.
type Store interface {
	// MarkOnce sets a single-use mark on key for ttl. first is true for the
	// one caller that set it and false for every caller until it expires.
	MarkOnce(ctx context.Context, key string, ttl time.Duration) (first bool, err error)
	// Take takes one token from the bucket key, which holds at most burst
	// tokens and refills at rate tokens per second. When no token is left,
	// ok is false and retryAfter says when one will be.
	Take(ctx context.Context, key string, rate float64, burst int) (ok bool, retryAfter time.Duration, err error)
	// Get returns the blob stored under key, or an error wrapping ErrNotFound.
	Get(ctx context.Context, key string) ([]byte, error)
	// Put stores a copy of data under key, replacing any previous blob.
	Put(ctx context.Context, key string, data []byte) error
	// Delete removes the blob under key; deleting a missing key is no error.
	Delete(ctx context.Context, key string) error
	// Lock waits until it holds the lock key, or ctx is done. The lock is
	// held until unlock is called or ctx is done, however long that is;
	// after ctx is done without unlock (its owner gave up or died), it
	// expires within ttl, so that another caller can take it. unlock
	// releases the lock only if it is still held by this caller; calling it
	// more than once is no error.
	Lock(ctx context.Context, key string, ttl time.Duration) (unlock func(), err error)
	// Close releases the resources of the store.
	Close() error
}

var (
	_ Store = (*Memory)(nil)
	_ Store = (*Redis)(nil)
	_ Store = (*Resilient)(nil)
)

var (
	// ErrNotFound is returned by Get for a key that holds no blob.
	ErrNotFound = errors.New("store: not found")
	// ErrInvalid is wrapped by errors about arguments: a ttl that is not
	// positive, a rate or burst a bucket cannot have.
	ErrInvalid = errors.New("store: invalid argument")
	// ErrFull is returned by a Memory store that holds its maximum number of
	// entries, none of them expired, when a new mark, blob or lock is set.
	ErrFull = errors.New("store: full")
	// ErrClosed is returned by a store used after Close.
	ErrClosed = errors.New("store: closed")
)

// Key prefixes, per kind of entry.
const (
	prefixMark = "maat:mark:"
	prefixRate = "maat:rate:"
	prefixBlob = "maat:blob:"
	prefixLock = "maat:lock:"
)

// Lock polling: the first retry waits lockPollMin, each further one twice as
// long, up to lockPollMax.
const (
	lockPollMin = 5 * time.Millisecond
	lockPollMax = 250 * time.Millisecond
)

func checkTTL(ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("%w: ttl %v is not positive", ErrInvalid, ttl)
	}
	return nil
}

func checkLimit(rate float64, burst int) error {
	if !(rate > 0) || math.IsInf(rate, 0) {
		return fmt.Errorf("%w: rate %v is not a positive number", ErrInvalid, rate)
	}
	if burst < 1 {
		return fmt.Errorf("%w: burst %d is less than 1", ErrInvalid, burst)
	}
	return nil
}

// refill returns the tokens of a bucket that held tokens elapsed ago.
func refill(tokens, rate float64, burst int, elapsed time.Duration) float64 {
	if elapsed > 0 {
		tokens += elapsed.Seconds() * rate
	}
	return min(tokens, float64(burst))
}

// maxWait caps the waits and expiries a bucket computes, so that a tiny rate
// cannot overflow a clock: about a hundred years.
const maxWait = 100 * 365 * 24 * time.Hour

// seconds converts a number of seconds to a Duration, rounded up to the
// nanosecond and capped at maxWait.
func seconds(s float64) time.Duration {
	if s >= maxWait.Seconds() {
		return maxWait
	}
	return time.Duration(math.Ceil(s * float64(time.Second)))
}

// waitLock sleeps before the next attempt to take a lock, and returns the
// next delay, or ctx's error.
func waitLock(ctx context.Context, delay time.Duration) (time.Duration, error) {
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-t.C:
	}
	return min(2*delay, lockPollMax), nil
}

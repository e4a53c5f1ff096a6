package certs

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// ticketKeysKey is the cache key of the shared session ticket keys.
	// The entry is secret: whoever reads it can decrypt the session
	// tickets, and with them the resumed sessions, of every node until the
	// keys have rotated out. It is kept like the certificates' private keys
	// (mode 0600 in a directory, in Redis behind the store's access
	// control), and never logged. Without a shared cache the keys live in
	// memory only.
	ticketKeysKey = "maat_session_ticket_keys"
	// TicketKeyRotation is how long one session ticket key encrypts new
	// tickets before the next one takes over.
	TicketKeyRotation = 12 * time.Hour
	// ticketPrevious is the number of keys kept, after they stopped
	// encrypting, to decrypt the tickets they made: a ticket resumes for
	// between two and three rotations after it was issued.
	ticketPrevious = 2
	// maxTicketKeys bounds the keys read from the cache.
	maxTicketKeys = 16
	// ticketRetry is how soon a failed exchange with the shared cache is
	// tried again.
	ticketRetry = time.Minute
)

// ticketKeySet is a set of session ticket keys (the keys crypto/tls
// encrypts its tickets with, RFC 5077 and RFC 8446, section 4.6.1): keys[0]
// encrypts; keys[1] is the next one, which decrypts already, so that the
// tickets of a node that rotated a moment earlier resume here; keys[2:] are
// the previous ones, newest first.
type ticketKeySet struct {
	rotated time.Time // when keys[0] started encrypting
	keys    [][32]byte
}

// ticketKeysJSON is the cache format of a ticketKeySet.
type ticketKeysJSON struct {
	Rotated time.Time `json:"rotated"`
	Keys    [][]byte  `json:"keys"` // base64, 32 bytes each
}

func randomTicketKey() [32]byte {
	var k [32]byte
	rand.Read(k[:]) // never fails (crypto/rand)
	return k
}

// newTicketKeySet returns a set of fresh keys whose current key started at
// now.
func newTicketKeySet(now time.Time) ticketKeySet {
	return ticketKeySet{rotated: now, keys: [][32]byte{randomTicketKey(), randomTicketKey()}}
}

// due reports whether the set should rotate at now.
func (s ticketKeySet) due(now time.Time) bool {
	return !now.Before(s.rotated.Add(TicketKeyRotation))
}

// rotate returns the set as it should be at now: the next key encrypts, a
// new next key is made, the key that encrypted joins the previous ones, and
// the oldest leaves. Rotation times stay on the set's schedule, so that
// nodes agree on them; a set too old to have a key worth keeping is
// replaced.
func (s ticketKeySet) rotate(now time.Time) ticketKeySet {
	if now.Sub(s.rotated) >= (ticketPrevious+2)*TicketKeyRotation {
		return newTicketKeySet(now)
	}
	for s.due(now) {
		keys := make([][32]byte, 0, 2+ticketPrevious)
		keys = append(keys, s.keys[1], randomTicketKey(), s.keys[0])
		keys = append(keys, s.keys[2:]...)
		s = ticketKeySet{rotated: s.rotated.Add(TicketKeyRotation), keys: keys[:min(len(keys), 2+ticketPrevious)]}
	}
	return s
}

func (s ticketKeySet) equal(o ticketKeySet) bool {
	if !s.rotated.Equal(o.rotated) || len(s.keys) != len(o.keys) {
		return false
	}
	for i := range s.keys {
		if s.keys[i] != o.keys[i] {
			return false
		}
	}
	return true
}

func (s ticketKeySet) marshal() ([]byte, error) {
	j := ticketKeysJSON{Rotated: s.rotated.UTC(), Keys: make([][]byte, len(s.keys))}
	for i := range s.keys {
		j.Keys[i] = s.keys[i][:]
	}
	return json.Marshal(j)
}

var errBadTicketKeys = errors.New("certs: unusable session ticket keys in the cache")

func parseTicketKeySet(b []byte) (ticketKeySet, error) {
	var j ticketKeysJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return ticketKeySet{}, fmt.Errorf("%w: %w", errBadTicketKeys, err)
	}
	if j.Rotated.IsZero() || len(j.Keys) < 2 || len(j.Keys) > maxTicketKeys {
		return ticketKeySet{}, fmt.Errorf("%w: %d keys", errBadTicketKeys, len(j.Keys))
	}
	s := ticketKeySet{rotated: j.Rotated, keys: make([][32]byte, len(j.Keys))}
	for i, k := range j.Keys {
		if len(k) != 32 {
			return ticketKeySet{}, fmt.Errorf("%w: a key of %d bytes", errBadTicketKeys, len(k))
		}
		s.keys[i] = [32]byte(k)
	}
	return s, nil
}

// tickets encrypts and decrypts the session tickets of a Manager's TLS
// configurations (tls.Config.WrapSession and UnwrapSession) with keys that
// Run rotates and, with a shared cache, shares between nodes: one node,
// holding the lock, rotates and writes the set; the others read it.
type tickets struct {
	cfg    *Config
	cache  Cache  // the shared cache; nil when there is none
	locker Locker // cache's lock
	// keyed carries the current keys (tls.Config.SetSessionTicketKeys);
	// its EncryptTicket and DecryptTicket do the cryptography, so tickets
	// keep crypto/tls's own format.
	keyed atomic.Pointer[tls.Config]

	mu  sync.Mutex // serializes updates of set and keyed
	set ticketKeySet
}

// newTickets returns the session tickets of a Manager: the shared set when
// cache is shared and holds one, otherwise a set of this node's own until
// Run shares it.
func newTickets(ctx context.Context, cfg *Config, cache Cache) *tickets {
	t := &tickets{cfg: cfg}
	set := newTicketKeySet(cfg.now())
	if l, ok := cache.(Locker); ok {
		t.cache, t.locker = cache, l
		ctx, cancel := context.WithTimeout(ctx, cacheTimeout)
		if shared, err := t.load(ctx); err == nil {
			set = shared.rotate(cfg.now())
		}
		cancel()
	}
	t.use(set)
	return t
}

// use makes set the keys of new and resumed sessions.
func (t *tickets) use(set ticketKeySet) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.keyed.Load() != nil && t.set.equal(set) {
		return
	}
	c := &tls.Config{}
	c.SetSessionTicketKeys(set.keys)
	t.set = set
	t.keyed.Store(c)
}

func (t *tickets) current() ticketKeySet {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.set
}

// wrap implements tls.Config.WrapSession.
func (t *tickets) wrap(cs tls.ConnectionState, ss *tls.SessionState) ([]byte, error) {
	return t.keyed.Load().EncryptTicket(cs, ss)
}

// unwrap implements tls.Config.UnwrapSession: a ticket no key decrypts is
// ignored and the handshake is a full one.
func (t *tickets) unwrap(identity []byte, cs tls.ConnectionState) (*tls.SessionState, error) {
	return t.keyed.Load().DecryptTicket(identity, cs)
}

// run keeps the keys up to date until ctx is done.
func (t *tickets) run(ctx context.Context) {
	timer := time.NewTimer(t.update(ctx))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		timer.Reset(t.update(ctx))
	}
}

// update rotates the keys if due, through the shared cache when there is
// one, and returns how long until the next update.
func (t *tickets) update(ctx context.Context) time.Duration {
	now := t.cfg.now()
	if t.cache == nil {
		set := t.current().rotate(now)
		t.use(set)
		return set.rotated.Add(TicketKeyRotation).Sub(now)
	}
	set, err := t.share(ctx, now)
	if err != nil {
		if ctx.Err() != nil {
			return ticketRetry // run returns
		}
		set = t.current().rotate(now)
		t.use(set)
		retry := min(ticketRetry, set.rotated.Add(TicketKeyRotation).Sub(now))
		t.cfg.event(Event{Kind: EventTicketKeysFailed, Err: err, NextRetry: now.Add(retry)})
		return retry
	}
	t.use(set)
	return min(t.cfg.recheckInterval(), set.rotated.Add(TicketKeyRotation).Sub(now))
}

// share returns the shared set as it should be at now: read from the
// cache; when it is missing or due, rotated (or this node's set written)
// under the lock, after reading it again, so that one node rotates and the
// others read its result.
func (t *tickets) share(ctx context.Context, now time.Time) (ticketKeySet, error) {
	ctx, cancel := context.WithTimeout(ctx, cacheTimeout)
	defer cancel()
	set, err := t.load(ctx)
	if err == nil && !set.due(now) {
		return set, nil
	}
	if err != nil && !errors.Is(err, ErrCacheMiss) && !errors.Is(err, errBadTicketKeys) {
		return ticketKeySet{}, err
	}
	unlock, err := t.locker.Lock(ctx, ticketKeysKey+"+lock")
	if err != nil {
		return ticketKeySet{}, err
	}
	defer unlock()
	set, err = t.load(ctx)
	switch {
	case err == nil && !set.due(now):
		return set, nil // another node rotated while this one waited
	case err == nil:
		set = set.rotate(now)
	case errors.Is(err, ErrCacheMiss), errors.Is(err, errBadTicketKeys):
		set = t.current().rotate(now)
	default:
		return ticketKeySet{}, err
	}
	b, err := set.marshal()
	if err != nil {
		return ticketKeySet{}, err
	}
	if err := t.cache.Put(ctx, ticketKeysKey, b); err != nil {
		return ticketKeySet{}, fmt.Errorf("certs: storing the session ticket keys: %w", err)
	}
	return set, nil
}

// load reads the shared set; ErrCacheMiss when there is none.
func (t *tickets) load(ctx context.Context) (ticketKeySet, error) {
	b, err := t.cache.Get(ctx, ticketKeysKey)
	if err != nil {
		if errors.Is(err, ErrCacheMiss) {
			return ticketKeySet{}, err
		}
		return ticketKeySet{}, fmt.Errorf("certs: reading the session ticket keys: %w", err)
	}
	return parseTicketKeySet(b)
}

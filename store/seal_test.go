package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/maatproxy/maat/internal/testredis"
)

func testKey(t testing.TB) []byte {
	t.Helper()
	k := make([]byte, SealKeySize)
	rand.Read(k)
	return k
}

func testSealer(t testing.TB, key []byte) *Sealer {
	t.Helper()
	s, err := NewSealer(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const testPEM = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBkg4LVWM9nuwNSk3yByxZpYRTBnVJk5oOzj6T1k1tQuoAoGCCqGSM49\n-----END EC PRIVATE KEY-----\n"

func TestSealerRoundTrip(t *testing.T) {
	t.Parallel()
	s := testSealer(t, testKey(t))
	for _, tt := range []struct{ name, key, plain string }{
		{"pem", "maat:blob:certs:example.org", testPEM},
		{"empty", "maat:blob:certs:x", ""},
		{"binary", "maat:blob:k", "\x00\xff\x01maat-sealed-v1:"},
		{"empty_name", "", "data"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sealed := s.Seal(tt.key, []byte(tt.plain))
			if !IsSealed(sealed) || !strings.HasPrefix(string(sealed), "maat-sealed-v1:") {
				t.Fatalf("Seal = %q; want the v1 prefix", sealed)
			}
			if tt.plain != "" && bytes.Contains(sealed, []byte(tt.plain)) {
				t.Fatalf("the sealed value holds the plain one: %q", sealed)
			}
			if again := s.Seal(tt.key, []byte(tt.plain)); bytes.Equal(again, sealed) {
				t.Fatal("two seals of one value are equal: the nonce does not change")
			}
			got, err := s.Open(tt.key, sealed)
			if err != nil || string(got) != tt.plain {
				t.Fatalf("Open = %q, %v; want %q", got, err, tt.plain)
			}
		})
	}
}

func TestSealerRefuses(t *testing.T) {
	t.Parallel()
	key := testKey(t)
	s := testSealer(t, key)
	const name = "maat:blob:certs:example.org"
	sealed := s.Seal(name, []byte(testPEM))
	flipped := bytes.Clone(sealed)
	flipped[len(flipped)-1] ^= 1
	otherKey := bytes.Clone(key)
	otherKey[0] ^= 1
	for _, tt := range []struct {
		name   string
		s      *Sealer
		key    string
		value  []byte
		want   error
		saying string
	}{
		{"plain_pem", s, name, []byte(testPEM), ErrNotSealed, "without a seal"},
		{"plain_json", s, name, []byte(`{"rotated":"2026-12-03T10:00:00Z","keys":["AAAA"]}`), ErrNotSealed, "without a seal"},
		{"empty", s, name, nil, ErrNotSealed, "without a seal"},
		{"newer_version", s, name, append([]byte("maat-sealed-v2:"), sealed[15:]...), ErrOpen, "unknown version"},
		{"family_only", s, name, []byte("maat-sealed-"), ErrOpen, "unknown version"},
		{"header_only", s, name, sealed[:15+4+12], ErrOpen, "cut short"},
		{"other_key", testSealer(t, otherKey), name, sealed, ErrOpen, "another key"},
		{"other_name", s, "maat:blob:certs:evil.example", sealed, ErrOpen, "another name"},
		{"altered", s, name, flipped, ErrOpen, "altered"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.s.Open(tt.key, tt.value)
			if !errors.Is(err, tt.want) || got != nil {
				t.Fatalf("Open = %q, %v; want nil, %v", got, err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.saying) || !strings.Contains(err.Error(), tt.key) {
				t.Errorf("error %q does not name the key and say %q", err, tt.saying)
			}
		})
	}
	// Each strict prefix, and each value with one byte changed, is refused.
	for i := range sealed {
		if _, err := s.Open(name, sealed[:i]); err == nil {
			t.Fatalf("the prefix of %d bytes opened", i)
		}
		b := bytes.Clone(sealed)
		b[i] ^= 0x80
		if _, err := s.Open(name, b); err == nil {
			t.Fatalf("the value with byte %d changed opened", i)
		}
	}
}

func TestNewSealerKeySize(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 16, 31, 33, 64} {
		if _, err := NewSealer(make([]byte, n)); !errors.Is(err, ErrInvalid) {
			t.Errorf("NewSealer(%d bytes) error = %v; want ErrInvalid", n, err)
		}
	}
	if _, err := NewSealed(NewMemory(), SealConfig{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("NewSealed without a key: error = %v; want ErrInvalid", err)
	}
}

// sealedEvents records what a Sealed store reports.
type sealedEvents struct {
	mu       sync.Mutex
	errs     map[string]error
	resealed []string
}

func (e *sealedEvents) config(key []byte, plain func(string, []byte) bool) SealConfig {
	return SealConfig{Key: key, Plain: plain,
		OnError: func(k string, err error) {
			e.mu.Lock()
			defer e.mu.Unlock()
			if e.errs == nil {
				e.errs = map[string]error{}
			}
			e.errs[k] = err
		},
		OnResealed: func(k string) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.resealed = append(e.resealed, k)
		},
	}
}

func (e *sealedEvents) err(k string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.errs[k]
}

// rawStore is where a Sealed store's values really are, read and written
// behind its back: Redis through its own client, or a Memory store.
type rawStore interface {
	get(t *testing.T, key string) []byte
	set(t *testing.T, key string, v []byte)
}

type rawRedis struct{ c *redis.Client }

func (r rawRedis) get(t *testing.T, key string) []byte {
	t.Helper()
	b, err := r.c.Get(t.Context(), prefixBlob+key).Bytes()
	if err != nil {
		t.Fatalf("GET %s%s: %v", prefixBlob, key, err)
	}
	return b
}

func (r rawRedis) set(t *testing.T, key string, v []byte) {
	t.Helper()
	if err := r.c.Set(t.Context(), prefixBlob+key, v, 0).Err(); err != nil {
		t.Fatal(err)
	}
}

type rawMemory struct{ m *Memory }

func (r rawMemory) get(t *testing.T, key string) []byte {
	t.Helper()
	b, err := r.m.Get(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (r rawMemory) set(t *testing.T, key string, v []byte) {
	t.Helper()
	if err := r.m.Put(t.Context(), key, v); err != nil {
		t.Fatal(err)
	}
}

// TestSealed runs a Sealed store over a real redis-server and over memory:
// what the store underneath holds is sealed; a value copied to another
// key, or read with another key, does not open and is reported; a plain
// value is refused, or read once and sealed when SealConfig.Plain lets it.
func TestSealed(t *testing.T) {
	t.Parallel()
	for _, under := range []struct {
		name string
		open func(t *testing.T) (Store, rawStore)
	}{
		{"redis", func(t *testing.T) (Store, rawStore) {
			srv := testredis.Start(t)
			r, err := NewRedis(t.Context(), srv.URL())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Close() })
			return r, rawRedis{srv.Client()}
		}},
		{"memory", func(t *testing.T) (Store, rawStore) {
			m := NewMemory()
			t.Cleanup(func() { m.Close() })
			return m, rawMemory{m}
		}},
	} {
		t.Run(under.name, func(t *testing.T) {
			t.Parallel()
			inner, raw := under.open(t)
			testSealedOver(t, inner, raw)
		})
	}
}

func testSealedOver(t *testing.T, inner Store, raw rawStore) {
	ctx := t.Context()
	key := testKey(t)
	var ev sealedEvents
	isPEM := func(_ string, b []byte) bool { return bytes.HasPrefix(b, []byte("-----BEGIN ")) }
	s, err := NewSealed(inner, ev.config(key, isPEM))
	if err != nil {
		t.Fatal(err)
	}
	ticketKey := bytes.Repeat([]byte{0xa5}, 32)

	// Written through the Sealed store: sealed underneath, no PEM, no
	// raw key.
	if err := s.Put(ctx, "certs:example.org", []byte(testPEM)); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "certs:tickets", ticketKey); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"certs:example.org", "certs:tickets"} {
		v := raw.get(t, k)
		if !IsSealed(v) || bytes.Contains(v, []byte("-----BEGIN")) || bytes.Contains(v, []byte("PRIVATE KEY")) || bytes.Contains(v, ticketKey) {
			t.Errorf("%s holds %q underneath; want it sealed", k, v)
		}
	}
	if got, err := s.Get(ctx, "certs:example.org"); err != nil || string(got) != testPEM {
		t.Fatalf("Get = %q, %v; want the PEM", got, err)
	}

	// Copied to another key underneath: does not open there.
	raw.set(t, "certs:evil.example", raw.get(t, "certs:example.org"))
	if got, err := s.Get(ctx, "certs:evil.example"); !errors.Is(err, ErrOpen) || got != nil {
		t.Fatalf("Get of a value copied from another key = %q, %v; want ErrOpen", got, err)
	}
	if err := ev.err("certs:evil.example"); !errors.Is(err, ErrOpen) {
		t.Errorf("OnError got %v for the copied value; want ErrOpen", err)
	}

	// Another node's key (another secret): does not open, and says so.
	var otherEv sealedEvents
	other, err := NewSealed(inner, otherEv.config(testKey(t), nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Get(ctx, "certs:example.org"); !errors.Is(err, ErrOpen) || !strings.Contains(err.Error(), "another key") {
		t.Fatalf("Get with another key: error = %v; want ErrOpen, sealed with another key", err)
	}
	// The same key in another Sealed store (another node, the same secret)
	// opens it.
	same, err := NewSealed(inner, SealConfig{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := same.Get(ctx, "certs:tickets"); err != nil || !bytes.Equal(got, ticketKey) {
		t.Fatalf("Get with the same key = %x, %v", got, err)
	}

	// Plain values as an older version wrote them: PEM is read once and
	// sealed; anything else is refused.
	raw.set(t, "certs:old.example", []byte(testPEM))
	raw.set(t, "certs:old_tickets", []byte(`{"keys":["pSUlJSUl"]}`))
	if got, err := s.Get(ctx, "certs:old.example"); err != nil || string(got) != testPEM {
		t.Fatalf("Get of a plain PEM = %q, %v; want it read", got, err)
	}
	if v := raw.get(t, "certs:old.example"); !IsSealed(v) {
		t.Errorf("the plain PEM was not written back sealed: %q", v)
	}
	if got, err := s.Get(ctx, "certs:old.example"); err != nil || string(got) != testPEM {
		t.Fatalf("Get after sealing = %q, %v", got, err)
	}
	if got, err := s.Get(ctx, "certs:old_tickets"); !errors.Is(err, ErrNotSealed) || got != nil {
		t.Fatalf("Get of plain JSON = %q, %v; want ErrNotSealed", got, err)
	}
	if err := ev.err("certs:old_tickets"); !errors.Is(err, ErrNotSealed) {
		t.Errorf("OnError got %v for the plain JSON; want ErrNotSealed", err)
	}
	if _, err := same.Get(ctx, "certs:old_tickets"); !errors.Is(err, ErrNotSealed) {
		t.Errorf("without Plain, Get of a plain value: error = %v; want ErrNotSealed", err)
	}
	ev.mu.Lock()
	resealed := ev.resealed
	ev.mu.Unlock()
	if len(resealed) != 1 || resealed[0] != "certs:old.example" {
		t.Errorf("OnResealed got %q; want [certs:old.example]", resealed)
	}

	// Missing is missing; marks and locks pass through.
	if _, err := s.Get(ctx, "certs:none"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get of a missing key: error = %v; want ErrNotFound", err)
	}
	if err := s.Delete(ctx, "certs:example.org"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "certs:example.org"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after Delete: error = %v; want ErrNotFound", err)
	}
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	unlock, err := s.Lock(lctx, "certs:example.org", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	unlock()
}

// newTestSealed returns inner sealed with a random key; closed when the
// test ends.
func newTestSealed(t *testing.T, inner Store) *Sealed {
	t.Helper()
	s, err := NewSealed(inner, SealConfig{Key: testKey(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

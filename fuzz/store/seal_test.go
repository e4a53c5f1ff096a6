// Package storefuzz holds the fuzz targets of package store: the opener of
// sealed values, which reads bytes from Redis that whoever can write to
// Redis chose.
package storefuzz

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/maatproxy/maat/store"
)

// fuzzKey is the sealing key of the targets: fixed, so that a seed sealed
// with it opens.
var fuzzKey = bytes.Repeat([]byte{0x42}, store.SealKeySize)

const pemKey = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBkg4LVWM9nuwNSk3yByxZpYRTBnVJk5oOzj6T1k1tQuoAoGCCqGSM49\n-----END EC PRIVATE KEY-----\n"

func sealer(tb testing.TB) *store.Sealer {
	s, err := store.NewSealer(fuzzKey)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// isPEM is the edge's rule for values written before sealing.
func isPEM(_ string, b []byte) bool { return bytes.HasPrefix(b, []byte("-----BEGIN ")) }

// FuzzOpen: untrusted bytes under a key. No panic; every error wraps
// ErrNotSealed (no seal) or ErrOpen (a seal that does not open); what opens
// opens under its own name only and seals back to itself. Read through a
// Sealed store, a value gives the same answer, and a PEM without a seal is
// read once and found sealed afterwards.
func FuzzOpen(f *testing.F) {
	s := sealer(f)
	const name = "maat:blob:certs:example.org"
	good := s.Seal(name, []byte(pemKey))
	for _, seed := range [][]byte{
		good,
		s.Seal(name, nil),
		s.Seal(name, []byte(`{"rotated":"2026-12-03T10:00:00Z","keys":["WlpaWlpaWlpaWlpaWlpaWlpaWlpaWlpaWlpaWlpaWlo="]}`)),
		good[:len(good)-1],
		good[:15+4+12],
		append([]byte("maat-sealed-v2:"), good[15:]...),
		[]byte("maat-sealed-"),
		[]byte(pemKey),
		[]byte(`{"keys":[]}`),
		nil,
	} {
		f.Add("certs:example.org", seed)
	}
	f.Add("certs:other.example", good)
	f.Fuzz(func(t *testing.T, key string, raw []byte) {
		name := "maat:blob:" + key
		plain, openErr := s.Open(name, raw)
		switch err := openErr; {
		case err == nil:
			if !store.IsSealed(raw) {
				t.Fatalf("a value without a seal opened: %q", raw)
			}
			if _, err := s.Open(name+"x", raw); !errors.Is(err, store.ErrOpen) {
				t.Fatalf("a value opened under another name: %v", err)
			}
			if back, err := s.Open(name, s.Seal(name, plain)); err != nil || !bytes.Equal(back, plain) {
				t.Fatalf("sealed again: %q, %v; want %q", back, err, plain)
			}
		case errors.Is(err, store.ErrNotSealed):
			if store.IsSealed(raw) {
				t.Fatalf("a sealed value said to be without a seal: %v", err)
			}
		case errors.Is(err, store.ErrOpen):
			if !store.IsSealed(raw) {
				t.Fatalf("a value without a seal said not to open: %v", err)
			}
		default:
			t.Fatalf("Open error %v wraps neither ErrNotSealed nor ErrOpen", err)
		}
		if plain != nil && openErr != nil {
			t.Fatal("Open returned a value with its error")
		}

		// The same bytes in a store, read through Sealed.
		ctx := context.Background()
		mem := store.NewMemory()
		defer mem.Close()
		if err := mem.Put(ctx, key, raw); err != nil {
			t.Fatal(err)
		}
		sealed, err := store.NewSealed(mem, store.SealConfig{Key: fuzzKey, Plain: isPEM})
		if err != nil {
			t.Fatal(err)
		}
		got, gerr := sealed.Get(ctx, key)
		migrated := !store.IsSealed(raw) && isPEM(key, raw)
		switch {
		case migrated:
			if gerr != nil || !bytes.Equal(got, raw) {
				t.Fatalf("Get of a plain PEM = %q, %v; want it read", got, gerr)
			}
			now, _ := mem.Get(ctx, key)
			if again, err := s.Open(name, now); err != nil || !bytes.Equal(again, raw) {
				t.Fatalf("the plain PEM was not written back sealed: %q, %v", now, err)
			}
		case openErr == nil:
			if gerr != nil || !bytes.Equal(got, plain) {
				t.Fatalf("Get = %q, %v; Open gave %q", got, gerr, plain)
			}
		default:
			if gerr == nil || got != nil || gerr.Error() != openErr.Error() {
				t.Fatalf("Get = %q, %v; Open failed: %v", got, gerr, openErr)
			}
		}
	})
}

// FuzzSeal: whatever is sealed under a name opens under it to the same
// bytes, and no longer opens with any one byte changed or under another
// name.
func FuzzSeal(f *testing.F) {
	s := sealer(f)
	f.Add("maat:blob:certs:example.org", []byte(pemKey), uint16(0))
	f.Add("", []byte{}, uint16(7))
	f.Fuzz(func(t *testing.T, name string, plain []byte, at uint16) {
		sealed := s.Seal(name, plain)
		got, err := s.Open(name, sealed)
		if err != nil || !bytes.Equal(got, plain) {
			t.Fatalf("Open(Seal(%q)) = %q, %v", plain, got, err)
		}
		if _, err := s.Open(name+"\x00", sealed); !errors.Is(err, store.ErrOpen) {
			t.Fatalf("opened under another name: %v", err)
		}
		b := bytes.Clone(sealed)
		b[int(at)%len(b)] ^= 0x01
		if _, err := s.Open(name, b); err == nil {
			t.Fatalf("opened with byte %d changed", int(at)%len(b))
		}
	})
}

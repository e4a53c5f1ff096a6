package certs

import (
	"encoding/json"
	"errors"
	"testing"
	"time"
)

func TestTicketKeySetRotate(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	base := newTicketKeySet(start)
	k0, k1 := base.keys[0], base.keys[1]
	r := TicketKeyRotation
	tests := []struct {
		name        string
		now         time.Time
		wantRotated time.Time
		wantLen     int
		check       func(t *testing.T, s ticketKeySet)
	}{
		{name: "not due", now: start.Add(r - 1), wantRotated: start, wantLen: 2, check: func(t *testing.T, s ticketKeySet) {
			if s.keys[0] != k0 || s.keys[1] != k1 {
				t.Error("keys changed before their time")
			}
		}},
		{name: "due: the next key encrypts, the current one decrypts still", now: start.Add(r), wantRotated: start.Add(r), wantLen: 3,
			check: func(t *testing.T, s ticketKeySet) {
				if s.keys[0] != k1 || s.keys[2] != k0 || s.keys[1] == k0 || s.keys[1] == k1 {
					t.Error("keys after one rotation are not [next, new, current]")
				}
			}},
		{name: "late: stays on the schedule", now: start.Add(r + r/2), wantRotated: start.Add(r), wantLen: 3},
		{name: "three rotations: the first key is gone", now: start.Add(3 * r), wantRotated: start.Add(3 * r), wantLen: 2 + ticketPrevious,
			check: func(t *testing.T, s ticketKeySet) {
				for _, k := range s.keys {
					if k == k0 {
						t.Error("the first key is still kept after three rotations")
					}
				}
				if s.keys[3] != k1 {
					t.Error("the second key is not the oldest kept")
				}
			}},
		{name: "too old to keep anything: a fresh set", now: start.Add(30 * r), wantRotated: start.Add(30 * r), wantLen: 2,
			check: func(t *testing.T, s ticketKeySet) {
				if s.keys[0] == k0 || s.keys[0] == k1 || s.keys[1] == k0 || s.keys[1] == k1 {
					t.Error("a fresh set reuses old keys")
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := base.rotate(tt.now)
			if !s.rotated.Equal(tt.wantRotated) || len(s.keys) != tt.wantLen {
				t.Fatalf("rotate(start+%v): rotated start+%v, %d keys; want start+%v, %d", tt.now.Sub(start),
					s.rotated.Sub(start), len(s.keys), tt.wantRotated.Sub(start), tt.wantLen)
			}
			if s.due(tt.now) {
				t.Error("a rotated set is due at once")
			}
			if tt.check != nil {
				tt.check(t, s)
			}
		})
	}
}

func TestParseTicketKeySet(t *testing.T) {
	t.Parallel()
	good := newTicketKeySet(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)).rotate(time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC))
	b, err := good.marshal()
	if err != nil {
		t.Fatal(err)
	}
	if s, err := parseTicketKeySet(b); err != nil || !s.equal(good) {
		t.Fatalf("round trip: %v, equal %v", err, s.equal(good))
	}
	mk := func(j ticketKeysJSON) []byte {
		b, err := json.Marshal(j)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	key := make([]byte, 32)
	now := time.Now()
	tests := []struct {
		name string
		in   []byte
	}{
		{"not JSON", []byte("-----BEGIN")},
		{"no time", mk(ticketKeysJSON{Keys: [][]byte{key, key}})},
		{"one key", mk(ticketKeysJSON{Rotated: now, Keys: [][]byte{key}})},
		{"too many keys", mk(ticketKeysJSON{Rotated: now, Keys: make([][]byte, maxTicketKeys+1)})},
		{"short key", mk(ticketKeysJSON{Rotated: now, Keys: [][]byte{key, key[:31]}})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := parseTicketKeySet(tt.in); !errors.Is(err, errBadTicketKeys) {
				t.Errorf("parse error = %v; want errBadTicketKeys", err)
			}
		})
	}
}

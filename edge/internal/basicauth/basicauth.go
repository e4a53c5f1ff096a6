// Package basicauth checks HTTP Basic credentials (RFC 7617) against
// bcrypt hashes, for a route that asks for a user name and password.
//
// bcrypt is slow on purpose (tens of milliseconds), so a verified pair is
// remembered by its SHA-256 until the configuration changes (a new Auth),
// in a bounded cache; any other attempt first asks the caller whether the
// client may try once more (a rate limit on attempts), then waits for one
// of a few bcrypt Slots shared by every route, so that a flood of wrong
// passwords never takes more than a share of the machine. An unknown user
// costs the same bcrypt time as a known one, so names cannot be probed.
//
// basicauth imports no package of this module.
package basicauth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// An Auth holds one route's users. Make one with New.
type Auth struct {
	realm string
	users map[string][]byte
	dummy []byte // a hash of nothing anyone types, at the users' cost
	mu    sync.Mutex
	ok    map[[32]byte]bool
}

// maxCache bounds the pairs an Auth remembers as verified.
const maxCache = 1024

// New returns an Auth for users (name → bcrypt hash) in realm; "" is
// "restricted".
func New(realm string, users map[string]string) *Auth {
	a := &Auth{realm: realm, users: map[string][]byte{}, ok: map[[32]byte]bool{}}
	if a.realm == "" {
		a.realm = "restricted"
	}
	cost := bcrypt.DefaultCost
	for u, h := range users {
		a.users[u] = []byte(h)
		if c, err := bcrypt.Cost([]byte(h)); err == nil {
			cost = c
		}
	}
	nothing := make([]byte, 16)
	_, _ = rand.Read(nothing)
	a.dummy, _ = bcrypt.GenerateFromPassword(nothing, cost)
	return a
}

// Result is what Check found.
type Result uint8

const (
	OK      Result = iota
	Failed         // no credentials or wrong ones: 401 (Challenge)
	Limited        // too many attempts from this client: 429
	Busy           // every bcrypt slot taken for too long: 503
)

// Slots bound the bcrypt comparisons running at once; every Auth of a
// server shares one. Make them with NewSlots.
type Slots chan struct{}

// NewSlots returns Slots for half the CPUs (at least one).
func NewSlots() Slots { return make(Slots, max(1, runtime.GOMAXPROCS(0)/2)) }

// queue is how long a password check waits for a bcrypt slot.
const queue = 2 * time.Second

// Check checks r's Basic credentials. A pair verified before is
// remembered (no bcrypt); for any other attempt, mayTry is asked whether
// the client may try once more (false: Limited), then the comparison waits
// for one of slots, at most two seconds and while r's context lasts (then:
// Busy).
func (a *Auth) Check(r *http.Request, slots Slots, mayTry func(context.Context) bool) Result {
	user, pass, ok := r.BasicAuth()
	if !ok {
		return Failed
	}
	key := sha256.Sum256([]byte(user + "\x00" + pass))
	a.mu.Lock()
	cached := a.ok[key]
	a.mu.Unlock()
	if cached {
		return OK
	}
	if !mayTry(r.Context()) {
		return Limited
	}
	t := time.NewTimer(queue)
	select {
	case slots <- struct{}{}:
		t.Stop()
	case <-t.C:
		return Busy
	case <-r.Context().Done():
		t.Stop()
		return Busy
	}
	good := a.compare(user, pass)
	<-slots
	if !good {
		return Failed
	}
	a.mu.Lock()
	if len(a.ok) >= maxCache {
		clear(a.ok)
	}
	a.ok[key] = true
	a.mu.Unlock()
	return OK
}

// compare runs bcrypt for user and pass; an unknown user costs the same
// time as a known one.
func (a *Auth) compare(user, pass string) bool {
	hash, known := a.users[user]
	if !known {
		_ = bcrypt.CompareHashAndPassword(a.dummy, []byte(pass))
		return false
	}
	return bcrypt.CompareHashAndPassword(hash, []byte(pass)) == nil
}

// Challenge answers 401 with the realm, asking for credentials.
func (a *Auth) Challenge(w http.ResponseWriter) {
	h := w.Header()
	h.Set("WWW-Authenticate", `Basic realm="`+strings.ReplaceAll(a.realm, `"`, "'")+`", charset="UTF-8"`)
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write([]byte("401 Unauthorized: this part of the site needs a user name and password.\n"))
}

package upstream

import (
	"net/url"
	"slices"
	"sync/atomic"
	"time"
)

// Pool is the set of addresses of one route: round robin over the healthy
// ones, with passive health (an address whose dial fails is skipped for
// Options.FailPause). The pools of a Transport share one set of connection
// slots per address.
type Pool struct {
	targets []*target
	next    atomic.Uint32
	pause   time.Duration
	plain   bool // every address is plain HTTP (TCP or unix socket): Common may take its requests
}

type target struct {
	url       *url.URL
	slots     *connSlots   // shared by every pool of the Transport to the same address
	downUntil atomic.Int64 // unix nanoseconds; 0 = healthy
}

// NewPool returns the pool of urls (http:// or https://, with a port),
// whose addresses share t's connection slots with t's other pools.
func (t *Transport) NewPool(urls []*url.URL) *Pool {
	p := &Pool{pause: t.failPause, targets: make([]*target, len(urls)), plain: true}
	for i, u := range urls {
		p.targets[i] = &target{url: u, slots: t.slots.forHost(u.Host)}
		p.plain = p.plain && u.Scheme == "http"
	}
	return p
}

// pick returns the next healthy address not in skip, or, when every
// address is paused, the one whose pause ends first: a request is tried
// rather than refused outright. It returns nil only when skip holds every
// address.
func (p *Pool) pick(now time.Time, skip []*target) *target {
	n := uint32(len(p.targets))
	start := p.next.Add(1) - 1
	var soonest *target
	for i := range n {
		t := p.targets[(start+i)%n]
		if slices.Contains(skip, t) {
			continue
		}
		if t.downUntil.Load() <= now.UnixNano() {
			return t
		}
		if soonest == nil || t.downUntil.Load() < soonest.downUntil.Load() {
			soonest = t
		}
	}
	return soonest
}

// fail pauses the address.
func (p *Pool) fail(t *target, now time.Time) { t.downUntil.Store(now.Add(p.pause).UnixNano()) }

// ok marks the address healthy again.
func (p *Pool) ok(t *target) {
	if t.downUntil.Load() != 0 {
		t.downUntil.Store(0)
	}
}

// State is what one address of a Pool holds at a moment, for tests and
// metrics.
type State struct {
	Addr    string // host:port, as in the URL
	Down    bool   // skipped by this pool after a failure
	Busy    int    // connection slots held
	Waiting int    // requests waiting for a slot
	Streams int    // streams open
	Reading int    // answers holding a slot whose read waits for the upstream
}

// State returns the state of each of the pool's addresses, in the order of
// its URLs.
func (p *Pool) State() []State {
	now := time.Now().UnixNano()
	out := make([]State, len(p.targets))
	for i, t := range p.targets {
		s := t.slots
		st := State{Addr: t.url.Host, Down: t.downUntil.Load() > now, Streams: int(s.nstreams.Load())}
		s.mu.Lock()
		st.Busy, st.Waiting = s.inUse, s.nwait
		for b := range s.answers {
			if b.readSince.Load() != 0 {
				st.Reading++
			}
		}
		s.mu.Unlock()
		out[i] = st
	}
	return out
}

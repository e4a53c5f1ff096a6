package edge

import (
	"net/url"
	"sync/atomic"
	"time"
)

// pool is the set of addresses of one route: round robin over the healthy
// ones, with passive health (an address whose dial or connection fails is
// skipped for a pause).
type pool struct {
	targets []*target
	next    atomic.Uint32
	pause   time.Duration
}

type target struct {
	url       *url.URL
	downUntil atomic.Int64 // unix nanoseconds; 0 = healthy
}

func newPool(us Upstreams, pause time.Duration) *pool {
	p := &pool{pause: pause, targets: make([]*target, len(us))}
	for i, u := range us {
		p.targets[i] = &target{url: u}
	}
	return p
}

// pick returns the next healthy address after skip (nil: none skipped), or,
// when every address is paused, the one whose pause ends first: a request
// is tried rather than refused outright.
func (p *pool) pick(now time.Time, skip map[*target]bool) *target {
	n := uint32(len(p.targets))
	start := p.next.Add(1) - 1
	var soonest *target
	for i := range n {
		t := p.targets[(start+i)%n]
		if skip[t] {
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
func (p *pool) fail(t *target, now time.Time) { t.downUntil.Store(now.Add(p.pause).UnixNano()) }

// ok marks the address healthy again.
func (p *pool) ok(t *target) {
	if t.downUntil.Load() != 0 {
		t.downUntil.Store(0)
	}
}

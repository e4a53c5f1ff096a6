package drain

import (
	"context"
	"sync/atomic"
)

// A Gate counts the requests being served, so that Shutdown closes the
// logs only after the last one has written its lines. Entering and leaving
// cost an atomic addition each. Make one with NewGate.
type Gate struct {
	n       atomic.Int64 // requests in flight, plus shutBit once shut
	waiting atomic.Bool  // a Wait runs: Leave signals idle when n falls to zero
	idle    chan struct{}
}

// shutBit is added to Gate.n when the gate shuts: no request enters after
// it.
const shutBit = 1 << 40

// NewGate returns an open Gate.
func NewGate() *Gate { return &Gate{idle: make(chan struct{}, 1)} }

// Enter counts a request in; it reports false once the gate shut (every
// connection is closed by then: nobody would read an answer). Call Leave
// when it reported true and the request is done.
func (g *Gate) Enter() bool {
	if g.n.Add(1) >= shutBit {
		g.Leave()
		return false
	}
	return true
}

// Leave counts a request out.
func (g *Gate) Leave() {
	if g.n.Add(-1)%shutBit == 0 && g.waiting.Load() {
		select {
		case g.idle <- struct{}{}:
		default:
		}
	}
}

// Shut lets no request in from now on. Call it once.
func (g *Gate) Shut() { g.n.Add(shutBit) }

// InFlight is the number of requests being served.
func (g *Gate) InFlight() int64 { return g.n.Load() % shutBit }

// Wait waits until no request is being served, or ctx ends.
func (g *Gate) Wait(ctx context.Context) error {
	g.waiting.Store(true) // before the load: a Leave that falls to zero after it signals
	for g.InFlight() != 0 {
		select {
		case <-g.idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

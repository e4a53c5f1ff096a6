package upstream

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// connSlots caps the connections to one upstream address (Options.Conns):
// an exchange holds a slot while it uses a connection, and a request
// beyond the cap waits, at most Options.Queue, for one. HTTP/1.1 carries one exchange per
// connection, so slots are connections; a small application behind the
// edge sees at most that many, whatever a flood of clients does.
//
// A freed slot goes to the waiting client that holds the fewest slots
// (the oldest of its requests): a client queuing hundreds of requests
// waits behind its own, not in front of everyone else's.
//
// Streams hold no slot: a websocket, an answer of server-sent events, and
// a long poll (an answer whose body has been quiet for Options.StreamQuiet
// while a request waits for a slot) are counted under their own bound
// (Options.Streams), so that open tabs never starve the site.
type connSlots struct {
	size int
	// streams is the bound of streams, nstreams their number.
	streams  int32
	nstreams atomic.Int32
	quiet    time.Duration // Options.StreamQuiet, or DefaultStreamQuiet
	// stalled counts the slots held by answers whose client fell behind
	// and whose rest could not be read ahead (spill.Body): at most half the
	// slots may be held so, the other half stays for everyone else.
	stalled atomic.Int32

	mu      sync.Mutex // guards the fields below
	inUse   int
	held    map[netip.Addr]int       // slots held, by client
	waiting map[netip.Addr][]*waiter // each client's waiting requests, oldest first
	nwait   int
	seq     uint64
	answers map[*body]struct{} // the answers holding a slot, being sent
	sweeper *time.Timer        // settles the answers again while requests wait
	armed   bool               // sweeper is set
}

// DefaultStreamQuiet is how long the read of an answer's body must have
// waited for the upstream, if Options.StreamQuiet is zero, before the
// answer counts as a stream (a long poll) and gives its slot to a waiting
// request.
const DefaultStreamQuiet = time.Second

// ErrStreamsFull is a stream beyond Options.Streams.
var ErrStreamsFull = errors.New("upstream: streams all open")

// waiter is a request waiting for a slot.
type waiter struct {
	ready   chan struct{} // receives the slot
	seq     uint64        // arrival order
	granted bool          // set with mu held when the slot is handed over
}

func newConnSlots(size, streams int, quiet time.Duration) *connSlots {
	if quiet <= 0 {
		quiet = DefaultStreamQuiet
	}
	return &connSlots{size: size, streams: int32(streams), quiet: quiet,
		held: map[netip.Addr]int{}, waiting: map[netip.Addr][]*waiter{}}
}

// takeStream counts one more stream, or reports false when Options.Streams
// are open.
func (s *connSlots) takeStream() bool {
	if s.nstreams.Add(1) > s.streams {
		s.nstreams.Add(-1)
		return false
	}
	return true
}

func (s *connSlots) giveStream() { s.nstreams.Add(-1) }

// Stall counts one more slot held by a client that fell behind, or reports
// false when half the slots already are (spill.Slots).
func (s *connSlots) Stall() bool {
	if int(s.stalled.Add(1)) > max(1, s.size/2) {
		s.stalled.Add(-1)
		return false
	}
	return true
}

// Unstall gives back a slot Stall counted.
func (s *connSlots) Unstall() { s.stalled.Add(-1) }

// acquire takes a slot for client, waiting at most queue (or until ctx
// ends: a reset stream leaves the line at once).
func (s *connSlots) acquire(ctx context.Context, client netip.Addr, queue time.Duration) error {
	s.mu.Lock()
	if s.inUse < s.size && s.nwait == 0 {
		s.inUse++
		s.held[client]++
		s.mu.Unlock()
		return nil
	}
	s.seq++
	w := &waiter{ready: make(chan struct{}, 1), seq: s.seq}
	s.waiting[client] = append(s.waiting[client], w)
	s.nwait++
	if !s.armed {
		s.armed = true
		if s.sweeper == nil {
			s.sweeper = time.AfterFunc(s.quiet/4, s.sweep)
		} else {
			s.sweeper.Reset(s.quiet / 4)
		}
	}
	s.mu.Unlock()
	s.settle()

	t := time.NewTimer(queue)
	defer t.Stop()
	var err error
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-t.C:
		err = ErrQueueFull
	}
	s.mu.Lock()
	if w.granted { // handed over as we gave up: give it back
		s.mu.Unlock()
		s.release(client)
		return err
	}
	q := s.waiting[client]
	for i, x := range q {
		if x == w {
			q = append(q[:i], q[i+1:]...)
			break
		}
	}
	if len(q) == 0 {
		delete(s.waiting, client)
	} else {
		s.waiting[client] = q
	}
	s.nwait--
	s.mu.Unlock()
	return err
}

// release gives client's slot to the waiting client holding the fewest
// slots, or frees it.
func (s *connSlots) release(client netip.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[client] <= 1 {
		delete(s.held, client)
	} else {
		s.held[client]--
	}
	if s.nwait == 0 {
		s.inUse--
		return
	}
	var next netip.Addr
	var best *waiter
	for c, q := range s.waiting {
		w := q[0]
		if best == nil || s.held[c] < s.held[next] || s.held[c] == s.held[next] && w.seq < best.seq {
			next, best = c, w
		}
	}
	if q := s.waiting[next][1:]; len(q) == 0 {
		delete(s.waiting, next)
	} else {
		s.waiting[next] = q
	}
	s.nwait--
	s.held[next]++
	best.granted = true
	best.ready <- struct{}{}
}

// settle frees what slots it can for the requests waiting: an answer
// whose read has waited quiet for the upstream is a long poll, and gives
// its slot up as a stream; the others are read ahead of their clients
// (spill.Body.Drain), and the first to end frees its connection. Neither
// blocks.
func (s *connSlots) settle() {
	s.mu.Lock()
	answers := make([]*body, 0, len(s.answers))
	for b := range s.answers {
		answers = append(answers, b)
	}
	s.mu.Unlock()
	now := time.Now().UnixNano()
	for _, b := range answers {
		if since := b.readSince.Load(); since != 0 && now-since >= int64(s.quiet) && b.toStream() {
			continue
		}
		if sb := b.spill.Load(); sb != nil {
			sb.Drain()
		}
	}
}

// sweep settles the answers again while requests wait: a long poll is
// found quiet only a while after they began to wait.
func (s *connSlots) sweep() {
	s.settle()
	s.mu.Lock()
	if s.armed = s.nwait > 0; s.armed {
		s.sweeper.Reset(s.quiet / 4)
	}
	s.mu.Unlock()
}

// track and untrack keep the set of answers holding a slot, which a
// waiting request settles.
func (s *connSlots) track(b *body) {
	s.mu.Lock()
	if s.answers == nil {
		s.answers = map[*body]struct{}{}
	}
	s.answers[b] = struct{}{}
	s.mu.Unlock()
}

func (s *connSlots) untrack(b *body) {
	s.mu.Lock()
	delete(s.answers, b)
	s.mu.Unlock()
}

// busy is the number of slots held.
func (s *connSlots) busy() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inUse
}

// slotTable holds one connSlots per upstream address of a Transport.
type slotTable struct {
	size, streams int
	quiet         time.Duration // DefaultStreamQuiet if zero

	mu     sync.Mutex
	byHost map[string]*connSlots
}

func (t *slotTable) forHost(host string) *connSlots {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.byHost[host]; ok {
		return s
	}
	if t.byHost == nil {
		t.byHost = map[string]*connSlots{}
	}
	s := newConnSlots(t.size, t.streams, t.quiet)
	t.byHost[host] = s
	return s
}

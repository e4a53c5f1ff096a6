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
// The line is fair by client cluster (Route.Cluster, or the client's
// address without one): a freed slot goes to a priority request first
// (Route.Priority: pass holders, allowed crawlers) of a cluster holding
// fewer than half the slots, then to the waiting
// cluster that holds the fewest slots, and among those to the one served
// least recently, so that clusters take turns (round robin) and a cluster
// queuing hundreds of requests waits behind its own. The line holds at
// most Options.QueueLen requests; when it is full, a newcomer takes the
// place of the newest request of the cluster that has the most waiting
// (its fair share is the smallest), or, when that is the newcomer's own,
// is refused: ErrQueueShare.
//
// Streams hold no slot: a websocket, an answer of server-sent events, and
// a long poll (an answer whose body has been quiet for Options.StreamQuiet
// while a request waits for a slot) are counted under their own bound
// (Options.Streams), so that open tabs never starve the site.
type connSlots struct {
	size     int
	queueLen int // the most requests waiting
	// streams is the bound of streams, nstreams their number.
	streams  int32
	nstreams atomic.Int32
	quiet    time.Duration // Options.StreamQuiet, or DefaultStreamQuiet
	// stalled counts the slots held by answers whose client fell behind
	// and whose rest could not be read ahead (spill.Body): at most half the
	// slots may be held so, the other half stays for everyone else.
	stalled atomic.Int32

	lat latencies // the upstream's time to an answer's head

	mu      sync.Mutex // guards the fields below
	inUse   int
	held    map[flow]int    // slots held, by cluster
	served  map[flow]uint64 // grants when the cluster, holding or waiting, was last given a slot
	waiting map[flow]*queue // each cluster's waiting requests
	nwait   int
	nprio   int                // of nwait, the priority requests
	seq     uint64             // arrival order
	grants  uint64             // slots handed over, for the clusters' turns
	answers map[*body]struct{} // the answers holding a slot, being sent
	sweeper *time.Timer        // settles the answers again while requests wait
	armed   bool               // sweeper is set
}

// flow is whom a request counts for in the line: its cluster, or, without
// one, its client's address.
type flow struct {
	cluster string
	client  netip.Addr
}

// queue is one cluster's waiting requests, oldest first.
type queue struct {
	ws   []*waiter
	prio int // the priority requests among ws
}

// DefaultStreamQuiet is how long the read of an answer's body must have
// waited for the upstream, if Options.StreamQuiet is zero, before the
// answer counts as a stream (a long poll) and gives its slot to a waiting
// request.
const DefaultStreamQuiet = time.Second

// DefaultQueueFactor times Options.Conns, and at least DefaultQueueMin, is
// Options.QueueLen's default.
const DefaultQueueFactor = 8

// DefaultQueueMin is the shortest default line: twice what one client may
// have in flight (limits.requests_per_client's default, 256), so that one
// person's page of many parts, waiting for a small application's slots,
// never finds the line full of its own requests (a 503 for a picture on
// an idle site).
const DefaultQueueMin = 512

// defaultQueueLen is the line's length for size slots when none is set.
func defaultQueueLen(size int) int { return max(DefaultQueueFactor*size, DefaultQueueMin) }

var (
	// ErrStreamsFull is a stream beyond Options.Streams.
	ErrStreamsFull = errors.New("upstream: streams all open")
	// ErrQueueShare is a request refused, or put out of the line, because
	// the line was full and its cluster held the largest share of it.
	ErrQueueShare = errors.New("upstream: the client cluster's share of the queue is full")
)

// waiter is a request waiting for a slot.
type waiter struct {
	ready chan error // receives nil with the slot, or ErrQueueShare
	seq   uint64     // arrival order
	since int64      // when it began to wait, UnixNano
	prio  bool
	done  bool // set with mu held when the slot is handed over or the waiter put out
}

func newConnSlots(size, queueLen, streams int, quiet time.Duration) *connSlots {
	if quiet <= 0 {
		quiet = DefaultStreamQuiet
	}
	if queueLen <= 0 {
		queueLen = defaultQueueLen(size)
	}
	return &connSlots{size: size, queueLen: max(queueLen, 1), streams: int32(streams), quiet: quiet,
		held: map[flow]int{}, served: map[flow]uint64{}, waiting: map[flow]*queue{}}
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

// acquire takes a slot for f, waiting at most patience (or until ctx ends: a
// reset stream leaves the line at once); a priority request is served
// before the others.
func (s *connSlots) acquire(ctx context.Context, f flow, prio bool, patience time.Duration) error {
	s.mu.Lock()
	if s.inUse < s.size && s.nwait == 0 {
		s.inUse++
		s.held[f]++
		s.grants++
		s.served[f] = s.grants
		s.mu.Unlock()
		return nil
	}
	if s.nwait >= s.queueLen && !s.makeRoom(f, prio) {
		s.mu.Unlock()
		return ErrQueueShare
	}
	s.seq++
	w := &waiter{ready: make(chan error, 1), seq: s.seq, since: time.Now().UnixNano(), prio: prio}
	q := s.waiting[f]
	if q == nil {
		q = &queue{}
		s.waiting[f] = q
	}
	q.ws = append(q.ws, w)
	s.nwait++
	if prio {
		q.prio++
		s.nprio++
	}
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

	t := time.NewTimer(patience)
	defer t.Stop()
	var err error
	select {
	case err = <-w.ready:
		return err
	case <-ctx.Done():
		err = ctx.Err()
	case <-t.C:
		err = ErrQueueFull
	}
	s.mu.Lock()
	if w.done { // handed over (or put out) as we gave up
		s.mu.Unlock()
		if <-w.ready == nil {
			s.release(f)
		}
		return err
	}
	s.remove(f, w)
	s.mu.Unlock()
	return err
}

// makeRoom puts out the newest ordinary request of the cluster with the
// most waiting (of those with a request that may be put out), for a
// newcomer of f, and reports whether it did: not when
// f's line (with the newcomer) would be the longest, unless the newcomer
// has priority and ordinary requests wait. A cluster's priority requests
// are never put out up to half the line (prioLine); beyond it they count,
// and go, as ordinary ones: a pass or a crawler's name is no licence to
// take the whole line. s.mu is held.
func (s *connSlots) makeRoom(f flow, prio bool) bool {
	var fat flow
	most := -1
	for c, q := range s.waiting {
		if s.evictable(q) == 0 {
			continue // protected priority requests only: none is put out
		}
		if n := len(q.ws); n > most || n == most && c == f {
			fat, most = c, n
		}
	}
	if most <= 0 {
		return false
	}
	if !prio {
		own := 0
		if q := s.waiting[f]; q != nil {
			own = len(q.ws)
		}
		if fat == f || own+1 > most {
			return false
		}
	}
	q := s.waiting[fat]
	for i := len(q.ws) - 1; i >= 0; i-- {
		if w := q.ws[i]; !w.prio {
			s.putOut(fat, w)
			return true
		}
	}
	if fat == f {
		return false // the newcomer's own priority requests, past its share
	}
	// Priority requests beyond the cluster's protected share.
	s.putOut(fat, q.ws[len(q.ws)-1])
	return true
}

// evictable is how many of q's requests may be put out: its ordinary ones
// and its priority ones beyond prioLine. s.mu is held.
func (s *connSlots) evictable(q *queue) int { return len(q.ws) - min(q.prio, s.prioLine()) }

// prioLine is how many of one cluster's priority requests are never put
// out of a full line: half of it.
func (s *connSlots) prioLine() int { return max(1, s.queueLen/2) }

// prioSlots is how many slots a cluster may hold and still have its
// priority requests served before the others': half of them. Past it,
// its requests take their turn as ordinary ones, so that one pass holder
// or one crawler cannot take every slot from the people without a pass.
func (s *connSlots) prioSlots() int { return max(1, (s.size+1)/2) }

// putOut takes w out of f's line and tells it so. s.mu is held.
func (s *connSlots) putOut(f flow, w *waiter) {
	s.remove(f, w)
	w.done = true
	w.ready <- ErrQueueShare
}

// remove takes w out of f's line. s.mu is held.
func (s *connSlots) remove(f flow, w *waiter) {
	q := s.waiting[f]
	for i, x := range q.ws {
		if x == w {
			q.ws = append(q.ws[:i], q.ws[i+1:]...)
			break
		}
	}
	s.nwait--
	if w.prio {
		q.prio--
		s.nprio--
	}
	if len(q.ws) == 0 {
		delete(s.waiting, f)
		if s.held[f] == 0 {
			delete(s.served, f)
		}
	}
}

// release gives f's slot to the next waiting request (see connSlots), or
// frees it.
func (s *connSlots) release(f flow) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[f] <= 1 {
		delete(s.held, f)
		if s.waiting[f] == nil {
			delete(s.served, f)
		}
	} else {
		s.held[f]--
	}
	if s.nwait == 0 {
		s.inUse--
		return
	}
	var next flow
	var best *waiter
	if s.nprio > 0 {
		next, best = s.pick(true)
	}
	if best == nil {
		next, best = s.pick(false)
	}
	s.held[next]++
	s.remove(next, best)
	s.grants++
	s.served[next] = s.grants
	best.done = true
	best.ready <- nil
}

// pick chooses the next request served: with prio, the oldest priority
// request of a cluster holding fewer than prioSlots (nil if none);
// without, each cluster's oldest, whatever its priority. Among clusters,
// before decides. s.mu is held.
func (s *connSlots) pick(prio bool) (flow, *waiter) {
	var next flow
	var best *waiter
	for c, q := range s.waiting {
		w := q.ws[0]
		if prio {
			if q.prio == 0 || s.held[c] >= s.prioSlots() {
				continue
			}
			for _, x := range q.ws {
				if x.prio {
					w = x
					break
				}
			}
		}
		if best == nil || s.before(c, w, next, best) {
			next, best = c, w
		}
	}
	return next, best
}

// before reports whether cluster a's request wa is served before cluster
// b's wb: the cluster holding fewer slots, then the one served least
// recently, then the older request. s.mu is held.
func (s *connSlots) before(a flow, wa *waiter, b flow, wb *waiter) bool {
	if ha, hb := s.held[a], s.held[b]; ha != hb {
		return ha < hb
	}
	if sa, sb := s.served[a], s.served[b]; sa != sb {
		return sa < sb
	}
	return wa.seq < wb.seq
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
	size, queueLen, streams int
	conns                   func(addr string) int // the address's own size, or 0
	quiet                   time.Duration         // DefaultStreamQuiet if zero

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
	size := t.size
	if t.conns != nil {
		if n := t.conns(host); n > 0 {
			size = n
		}
	}
	queueLen := t.queueLen
	if queueLen <= 0 {
		queueLen = defaultQueueLen(size)
	}
	s := newConnSlots(size, queueLen, t.streams, t.quiet)
	t.byHost[host] = s
	return s
}

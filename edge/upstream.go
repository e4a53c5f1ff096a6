package edge

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"sync"
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
	plain   bool // every address is plain HTTP (TCP or unix socket): proxyCommon may take its requests
}

type target struct {
	url       *url.URL
	slots     *connSlots   // shared by every route to the same address
	downUntil atomic.Int64 // unix nanoseconds; 0 = healthy
}

func newPool(us Upstreams, pause time.Duration, slots *slotTable) *pool {
	p := &pool{pause: pause, targets: make([]*target, len(us)), plain: true}
	for i, u := range us {
		p.targets[i] = &target{url: u, slots: slots.forHost(u.Host)}
		p.plain = p.plain && u.Scheme == "http"
	}
	return p
}

// pick returns the next healthy address not in skip, or, when every
// address is paused, the one whose pause ends first: a request is tried
// rather than refused outright. It returns nil only when skip holds every
// address.
func (p *pool) pick(now time.Time, skip []*target) *target {
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
func (p *pool) fail(t *target, now time.Time) { t.downUntil.Store(now.Add(p.pause).UnixNano()) }

// ok marks the address healthy again.
func (p *pool) ok(t *target) {
	if t.downUntil.Load() != 0 {
		t.downUntil.Store(0)
	}
}

// connSlots caps the connections to one upstream address
// (limits.upstream_conns): an exchange holds a slot while it uses a
// connection, and a request beyond the cap waits, at most
// limits.upstream_queue, for one. HTTP/1.1 carries one exchange per
// connection, so slots are connections; a small application behind the
// edge sees at most that many, whatever a flood of clients does.
//
// A freed slot goes to the waiting client that holds the fewest slots
// (the oldest of its requests): a client queuing hundreds of requests
// waits behind its own, not in front of everyone else's.
//
// Streams hold no slot: a websocket, an answer of server-sent events, and
// a long poll (an answer whose body has been quiet for streamQuiet while a
// request waits for a slot) are counted under their own bound
// (limits.upstream_streams), so that open tabs never starve the site.
type connSlots struct {
	size int
	// streams is the bound of streams, nstreams their number.
	streams  int32
	nstreams atomic.Int32
	quiet    time.Duration // streamQuiet, or the test's
	// stalled counts the slots held by answers whose client fell behind
	// and whose rest could not be read ahead (spillBody): at most half the
	// slots may be held so, the other half stays for everyone else.
	stalled atomic.Int32

	mu      sync.Mutex // guards the fields below
	inUse   int
	held    map[netip.Addr]int       // slots held, by client
	waiting map[netip.Addr][]*waiter // each client's waiting requests, oldest first
	nwait   int
	seq     uint64
	answers map[*upstreamBody]struct{} // the answers holding a slot, being sent
	sweeper *time.Timer                // settles the answers again while requests wait
	armed   bool                       // sweeper is set
}

// streamQuiet is how long the read of an answer's body must have waited
// for the upstream before the answer counts as a stream (a long poll) and
// gives its slot to a waiting request.
const streamQuiet = time.Second

// errStreamsFull is a stream beyond limits.upstream_streams.
var errStreamsFull = errors.New("edge: upstream streams all open")

// waiter is a request waiting for a slot.
type waiter struct {
	ready   chan struct{} // receives the slot
	seq     uint64        // arrival order
	granted bool          // set with mu held when the slot is handed over
}

func newConnSlots(size, streams int, quiet time.Duration) *connSlots {
	if quiet <= 0 {
		quiet = streamQuiet
	}
	return &connSlots{size: size, streams: int32(streams), quiet: quiet,
		held: map[netip.Addr]int{}, waiting: map[netip.Addr][]*waiter{}}
}

// takeStream counts one more stream, or reports false when
// limits.upstream_streams are open.
func (s *connSlots) takeStream() bool {
	if s.nstreams.Add(1) > s.streams {
		s.nstreams.Add(-1)
		return false
	}
	return true
}

func (s *connSlots) giveStream() { s.nstreams.Add(-1) }

// stall counts one more slot held by a client that fell behind, or reports
// false when half the slots already are.
func (s *connSlots) stall() bool {
	if int(s.stalled.Add(1)) > max(1, s.size/2) {
		s.stalled.Add(-1)
		return false
	}
	return true
}

func (s *connSlots) unstall() { s.stalled.Add(-1) }

// acquire takes a slot for client, waiting at most queue (or until ctx
// ends: a reset stream leaves the line at once).
func (s *connSlots) acquire(ctx context.Context, client netip.Addr, queue time.Duration) error {
	client = clientKey(client)
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
		err = errQueueFull
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
	client = clientKey(client)
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
// whose read has waited streamQuiet for the upstream is a long poll, and
// gives its slot up as a stream; the others are read ahead of their
// clients (spillBody.drain), and the first to end frees its connection.
// Neither blocks.
func (s *connSlots) settle() {
	s.mu.Lock()
	answers := make([]*upstreamBody, 0, len(s.answers))
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
			sb.drain()
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
func (s *connSlots) track(b *upstreamBody) {
	s.mu.Lock()
	if s.answers == nil {
		s.answers = map[*upstreamBody]struct{}{}
	}
	s.answers[b] = struct{}{}
	s.mu.Unlock()
}

func (s *connSlots) untrack(b *upstreamBody) {
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

// slotTable holds one connSlots per upstream address of a Handler.
type slotTable struct {
	size, streams int
	quiet         time.Duration // streamQuiet if zero
	byHost        map[string]*connSlots
}

func (t *slotTable) forHost(host string) *connSlots {
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

// upstreamTLSConfigs builds the TLS configuration of every https://
// upstream address from its site's or route's upstream_tls. Validate has
// refused one address with two different settings.
func upstreamTLSConfigs(cfg *Config) (map[string]*tls.Config, error) {
	out := map[string]*tls.Config{}
	add := func(us Upstreams, ut UpstreamTLS) error {
		for _, u := range us {
			if u == nil || u.Scheme != "https" {
				continue
			}
			host, _, _ := net.SplitHostPort(u.Host)
			c := &tls.Config{ServerName: host, NextProtos: []string{"http/1.1"}, InsecureSkipVerify: ut.InsecureSkipVerify}
			if ut.ServerName != "" {
				c.ServerName = ut.ServerName
			}
			if ut.CAFile != "" {
				roots, err := loadRoots(ut.CAFile)
				if err != nil {
					return err
				}
				c.RootCAs = roots
			}
			out[u.Host] = c
		}
		return nil
	}
	for i := range cfg.Sites {
		s := &cfg.Sites[i]
		if err := add(s.Upstream, s.UpstreamTLS); err != nil {
			return nil, err
		}
		for j := range s.Routes {
			r := &s.Routes[j]
			ut := r.UpstreamTLS
			if ut == (UpstreamTLS{}) {
				ut = s.UpstreamTLS
			}
			if err := add(r.Upstream, ut); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// loadRoots reads a PEM file of CA certificates.
func loadRoots(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("edge: upstream_tls.ca_file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("edge: upstream_tls.ca_file %s holds no PEM certificate", path)
	}
	return pool, nil
}

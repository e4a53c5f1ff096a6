package console

import (
	"cmp"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/maatproxy/maat/fplog"
)

// The window the Recorder keeps: Buckets of Step each.
const (
	Step    = 10 * time.Second
	Buckets = 60
	// Window is the time the plots cover.
	Window = Step * Buckets
)

// tracked is how many keys each table counts; the page shows the first
// Rows. Space-saving keeps every key counted more than N/tracked times (N
// the requests of the table's time), with at most that much overcount.
const (
	tracked = 64
	Rows    = 10
)

// generation is how long one generation of the tables counts; the page
// shows the current one merged with the one before, so a table covers
// between one and two generations — as long as the plots, on average.
const generation = Window / 2

// Decision is an index of the decisions the Recorder tells apart.
type Decision int

// The decisions, in the order the page stacks them.
const (
	Allow Decision = iota
	Pass
	Challenge
	Deny
	Rate
	Divert
	NDecisions
)

// Decisions are the fingerprint log's actions of the decisions, by index.
var Decisions = [NDecisions]string{fplog.ActionAllow, fplog.ActionPass, fplog.ActionChallenge, fplog.ActionDeny, fplog.ActionRate, fplog.ActionDivert}

// decision returns the index of a fingerprint log action, and false for
// any other (a request the edge answered before any decision).
func decision(action string) (Decision, bool) {
	switch action {
	case fplog.ActionAllow:
		return Allow, true
	case fplog.ActionPass:
		return Pass, true
	case fplog.ActionChallenge:
		return Challenge, true
	case fplog.ActionDeny:
		return Deny, true
	case fplog.ActionRate:
		return Rate, true
	case fplog.ActionDivert:
		return Divert, true
	}
	return 0, false
}

// Counts are requests by decision.
type Counts [NDecisions]uint64

// Total is the sum of c.
func (c *Counts) Total() uint64 {
	var n uint64
	for _, v := range c {
		n += v
	}
	return n
}

// Request is what the Recorder counts of one request. Its strings are kept
// as they are (not copied): they must not change afterwards.
type Request struct {
	Time   time.Time // when the request began
	Site   string    // the site's name ("" = none matched)
	Action string    // fplog's action; any other counts as answered by the edge
	Rules  []string  // the rules that matched
	JA4    string
	Family string // the client family of the TLS stack ("" = unknown)
	ASN    uint32 // 0 = unknown
	ASOrg  string
	// Client is the client's address; the zero Addr leaves it uncounted
	// (log.client_ip: none).
	Client netip.Addr
}

// ASN is an autonomous system as the tables count it.
type ASN struct {
	Number uint32
	Org    string
}

// A Recorder counts requests into time buckets and top-K tables. It is
// safe for concurrent use; Record does not allocate. Make one with
// NewRecorder.
type Recorder struct {
	mu      sync.Mutex
	buckets [Buckets]bucket
	gen     int64 // the current generation's number (unix time / generation)
	tables  [2]tables
	cur     int // the index of the current generation in tables
}

// bucket counts the requests of one Step.
type bucket struct {
	epoch      int64 // unix time / Step; 0 = empty
	counts     Counts
	issued     uint64
	solved     uint64
	failed     uint64
	unanswered uint64 // requests the edge answered before a decision
}

type tables struct {
	sites    topK[string]
	ja4      topK[string]
	families topK[string]
	asns     topK[ASN]
	rules    topK[string]
	clients  topK[netip.Addr]
}

func (t *tables) init() {
	t.sites.init()
	t.ja4.init()
	t.families.init()
	t.asns.init()
	t.rules.init()
	t.clients.init()
}

func (t *tables) reset() {
	t.sites.reset()
	t.ja4.reset()
	t.families.reset()
	t.asns.reset()
	t.rules.reset()
	t.clients.reset()
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder {
	r := &Recorder{}
	r.tables[0].init()
	r.tables[1].init()
	return r
}

// unknownFamily is the family of a client the known-client table does not
// know.
const unknownFamily = "unknown"

// Record counts one request.
func (r *Recorder) Record(q *Request) {
	d, decided := decision(q.Action)
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.bucket(q.Time)
	if b != nil {
		if decided {
			b.counts[d]++
			if d == Challenge {
				b.issued++
			}
		} else {
			b.unanswered++
		}
	}
	if !decided {
		return
	}
	t := r.tablesAt(q.Time)
	t.sites.add(q.Site, d)
	if q.JA4 != "" {
		t.ja4.add(q.JA4, d)
	}
	fam := q.Family
	if fam == "" {
		fam = unknownFamily
	}
	t.families.add(fam, d)
	if q.ASN != 0 {
		t.asns.add(ASN{q.ASN, q.ASOrg}, d)
	}
	for _, rule := range q.Rules {
		t.rules.add(rule, d)
	}
	if q.Client.IsValid() {
		t.clients.add(q.Client, d)
	}
}

// ChallengeResult counts a challenge answered at t: solved, or failed.
func (r *Recorder) ChallengeResult(t time.Time, solved bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if b := r.bucket(t); b != nil {
		if solved {
			b.solved++
		} else {
			b.failed++
		}
	}
}

// bucket returns the bucket of time t, emptied when it held an older
// Step, or nil when t is older than the window.
func (r *Recorder) bucket(t time.Time) *bucket {
	e := t.Unix() / int64(Step/time.Second)
	b := &r.buckets[e%Buckets]
	switch {
	case b.epoch == e:
	case b.epoch < e:
		*b = bucket{epoch: e}
	default: // b is Buckets steps or more after t
		return nil
	}
	return b
}

// tablesAt returns the tables of the current generation, starting a new one
// when t is past it. A request that began in the generation before (a long
// download) counts in the current one.
func (r *Recorder) tablesAt(t time.Time) *tables {
	g := t.Unix() / int64(generation/time.Second)
	if g > r.gen {
		if g == r.gen+1 {
			r.cur = 1 - r.cur // the current generation becomes the one before
		} else {
			r.tables[1-r.cur].reset() // both are too old
		}
		r.tables[r.cur].reset()
		r.gen = g
	}
	return &r.tables[r.cur]
}

// topK counts keys with the space-saving algorithm (Metwally, Agrawal,
// El Abbadi: "Efficient Computation of Frequent and Top-k Elements in Data
// Streams", 2005) in tracked slots: a key not tracked takes the slot of
// the least counted one, and its count, plus one.
type topK[K comparable] struct {
	index map[K]int32
	slots []slot[K] // len ≤ tracked, cap tracked
}

type slot[K comparable] struct {
	key    K
	count  uint64
	over   uint64 // the count the key took over: its overcount at most
	counts Counts // by decision, since the key took the slot
}

func (t *topK[K]) init() {
	t.index = make(map[K]int32, tracked)
	t.slots = make([]slot[K], 0, tracked)
}

func (t *topK[K]) reset() {
	clear(t.index)
	t.slots = t.slots[:0]
}

func (t *topK[K]) add(k K, d Decision) {
	if i, ok := t.index[k]; ok {
		s := &t.slots[i]
		s.count++
		s.counts[d]++
		return
	}
	if len(t.slots) < cap(t.slots) {
		t.index[k] = int32(len(t.slots))
		t.slots = append(t.slots, slot[K]{key: k, count: 1})
		t.slots[len(t.slots)-1].counts[d] = 1
		return
	}
	m := 0
	for i := range t.slots {
		if t.slots[i].count < t.slots[m].count {
			m = i
		}
	}
	s := &t.slots[m]
	delete(t.index, s.key)
	t.index[k] = int32(m)
	*s = slot[K]{key: k, count: s.count + 1, over: s.count}
	s.counts[d] = 1
}

// Row is one key of a table, over the tables' time.
type Row[K comparable] struct {
	Key    K
	Count  uint64 // requests, at most Over too many
	Over   uint64
	Counts Counts // by decision, counted since the key was tracked
}

// merge adds the slots of ts into one table, sorted by count (then key
// order of first appearance), n rows at most.
func merge[K comparable](n int, ts ...*topK[K]) []Row[K] {
	var rows []Row[K]
	at := map[K]int{}
	for _, t := range ts {
		for _, s := range t.slots {
			i, ok := at[s.key]
			if !ok {
				i = len(rows)
				at[s.key] = i
				rows = append(rows, Row[K]{Key: s.key})
			}
			r := &rows[i]
			r.Count += s.count
			r.Over += s.over
			for d, c := range s.counts {
				r.Counts[d] += c
			}
		}
	}
	slices.SortStableFunc(rows, func(a, b Row[K]) int { return cmp.Compare(b.Count, a.Count) })
	if len(rows) > n {
		rows = rows[:n]
	}
	return rows
}

// Point is one Step of the window.
type Point struct {
	Start      time.Time
	Counts     Counts
	Issued     uint64 // challenges served
	Solved     uint64 // challenges answered right
	Failed     uint64 // answers refused
	Unanswered uint64 // requests answered before a decision (a bad path, a redirect)
}

// Snapshot is what the Recorder holds at a moment.
type Snapshot struct {
	Now      time.Time
	Points   []Point // Buckets of them, oldest first, the last one holding now
	Sites    []Row[string]
	JA4      []Row[string]
	Families []Row[string]
	ASNs     []Row[ASN]
	Rules    []Row[string]
	Clients  []Row[netip.Addr] // every tracked one, merged: the page reduces them first
}

// Snapshot copies what r holds at now; tables keep n rows (the clients
// all of theirs).
func (r *Recorder) Snapshot(now time.Time, n int) *Snapshot {
	s := &Snapshot{Now: now, Points: make([]Point, Buckets)}
	last := now.Unix() / int64(Step/time.Second)
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range s.Points {
		e := last - int64(Buckets-1-i)
		p := &s.Points[i]
		p.Start = time.Unix(e*int64(Step/time.Second), 0)
		if b := &r.buckets[e%Buckets]; b.epoch == e {
			p.Counts, p.Issued, p.Solved, p.Failed, p.Unanswered = b.counts, b.issued, b.solved, b.failed, b.unanswered
		}
	}
	var live []*tables
	g := now.Unix() / int64(generation/time.Second)
	switch g - r.gen {
	case 0:
		live = []*tables{&r.tables[r.cur], &r.tables[1-r.cur]}
	case 1:
		live = []*tables{&r.tables[r.cur]}
	}
	pick := func(f func(*tables) *topK[string]) []*topK[string] {
		out := make([]*topK[string], len(live))
		for i, t := range live {
			out[i] = f(t)
		}
		return out
	}
	s.Sites = merge(n, pick(func(t *tables) *topK[string] { return &t.sites })...)
	s.JA4 = merge(n, pick(func(t *tables) *topK[string] { return &t.ja4 })...)
	s.Families = merge(n, pick(func(t *tables) *topK[string] { return &t.families })...)
	s.Rules = merge(n, pick(func(t *tables) *topK[string] { return &t.rules })...)
	var asns []*topK[ASN]
	var clients []*topK[netip.Addr]
	for _, t := range live {
		asns = append(asns, &t.asns)
		clients = append(clients, &t.clients)
	}
	s.ASNs = merge(n, asns...)
	s.Clients = merge(2*tracked, clients...)
	return s
}

// Package spill reads an upstream's answer ahead of a client that fell
// behind, so that the client does not hold the upstream connection while it
// reads at its own pace.
//
// # Why
//
// An upstream address has few connections (limits.upstream_conns, a few
// dozen): a slow client that held one for as long as it reads would leave
// the site to the others with one less. nginx buffers every response for
// that (proxy_buffering). The edge streams answers straight through, which
// costs nothing for a client that keeps up, and reads ahead only when a
// write to the client blocks for Options.After (200 ms), or when a request
// waits for one of the address's connections (the upstream package's slots
// call Body.Drain then): a goroutine drains the rest of the upstream's body
// into memory (64 KiB) and then an unlinked temporary file, within
// Options.Max per answer (limits.spill_bytes) and the Budget for all
// (limits.spill_total), and the upstream's connection is freed as soon as
// the upstream is done. The client then reads from the buffer, still bounded
// by the edge's write timeout.
//
// # What it costs
//
// For an answer drained: a goroutine while it drains, up to Options.Max
// bytes of memory and disk, and the copy through them. Drains take turns
// (Budget): a few read at once, each to its end, so that a waiting request
// gets one connection soon rather than a hundred late. A buffer that fills
// leaves the client reading the rest from the upstream, holding a slot
// that counts as stalled (Slots.Stall); when half an address's slots are
// stalled so, the next answer that fills its buffer is cut instead
// (Options.OnCut), so that slow clients can never take every connection.
//
// # Boundaries
//
// spill imports no package of this module: it never imports edge,
// edge/config or edge/internal/upstream. What it needs of the connection
// slots is the small Slots interface, which the upstream package's slots
// implement; the upstream package wraps its answers in a Body.
//
// # Library behaviour relied on
//
// A drain reads its source on its own goroutine while the client's side may
// close the Body: Close relies on the source's Close ending a Read under way
// on another goroutine, and a drainer blocked in it. The upstream package's
// own client does this by design (TestClientCloseDuringRead there);
// net/http's Transport bodies do it without saying so in their
// documentation (TestTransportBodyCloseEndsRead there pins it).
package spill

import (
	"errors"
	"io"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultAfter is how long a write to the client may block, if
// Options.After is zero, before the answer's body is drained from the
// upstream into a buffer. A request that has to wait for one of the
// address's connections does not wait for it: it starts the drain of every
// answer being sent from them (Body.Drain), as the connection of the first
// to finish is then the next free one; a client that keeps up loses
// nothing by it.
const DefaultAfter = 200 * time.Millisecond

// memBytes is how much of a drained body is kept in memory before the rest
// goes to a file.
const memBytes = 64 << 10

// turnYield is how long a drain's read of the upstream may block before
// the drain gives its turn to the next.
const turnYield = 5 * time.Millisecond

// errStalled cuts an answer whose client fell behind while half the
// upstream address's connections are held by such clients already.
var errStalled = errors.New("spill: client too slow while the upstream is busy")

// Slots is what a Body needs of the connection slots of its upstream
// address: a body whose buffer filled holds its slot while its client reads
// the rest from the upstream, and counts it stalled meanwhile.
type Slots interface {
	// Stall counts one more slot held by a client that fell behind, or
	// reports false when half the slots already are.
	Stall() bool
	// Unstall gives back a slot Stall counted.
	Unstall()
}

// Options are the bounds and hooks of a Body.
type Options struct {
	// Max is the most bytes one body buffers (limits.spill_bytes); beyond,
	// the client reads the rest from the upstream.
	Max int64
	// Budget bounds the bytes all bodies buffer at once and their turns to
	// drain. It must not be nil.
	Budget *Budget
	// After is how long a write to the client may block before the body is
	// drained (the edge's writer starts it). If zero, DefaultAfter.
	After time.Duration
	// OnFull, if not nil, is called when a body could not be buffered whole.
	OnFull func()
	// OnCut, if not nil, is called when an answer is cut because half the
	// address's slots are stalled already: the caller ends the write its
	// client is stuck in.
	OnCut func()
}

// Budget is the bytes all drained bodies may hold at once
// (limits.spill_total), shared by the Handlers a Server swaps in, and the
// turns to drain.
//
// Drains take turns: a few run at once and each runs to its end, rather
// than every drain at once sharing the box. A waiting request needs one
// connection freed soon, not a hundred freed late: a hundred parallel
// drains of 50 MB each free the first connection after a second, the
// same drains two at a time free one every few dozen milliseconds. A
// drain whose upstream is slow to send (a read blocks for turnYield) gives
// its turn back and queues again once the read returns, so that a slow
// stream never holds one.
type Budget struct {
	max   int64
	used  atomic.Int64
	turns chan struct{} // a token held by each drain that is reading
	yield time.Duration // how long a drain's read may block before it gives its turn back
}

// NewBudget returns a budget of limit bytes, with as many turns as
// processors (at least 2).
func NewBudget(limit int64) *Budget {
	return &Budget{max: limit, turns: make(chan struct{}, max(2, runtime.GOMAXPROCS(0))), yield: turnYield}
}

// Used is the number of bytes the bodies hold.
func (b *Budget) Used() int64 { return b.used.Load() }

// take reserves n bytes, or reports false.
func (b *Budget) take(n int64) bool {
	if b.used.Add(n) > b.max {
		b.used.Add(-n)
		return false
	}
	return true
}

func (b *Budget) give(n int64) { b.used.Add(-n) }

// Body is an upstream answer's body that can be drained ahead of a slow
// client. Its Read is the client's side; Drain may come from any goroutine.
type Body struct {
	src    io.ReadCloser // the upstream's body; closing it frees the connection slot
	max    int64         // bytes one body may buffer
	budget *Budget
	slots  Slots  // the upstream address's: a full buffer stalls one of them
	onFull func() // called once when a body could not be buffered whole
	onCut  func() // called when an answer is cut: half the slots already stalled
	after  time.Duration

	mu       sync.Mutex
	cond     sync.Cond
	reading  bool // the client's Read is reading src (without mu: drain must never wait for the upstream)
	draining bool
	started  bool          // the drainer has read src: it is the drainer's until it ends
	withdraw chan struct{} // closed by Read to call off a drain still waiting for its first turn
	quit     chan struct{} // closed by Close, to a drainer waiting for a turn
	stop     bool          // Close was called: the drainer stops
	done     bool          // the drainer has ended
	srcErr   error         // what ended the drain: io.EOF, an upstream error, or nil (buffer full)
	stalls   bool          // the buffer filled and this answer holds a stalled slot
	pending  []byte        // read from the upstream but not buffered (the buffer was full)
	mem      []byte
	file     *os.File
	size     int64 // bytes buffered (mem, then file)
	off      int64 // bytes the client has been given from the buffer
	reserved int64 // bytes taken from the budget
	wg       sync.WaitGroup
}

// New returns src as a Body that can be drained ahead of its client, within
// o; slots are those of src's upstream address.
func New(src io.ReadCloser, slots Slots, o Options) *Body {
	b := &Body{src: src, max: o.Max, budget: o.Budget, slots: slots, onFull: o.OnFull, onCut: o.OnCut, after: o.After}
	if b.after <= 0 {
		b.after = DefaultAfter
	}
	b.cond.L = &b.mu
	return b
}

// After is how long a write to the client may block before the writer
// calls Drain.
func (b *Body) After() time.Duration { return b.after }

// Drain starts buffering ahead of the client; it runs once, from the timer
// of a blocked write or for a request waiting for a connection. It never
// waits: not for a turn, nor for a read of the client's under way (a quiet
// stream's may last).
func (b *Body) Drain() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.draining || b.stop || b.done {
		return
	}
	b.draining = true
	if b.quit == nil {
		b.quit = make(chan struct{})
	}
	if !b.reading { // src is free
		select {
		case b.budget.turns <- struct{}{}: // and a turn: the drain starts now
			b.started = true
			b.wg.Go(func() { b.run(true) })
			return
		default:
		}
	}
	// In line for a turn; the client's next Read calls it off if it comes
	// first, and reads on from the upstream itself.
	w := make(chan struct{})
	b.withdraw = w
	b.wg.Go(func() {
		if b.waitTurn(w) {
			b.run(true)
		}
	})
}

// waitTurn waits for a drain's turn; it reports false when the drain was
// called off (withdraw closed, before its first turn) or the body closed.
func (b *Body) waitTurn(withdraw chan struct{}) bool {
	// The client's read under way ends first: its next Read calls the
	// drain off, unless the drain has its turn by then.
	b.mu.Lock()
	for b.reading && b.withdraw == withdraw && !b.stop {
		b.cond.Wait()
	}
	b.mu.Unlock()
	select {
	case b.budget.turns <- struct{}{}:
	case <-withdraw:
		return false
	case <-b.quit:
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-withdraw: // called off while the turn came
		<-b.budget.turns
		return false
	default:
	}
	b.started = true
	return true
}

// run reads the upstream's body into the buffer until it ends, the buffer
// is full, or Close stops it. It holds a turn (turn) while the upstream
// keeps sending, and queues again for one after a read that blocked.
func (b *Body) run(turn bool) {
	// A read that blocks for budget.yield gives the turn back from the
	// timer's goroutine, and says so on yielded.
	yielded := make(chan struct{}, 1)
	yield := time.AfterFunc(time.Hour, func() {
		<-b.budget.turns
		yielded <- struct{}{}
	})
	yield.Stop()
	defer func() {
		if turn {
			<-b.budget.turns
		}
	}()
	buf := make([]byte, 32<<10)
	var err error
	for {
		if !turn {
			select {
			case b.budget.turns <- struct{}{}:
				turn = true
			case <-b.quit:
			}
			if !turn {
				err = nil
				break
			}
		}
		var n int
		yield.Reset(b.budget.yield)
		n, err = b.src.Read(buf)
		if !yield.Stop() {
			<-yielded // the upstream was slow: another drain read meanwhile
			turn = false
		}
		if n > 0 && !b.append(buf[:n]) {
			// Full: the client reads the rest from the upstream, holding
			// its connection, unless half the address's slots are held so
			// already; then this answer is cut, so that slow clients can
			// never take every connection.
			err = nil
			if !b.slots.Stall() {
				err = errStalled
				if b.onCut != nil {
					b.onCut()
				}
			} else {
				b.mu.Lock()
				b.stalls = true
				b.mu.Unlock()
			}
			break
		}
		if err != nil {
			break
		}
		b.mu.Lock()
		stop := b.stop
		b.mu.Unlock()
		if stop {
			err = nil
			break
		}
	}
	if err == io.EOF || err == errStalled {
		_ = b.src.Close() // the upstream is done (or cut off): free its connection now
	}
	b.mu.Lock()
	b.srcErr, b.done = err, true
	b.cond.Broadcast()
	b.mu.Unlock()
}

// append buffers p, or reports false when it does not fit: then nothing of
// p is buffered, the drain ends, and p waits in pending for the client.
func (b *Body) append(p []byte) bool {
	n := int64(len(p))
	b.mu.Lock()
	size := b.size
	b.mu.Unlock()
	if size+n > b.max || !b.budget.take(n) {
		b.keepPending(p)
		if b.onFull != nil {
			b.onFull()
		}
		return false
	}
	b.reserved += n
	if size < memBytes {
		b.mu.Lock()
		b.mem = append(b.mem, p...)
		b.size += n
		b.cond.Broadcast()
		b.mu.Unlock()
		return true
	}
	if b.file == nil {
		f, err := os.CreateTemp("", "maat-spill-*")
		if err != nil {
			b.keepPending(p)
			return false
		}
		_ = os.Remove(f.Name()) // unlinked: gone when closed, whatever happens
		b.file = f
	}
	if _, err := b.file.WriteAt(p, size-int64(len(b.mem))); err != nil {
		b.keepPending(p)
		return false
	}
	b.mu.Lock()
	b.size += n
	b.cond.Broadcast()
	b.mu.Unlock()
	return true
}

// keepPending keeps bytes read from the upstream that did not fit, to be
// given to the client before the rest of the upstream's body.
func (b *Body) keepPending(p []byte) {
	b.mu.Lock()
	b.pending = append(b.pending[:0], p...)
	b.mu.Unlock()
}

// Read gives the client the body: straight from the upstream until a drain
// starts, then from the buffer, then (if the buffer filled) from the
// upstream again.
func (b *Body) Read(p []byte) (int, error) {
	b.mu.Lock()
	if b.draining && !b.started {
		// The drain still waits for its turn, and the client keeps up
		// again: it reads on from the upstream.
		close(b.withdraw)
		b.withdraw, b.draining = nil, false
	}
	if !b.draining {
		// Only this goroutine reads src while no drain runs; a drain that
		// starts meanwhile waits for the read to end (reading).
		b.reading = true
		b.mu.Unlock()
		n, err := b.src.Read(p)
		b.mu.Lock()
		b.reading = false
		b.cond.Broadcast()
		b.mu.Unlock()
		return n, err
	}
	for b.off == b.size && !b.done && !b.stop {
		b.cond.Wait()
	}
	switch {
	case b.off < b.size:
		n := b.readBuffered(p)
		b.mu.Unlock()
		return n, nil
	case len(b.pending) > 0:
		n := copy(p, b.pending)
		b.pending = b.pending[n:]
		b.mu.Unlock()
		return n, nil
	case b.srcErr != nil:
		err := b.srcErr
		b.mu.Unlock()
		return 0, err
	}
	b.mu.Unlock()
	b.wg.Wait()          // the drainer has ended: src is this goroutine's again
	return b.src.Read(p) // the buffer was full: the rest, from the upstream
}

// readBuffered copies buffered bytes from b.off; b.mu is held.
func (b *Body) readBuffered(p []byte) int {
	if b.off < int64(len(b.mem)) {
		n := copy(p, b.mem[b.off:])
		b.off += int64(n)
		return n
	}
	want := min(int64(len(p)), b.size-b.off)
	n, _ := b.file.ReadAt(p[:want], b.off-int64(len(b.mem)))
	b.off += int64(n)
	return n
}

// Close stops a drain, waits for it, releases the buffer and closes the
// upstream's body (freeing its connection, if the drain did not already).
func (b *Body) Close() error {
	b.mu.Lock()
	if b.quit != nil && !b.stop {
		close(b.quit)
	}
	b.stop = true
	b.cond.Broadcast()
	b.mu.Unlock()
	err := b.src.Close() // also ends a drainer blocked in Read
	b.wg.Wait()
	if b.stalls {
		b.slots.Unstall()
		b.stalls = false
	}
	if b.file != nil {
		_ = b.file.Close()
	}
	b.budget.give(b.reserved)
	b.reserved = 0
	b.mem = nil
	return err
}

package spill

import (
	"bytes"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maatproxy/maat/internal/testnet"
)

// counted is the Slots of a test: n slots, at most half of them stalled.
type counted struct {
	n       int32
	stalled atomic.Int32
}

func (s *counted) Stall() bool {
	if int(s.stalled.Add(1)) > max(1, int(s.n)/2) {
		s.stalled.Add(-1)
		return false
	}
	return true
}

func (s *counted) Unstall() { s.stalled.Add(-1) }

func waitFor(t *testing.T, d time.Duration, cond func() bool) bool {
	t.Helper()
	return testnet.WaitFor(t, d, cond)
}

// feedSrc is an upstream body the test feeds: each Read waits for a chunk
// on feed (closing feed ends the body), and counts itself.
type feedSrc struct {
	feed   chan []byte
	reads  atomic.Int32
	closed chan struct{}
}

func newFeedSrc() *feedSrc {
	return &feedSrc{feed: make(chan []byte), closed: make(chan struct{})}
}

func (s *feedSrc) Read(p []byte) (int, error) {
	s.reads.Add(1)
	select {
	case b, ok := <-s.feed:
		if !ok {
			return 0, io.EOF
		}
		return copy(p, b), nil
	case <-s.closed:
		return 0, io.ErrClosedPipe
	}
}

func (s *feedSrc) Close() error {
	select {
	case <-s.closed:
	default:
		close(s.closed)
	}
	return nil
}

// spillBodies returns n bodies over fed sources, sharing a budget with
// turns turns whose drains yield after yield.
func spillBodies(t *testing.T, n, turns int, yield time.Duration) ([]*Body, []*feedSrc) {
	t.Helper()
	budget := &Budget{max: 1 << 30, turns: make(chan struct{}, turns), yield: yield}
	slots := &counted{n: int32(n)}
	var bodies []*Body
	var srcs []*feedSrc
	for range n {
		src := newFeedSrc()
		b := New(src, slots, Options{Max: 1 << 30, Budget: budget})
		t.Cleanup(func() { _ = b.Close() })
		bodies, srcs = append(bodies, b), append(srcs, src)
	}
	return bodies, srcs
}

// reading lists the sources that have been read from.
func reading(srcs []*feedSrc) []int {
	var r []int
	for i, s := range srcs {
		if s.reads.Load() > 0 {
			r = append(r, i)
		}
	}
	return r
}

// TestDrainsTakeTurns: of many answers drained at once, only as many as
// there are turns read from their upstreams; the others start as those
// end, so that the first connection is freed after one body's time, not
// after all of them.
func TestDrainsTakeTurns(t *testing.T) {
	bodies, srcs := spillBodies(t, 5, 2, time.Hour)
	for _, b := range bodies {
		b.Drain()
	}
	if !waitFor(t, 5*time.Second, func() bool { return len(reading(srcs)) >= 2 }) {
		t.Fatalf("drains reading their upstream: %v, want 2 (the turns)", reading(srcs))
	}
	// The others wait: a window for a third to show, which it must not.
	if waitFor(t, 200*time.Millisecond, func() bool { return len(reading(srcs)) > 2 }) {
		t.Fatalf("drains reading their upstream: %v, want only 2 (the turns)", reading(srcs))
	}
	chunk := bytes.Repeat([]byte("x"), 1000)
	for range 3 {
		for _, i := range reading(srcs) {
			srcs[i].feed <- chunk
		}
	}
	first := reading(srcs)[0]
	close(srcs[first].feed) // that body ends: its turn goes to a waiting drain
	if !waitFor(t, 5*time.Second, func() bool { return len(reading(srcs)) == 3 }) {
		t.Fatalf("after one drain ended, drains reading: %v, want 3", reading(srcs))
	}
	// The ended body is whole in its buffer.
	got, err := io.ReadAll(bodies[first])
	if err != nil || len(got) != 3*len(chunk) {
		t.Errorf("the drained body read back %d bytes (%v), want %d", len(got), err, 3*len(chunk))
	}
}

// TestDrainWithdrawnWhenClientKeepsUp: a drain still waiting for its turn
// is called off by the client's next read, which goes on from the upstream
// itself and does not wait for the other drains.
func TestDrainWithdrawnWhenClientKeepsUp(t *testing.T) {
	bodies, srcs := spillBodies(t, 2, 1, time.Hour)
	bodies[0].Drain() // takes the one turn, blocked reading its upstream
	if !waitFor(t, 5*time.Second, func() bool { return srcs[0].reads.Load() > 0 }) {
		t.Fatal("the first drain never read")
	}
	bodies[1].Drain() // waits for a turn
	go func() { srcs[1].feed <- []byte("straight") }()
	p := make([]byte, 64)
	done := make(chan struct{})
	var n int
	var err error
	go func() { n, err = bodies[1].Read(p); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the client's read waited for the other drain's turn")
	}
	if err != nil || string(p[:n]) != "straight" {
		t.Fatalf("read %q, %v; want the upstream's bytes", p[:n], err)
	}
	// The first drain ends; the withdrawn one must not start behind it.
	close(srcs[0].feed)
	if _, err := io.ReadAll(bodies[0]); err != nil {
		t.Fatal(err)
	}
	if r := srcs[1].reads.Load(); r != 1 {
		t.Errorf("the withdrawn drain's upstream was read %d times, want only the client's 1", r)
	}
}

// TestSlowUpstreamGivesItsTurnBack: a drain whose upstream sends nothing
// gives its turn to the next drain instead of holding it while it waits.
func TestSlowUpstreamGivesItsTurnBack(t *testing.T) {
	bodies, srcs := spillBodies(t, 2, 1, 2*time.Millisecond)
	bodies[0].Drain() // its upstream never sends
	if !waitFor(t, 5*time.Second, func() bool { return srcs[0].reads.Load() > 0 }) {
		t.Fatal("the first drain never read")
	}
	bodies[1].Drain()
	select {
	case srcs[1].feed <- []byte("next"):
	case <-time.After(5 * time.Second):
		t.Fatal("the second drain never got the turn the silent upstream's drain held")
	}
	close(srcs[1].feed)
	got, err := io.ReadAll(bodies[1])
	if err != nil || string(got) != "next" {
		t.Errorf("second body %q, %v", got, err)
	}
	// The silent one still ends cleanly once its upstream does.
	close(srcs[0].feed)
	if got, err := io.ReadAll(bodies[0]); err != nil || len(got) != 0 {
		t.Errorf("silent body %q, %v", got, err)
	}
}

// TestDrainNeverWaitsForTheUpstream: drain, called while the client's
// read waits for a quiet upstream, returns at once (a request waiting for
// a connection calls it); so does Close. The bytes the client's read then
// gets come before those the drain reads, in order.
func TestDrainNeverWaitsForTheUpstream(t *testing.T) {
	t.Parallel()
	bodies, srcs := spillBodies(t, 1, 2, time.Hour)
	b, src := bodies[0], srcs[0]
	t.Cleanup(func() { _ = src.Close() }) // first: a read under way ends
	got := make(chan string, 4)
	go func() {
		p := make([]byte, 16)
		for {
			n, err := b.Read(p)
			if err != nil {
				close(got)
				return
			}
			got <- string(p[:n])
		}
	}()
	if !waitFor(t, 20*time.Second, func() bool { return src.reads.Load() == 1 }) {
		t.Fatal("the client never read")
	}
	drained := make(chan struct{})
	go func() { b.Drain(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(20 * time.Second):
		t.Fatal("drain waited for the client's read of a quiet upstream")
	}
	src.feed <- []byte("one")
	src.feed <- []byte("two")
	close(src.feed)
	var all []string
	for s := range got {
		all = append(all, s)
	}
	if s := strings.Join(all, ""); s != "onetwo" {
		t.Errorf("the client read %q, want %q", s, "onetwo")
	}
}

// TestFullBufferStallsThenCuts: an answer that does not fit its buffer
// leaves its client reading the rest from the upstream, holding its slot
// as a stalled one; once half the address's slots are stalled so, the next
// answer that does not fit is cut (OnCut), and its client gets what was
// read, then the error. Closing gives the stalled slot back.
func TestFullBufferStallsThenCuts(t *testing.T) {
	t.Parallel()
	slots := &counted{n: 2} // half: one slot may stall
	budget := &Budget{max: 1 << 30, turns: make(chan struct{}, 2), yield: time.Hour}
	var fulls, cuts atomic.Int32
	o := Options{Max: 4, Budget: budget, OnFull: func() { fulls.Add(1) }, OnCut: func() { cuts.Add(1) }}
	srcA, srcB := newFeedSrc(), newFeedSrc()
	a, b := New(srcA, slots, o), New(srcB, slots, o)

	a.Drain()
	srcA.feed <- []byte("too long") // more than Max: a keeps its slot, stalled
	if !waitFor(t, 5*time.Second, func() bool { return slots.stalled.Load() == 1 }) {
		t.Fatal("the answer that did not fit never stalled its slot")
	}
	b.Drain()
	srcB.feed <- []byte("too long") // half the slots stalled already: cut
	if !waitFor(t, 5*time.Second, func() bool { return cuts.Load() == 1 }) {
		t.Fatal("the second answer that did not fit was not cut")
	}
	if got, err := io.ReadAll(b); string(got) != "too long" || err != errStalled {
		t.Errorf("the cut answer read %q, %v; want what was read, then errStalled", got, err)
	}
	go func() {
		srcA.feed <- []byte("-rest")
		close(srcA.feed)
	}()
	if got, err := io.ReadAll(a); string(got) != "too long-rest" || err != nil {
		t.Errorf("the stalled answer read %q, %v; want all of it, from the upstream after the buffer", got, err)
	}
	_ = a.Close()
	_ = b.Close()
	if n := slots.stalled.Load(); n != 0 {
		t.Errorf("%d slots stalled after both closed, want 0", n)
	}
	if n := fulls.Load(); n != 2 {
		t.Errorf("OnFull called %d times, want 2", n)
	}
}

package upstream

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/maatproxy/maat/internal/testnet"
)

// TestConnSlotsFairHandoff: a freed upstream slot goes to the waiting
// client that holds the fewest, not to the one that queued the most.
func TestConnSlotsFairHandoff(t *testing.T) {
	t.Parallel()
	s := newConnSlots(2, 0, 1024, 0)
	ctx := context.Background()
	hog, honest := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("198.51.100.7")
	for range 2 {
		if err := s.acquire(ctx, flow{client: hog}, false, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	got := make(chan netip.Addr, 4)
	wait := func(c netip.Addr) {
		go func() {
			if err := s.acquire(ctx, flow{client: c}, false, 10*time.Second); err == nil {
				got <- c
			}
		}()
	}
	for range 3 {
		wait(hog)
	}
	testnet.WaitFor(t, 5*time.Second, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.nwait == 3 })
	wait(honest)
	testnet.WaitFor(t, 5*time.Second, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.nwait == 4 })
	s.release(flow{client: hog})
	if c := <-got; c != honest {
		t.Errorf("the freed slot went to %v, want the client holding none (%v)", c, honest)
	}
	s.release(flow{client: hog})
	if c := <-got; c != hog {
		t.Errorf("the next slot went to %v, want the hog (now the only one waiting)", c)
	}
	if n := s.busy(); n != 2 {
		t.Errorf("%d slots busy, want 2", n)
	}
}

// TestConnSlotsGiveUp: a request that waits too long, or whose context
// ends, leaves the line and holds nothing.
func TestConnSlotsGiveUp(t *testing.T) {
	t.Parallel()
	s := newConnSlots(1, 0, 1024, 0)
	a := netip.MustParseAddr("192.0.2.1")
	if err := s.acquire(context.Background(), flow{client: a}, false, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := s.acquire(context.Background(), flow{client: a}, false, 10*time.Millisecond); !errors.Is(err, ErrQueueFull) {
		t.Errorf("a full line: %v, want ErrQueueFull", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.acquire(ctx, flow{client: a}, false, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("a reset request: %v", err)
	}
	s.release(flow{client: a})
	if n := s.busy(); n != 0 || s.nwait != 0 || len(s.held) != 0 {
		t.Errorf("after all left: %d busy, %d waiting, held %v", n, s.nwait, s.held)
	}
}

// waitingNow is the number of requests waiting for one of s's slots.
func waitingNow(s *connSlots) int { s.mu.Lock(); defer s.mu.Unlock(); return s.nwait }

// lineUp starts a request of f that waits for one of s's slots and
// reports, once it has one, its name on got (or its error on failed), and
// waits until it stands in the line.
func lineUp(t *testing.T, s *connSlots, f flow, prio bool, name string, got chan<- string, failed chan<- error) {
	t.Helper()
	n := waitingNow(s)
	go func() {
		if err := s.acquire(context.Background(), f, prio, time.Minute); err != nil {
			failed <- err
			return
		}
		got <- name
	}()
	testnet.WaitFor(t, 5*time.Second, func() bool { return waitingNow(s) == n+1 })
}

// TestConnSlotsRoundRobin: with one slot, clusters take turns: a flood of
// one cluster queued before a single request of another is served once
// at most before it, and the clusters then alternate.
func TestConnSlotsRoundRobin(t *testing.T) {
	t.Parallel()
	s := newConnSlots(1, 0, 1024, 0)
	flood, other := flow{cluster: "flood"}, flow{cluster: "other"}
	if err := s.acquire(context.Background(), flood, false, time.Second); err != nil {
		t.Fatal(err)
	}
	got, failed := make(chan string, 16), make(chan error, 16)
	for range 5 {
		lineUp(t, s, flood, false, "flood", got, failed)
	}
	lineUp(t, s, other, false, "other", got, failed)
	lineUp(t, s, other, false, "other", got, failed)
	var order []string
	holder := flood
	for range 7 {
		s.release(holder)
		name := <-got
		order = append(order, name)
		holder = flow{cluster: name}
	}
	want := []string{"other", "flood", "other", "flood", "flood", "flood", "flood"}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Errorf("served %v, want %v", order, want)
	}
	if len(failed) != 0 {
		t.Errorf("a request failed: %v", <-failed)
	}
}

// TestConnSlotsPriorityFirst: a priority request is served before the
// others waiting, whatever their cluster and age.
func TestConnSlotsPriorityFirst(t *testing.T) {
	t.Parallel()
	s := newConnSlots(1, 0, 1024, 0)
	a, b := flow{cluster: "a"}, flow{cluster: "b"}
	if err := s.acquire(context.Background(), a, false, time.Second); err != nil {
		t.Fatal(err)
	}
	got, failed := make(chan string, 4), make(chan error, 4)
	lineUp(t, s, b, false, "ordinary", got, failed)
	lineUp(t, s, a, true, "priority", got, failed)
	s.release(a)
	if n := <-got; n != "priority" {
		t.Errorf("first served %q, want the priority request", n)
	}
	s.release(a)
	if n := <-got; n != "ordinary" {
		t.Errorf("then served %q", n)
	}
}

// TestConnSlotsQueueShare: a full line refuses the cluster holding the
// most of it, and makes room for another cluster by putting out the
// newest request of the largest share; priority requests are never put
// out.
func TestConnSlotsQueueShare(t *testing.T) {
	t.Parallel()
	s := newConnSlots(1, 4, 1024, 0)
	flood, other := flow{cluster: "flood"}, flow{cluster: "other"}
	if err := s.acquire(context.Background(), flood, false, time.Second); err != nil {
		t.Fatal(err)
	}
	got, failed := make(chan string, 8), make(chan error, 8)
	for range 4 {
		lineUp(t, s, flood, false, "flood", got, failed)
	}
	if err := s.acquire(context.Background(), flood, false, time.Minute); !errors.Is(err, ErrQueueShare) {
		t.Fatalf("the flood's fifth request in a line of 4: %v, want ErrQueueShare", err)
	}
	// another cluster's request takes the place of the flood's newest
	go func() {
		if err := s.acquire(context.Background(), other, false, time.Minute); err != nil {
			failed <- err
			return
		}
		got <- "other"
	}()
	if err := <-failed; !errors.Is(err, ErrQueueShare) {
		t.Fatalf("the flood's request put out: %v, want ErrQueueShare", err)
	}
	testnet.WaitFor(t, 5*time.Second, func() bool { return waitingNow(s) == 4 })
	s.mu.Lock()
	n := len(s.waiting[other].ws)
	s.mu.Unlock()
	if n != 1 {
		t.Fatalf("other has %d waiting, want 1", n)
	}
	// a second of other's puts out another of the flood's: two each
	go func() {
		if err := s.acquire(context.Background(), other, false, time.Minute); err != nil {
			failed <- err
			return
		}
		got <- "other"
	}()
	if err := <-failed; !errors.Is(err, ErrQueueShare) {
		t.Fatalf("the flood's second request put out: %v, want ErrQueueShare", err)
	}
	testnet.WaitFor(t, 5*time.Second, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return len(s.waiting[other].ws) == 2 })
	// and a third of other's would be more than its half: refused
	if err := s.acquire(context.Background(), other, false, time.Minute); !errors.Is(err, ErrQueueShare) {
		t.Fatalf("other's third request in a line shared 2:2: %v, want ErrQueueShare", err)
	}
	s.release(flood)
	if n := <-got; n != "other" {
		t.Errorf("the freed slot went to %q, want other (the flood was served last)", n)
	}
	// priority requests are not put out
	p := newConnSlots(1, 1, 1024, 0)
	if err := p.acquire(context.Background(), flood, false, time.Second); err != nil {
		t.Fatal(err)
	}
	lineUp(t, p, flood, true, "priority", got, failed)
	if err := p.acquire(context.Background(), other, false, time.Minute); !errors.Is(err, ErrQueueShare) {
		t.Errorf("a line full of priority requests took another: %v", err)
	}
	p.release(flood)
	if n := <-got; n != "priority" {
		t.Errorf("served %q", n)
	}
}

// TestConnSlotsPriorityShare: priority is no licence to take every slot
// or the whole line: a priority cluster holding half the slots waits its
// turn as an ordinary one, and its priority requests beyond half the
// line are put out for another cluster's.
func TestConnSlotsPriorityShare(t *testing.T) {
	t.Parallel()
	s := newConnSlots(2, 0, 1024, 0)
	crawler, person, other := flow{cluster: "crawler"}, flow{cluster: "person"}, flow{cluster: "other"}
	if err := s.acquire(context.Background(), crawler, true, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := s.acquire(context.Background(), person, false, time.Second); err != nil {
		t.Fatal(err)
	}
	got, failed := make(chan string, 8), make(chan error, 8)
	for range 3 {
		lineUp(t, s, crawler, true, "crawler", got, failed)
	}
	lineUp(t, s, other, false, "other", got, failed)
	s.release(person)
	if n := <-got; n != "other" {
		t.Errorf("with the crawler holding half the slots, the freed one went to %q, want other", n)
	}
	s.release(crawler)
	if n := <-got; n != "crawler" {
		t.Errorf("with the crawler holding none, the freed one went to %q, want the crawler's priority request", n)
	}

	// The line: 4 places, a priority cluster's 2 protected.
	l := newConnSlots(1, 4, 1024, 0)
	if err := l.acquire(context.Background(), person, false, time.Second); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		lineUp(t, l, crawler, true, "crawler", got, failed)
	}
	if err := l.acquire(context.Background(), crawler, true, time.Minute); !errors.Is(err, ErrQueueShare) {
		t.Errorf("the crawler's fifth priority request in a line of 4 it fills: %v, want ErrQueueShare", err)
	}
	for i := 1; i <= 2; i++ {
		// other's request takes the place of the crawler's newest: the
		// line's length stays, so wait for other's own line
		go func() {
			if err := l.acquire(context.Background(), other, false, time.Minute); err != nil {
				failed <- err
				return
			}
			got <- "other"
		}()
		if err := <-failed; !errors.Is(err, ErrQueueShare) {
			t.Fatalf("other's request %d: %v, want the crawler's newest put out (ErrQueueShare)", i, err)
		}
		testnet.WaitFor(t, 5*time.Second, func() bool {
			l.mu.Lock()
			defer l.mu.Unlock()
			q := l.waiting[other]
			return q != nil && len(q.ws) == i
		})
	}
	// two left, both protected: a third of other's is refused
	if err := l.acquire(context.Background(), other, false, time.Minute); !errors.Is(err, ErrQueueShare) {
		t.Errorf("other's third request against the crawler's protected two: %v, want ErrQueueShare", err)
	}
	l.mu.Lock()
	nc, no := len(l.waiting[crawler].ws), len(l.waiting[other].ws)
	l.mu.Unlock()
	if nc != 2 || no != 2 {
		t.Errorf("the line holds %d of the crawler's and %d of other's, want 2 and 2", nc, no)
	}
	if len(failed) != 0 {
		t.Errorf("a request failed: %v", <-failed)
	}
}

// TestLatencyQuantiles: the window's median and 95th percentile, within a
// bucket, and only of the last StatsWindow.
func TestLatencyQuantiles(t *testing.T) {
	t.Parallel()
	var l latencies
	now := time.Unix(1_000_000, 0)
	for i := range 100 {
		d := 10 * time.Millisecond
		if i >= 90 {
			d = time.Second
		}
		l.add(now, d)
	}
	p50, p95 := l.quantiles(now)
	if p50 < 10*time.Millisecond || p50 > 12*time.Millisecond {
		t.Errorf("p50 = %v, want 10 ms within a bucket", p50)
	}
	if p95 < time.Second || p95 > 1200*time.Millisecond {
		t.Errorf("p95 = %v, want 1 s within a bucket", p95)
	}
	if p50, p95 := l.quantiles(now.Add(StatsWindow)); p50 != 0 || p95 != 0 {
		t.Errorf("after the window: %v %v, want none", p50, p95)
	}
}

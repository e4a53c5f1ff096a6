package upstream

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/maatproxy/maat/internal/testnet"
)

// TestConnSlotsFairHandoff: a freed upstream slot goes to the waiting
// client that holds the fewest, not to the one that queued the most.
func TestConnSlotsFairHandoff(t *testing.T) {
	t.Parallel()
	s := newConnSlots(2, 1024, 0)
	ctx := context.Background()
	hog, honest := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("198.51.100.7")
	for range 2 {
		if err := s.acquire(ctx, hog, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	got := make(chan netip.Addr, 4)
	wait := func(c netip.Addr) {
		go func() {
			if err := s.acquire(ctx, c, 10*time.Second); err == nil {
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
	s.release(hog)
	if c := <-got; c != honest {
		t.Errorf("the freed slot went to %v, want the client holding none (%v)", c, honest)
	}
	s.release(hog)
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
	s := newConnSlots(1, 1024, 0)
	a := netip.MustParseAddr("192.0.2.1")
	if err := s.acquire(context.Background(), a, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := s.acquire(context.Background(), a, 10*time.Millisecond); !errors.Is(err, ErrQueueFull) {
		t.Errorf("a full line: %v, want ErrQueueFull", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.acquire(ctx, a, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("a reset request: %v", err)
	}
	s.release(a)
	if n := s.busy(); n != 0 || s.nwait != 0 || len(s.held) != 0 {
		t.Errorf("after all left: %d busy, %d waiting, held %v", n, s.nwait, s.held)
	}
}

package edge

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"
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
	waitFor(t, 5*time.Second, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.nwait == 3 })
	wait(honest)
	waitFor(t, 5*time.Second, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.nwait == 4 })
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
	if err := s.acquire(context.Background(), a, 10*time.Millisecond); !errors.Is(err, errQueueFull) {
		t.Errorf("a full line: %v, want errQueueFull", err)
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

// TestStreamConnectionsCountedApart: a connection carrying a stream leaves
// the count of limits.upstream_conns (a dial at the cap goes through at
// once), is counted again when its stream ends while it stays open (a
// client keeps it for another exchange), and closing it ends its count.
func TestStreamConnectionsCountedApart(t *testing.T) {
	t.Parallel()
	l := newConnLimit(1, 20*time.Second)
	dial := l.wrap(func(context.Context, string, string) (net.Conn, error) {
		c, _ := net.Pipe()
		return c, nil
	})
	open := func() int { l.mu.Lock(); defer l.mu.Unlock(); return l.open["a"] }
	c1, err := dial(context.Background(), "tcp", "a")
	if err != nil {
		t.Fatal(err)
	}
	stream := c1.(*limitedConn)
	stream.uncount()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	c2, err := dial(ctx, "tcp", "a") // would wait for c1 if it were counted
	if err != nil {
		t.Fatalf("a dial beside a stream's connection: %v", err)
	}
	if n := open(); n != 1 {
		t.Errorf("%d connections counted beside a stream, want 1", n)
	}
	stream.recount()
	stream.recount()
	if n := open(); n != 2 {
		t.Errorf("%d counted once the stream ended, want 2", n)
	}
	_ = stream.Close()
	_ = c2.Close()
	stream.recount() // closed: never counted again
	if n := open(); n != 0 {
		t.Errorf("%d counted after both closed, want 0", n)
	}
}

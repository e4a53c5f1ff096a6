package upstream

import (
	"context"
	"net"
	"testing"
	"time"
)

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

package drain

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestRequestGate: a wait ends when the last request leaves, not before;
// a shut gate lets none in.
func TestRequestGate(t *testing.T) {
	t.Parallel()
	g := NewGate()
	for range 2 {
		if !g.Enter() {
			t.Fatal("an open gate refused a request")
		}
	}
	done := make(chan error, 1)
	go func() { done <- g.Wait(context.Background()) }()
	g.Leave()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	if err := g.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("wait with a request in flight: %v", err)
	}
	cancel()
	g.Leave()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	g.Shut()
	if g.Enter() {
		t.Error("a shut gate let a request in")
	}
	if n := g.InFlight(); n != 0 {
		t.Errorf("in flight: %d", n)
	}
	if err := g.Wait(context.Background()); err != nil {
		t.Error(err)
	}
}

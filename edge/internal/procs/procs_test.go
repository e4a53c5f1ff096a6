package procs

import (
	"context"
	"slices"
	"testing"
	"time"
)

// TestControllerSteps: one processor's worth of use above Up on one
// processor gives all back at once; below Down for Hold on all takes one;
// use between keeps what is; a single busy sample resets the calm.
func TestControllerSteps(t *testing.T) {
	t.Parallel()
	const dt = Every
	use := func(cores float64) time.Duration { return time.Duration(cores * float64(dt)) }
	c := NewController(4)
	if c.Procs() != 4 {
		t.Fatalf("starts at %d, want 4", c.Procs())
	}
	steps := int(Hold / dt)
	for i := 1; i < steps; i++ {
		if n := c.Step(use(0.1), dt); n != 4 {
			t.Fatalf("after %v calm: %d processors, want 4 until Hold", time.Duration(i)*dt, n)
		}
	}
	if n := c.Step(use(0.6), dt); n != 4 { // between Down and Up: the calm starts again
		t.Fatalf("a busier sample: %d", n)
	}
	for range steps - 1 {
		c.Step(use(0.1), dt)
	}
	if n := c.Step(use(0.1), dt); n != 1 {
		t.Fatalf("after Hold below Down: %d processors, want 1", n)
	}
	if n := c.Step(use(0.7), dt); n != 1 {
		t.Errorf("on one processor, below Up: %d, want 1", n)
	}
	if n := c.Step(use(0.8), dt); n != 4 {
		t.Errorf("on one processor, above Up: %d, want all 4 at once", n)
	}
	if n := NewController(1).Step(use(3), dt); n != 1 {
		t.Errorf("max 1: %d", n)
	}
}

// TestLoop: Tick samples the CPU time, sets the processors only when the
// controller changes them, follows On (a reload), and Run gives every
// processor back when it ends.
func TestLoop(t *testing.T) {
	t.Parallel()
	var cpu time.Duration
	on := true
	var got []int
	l := &Loop{
		CPU: func() time.Duration { return cpu },
		Set: func(n int) { got = append(got, n) },
		On:  func() bool { return on },
		Max: 2,
	}
	now := time.Unix(1000, 0)
	tick := func(used time.Duration) {
		cpu += used
		now = now.Add(Every)
		l.Tick(now)
	}
	tick(0)
	for range int(Hold / Every) {
		tick(Every / 100) // 0.01 of a processor
	}
	if !slices.Equal(got, []int{1}) {
		t.Fatalf("after a calm: sets %v, want [1]", got)
	}
	tick(Every) // a whole processor's worth
	if !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("after a busy sample: sets %v, want [1 2]", got)
	}
	for range int(Hold / Every) {
		tick(0)
	}
	if !slices.Equal(got, []int{1, 2, 1}) {
		t.Fatalf("after a second calm: sets %v, want [1 2 1]", got)
	}
	on = false // a reload to procs: all
	tick(0)
	tick(0)
	if !slices.Equal(got, []int{1, 2, 1, 2}) {
		t.Fatalf("turned off: sets %v, want all back: [1 2 1 2]", got)
	}
	on = true
	tick(0) // the first sample after: no decision yet
	for range int(Hold / Every) {
		tick(0)
	}
	if !slices.Equal(got, []int{1, 2, 1, 2, 1}) {
		t.Fatalf("on again: sets %v, want [1 2 1 2 1]", got)
	}

	// Run: at its end, every processor back.
	ticks := make(chan time.Time)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.Run(ctx, ticks); close(done) }()
	cancel()
	<-done
	if !slices.Equal(got, []int{1, 2, 1, 2, 1, 2}) {
		t.Errorf("after Run ended: sets %v, want all back at the end", got)
	}
}

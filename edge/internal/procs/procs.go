// Package procs runs the edge on one processor (GOMAXPROCS 1) while it
// uses little CPU, and on all of them when it uses more (config procs:
// adaptive).
//
// Why: the edge's work is many small requests on connections that are
// mostly idle. With an idle processor to spare, Go's scheduler wakes a
// thread for each goroutine made runnable (a frame read, a handler
// started, a write flushed), which finds nothing to do and sleeps again:
// on a 2-core VM in a storm of refused requests that waking and sleeping
// (futex, epoll, nanosleep) was about a third of the edge's CPU, and one
// processor took a fifth off its CPU time at the same latency (docs/
// operations.md, "Storm"). Under more load than one processor carries,
// every processor is needed: the controller gives them back within one
// sample (100 ms) and takes them away only after a sustained calm.
//
// It changes no answer: GOMAXPROCS decides only how many threads run Go
// code at once. Off (procs: all, the default), GOMAXPROCS stays what the
// runtime chose.
package procs

import (
	"context"
	"time"
)

// Thresholds of the controller, in processors' worth of CPU time used
// over a sample.
const (
	// Up: on one processor, more than this, and all are given back: three
	// quarters of the one busy, a line of runnable work begins to form.
	Up = 0.75
	// Down: on all processors, less than this for Hold, and one is kept:
	// half of one, so that going down leaves room before Up.
	Down = 0.5
	// Hold is how long the use must stay below Down before the edge goes
	// down to one processor.
	Hold = 5 * time.Second
	// Every is how often the CPU time is sampled.
	Every = 100 * time.Millisecond
)

// Controller decides the processors from the CPU time used.
type Controller struct {
	max, cur int
	calm     time.Duration // time below Down so far
}

// NewController starts at max processors (all); max ≤ 1 never changes.
func NewController(max int) *Controller {
	return &Controller{max: max, cur: max}
}

// Procs is the number of processors last decided.
func (c *Controller) Procs() int { return c.cur }

// Step takes the CPU time used over the last dt and returns the number of
// processors to run on.
func (c *Controller) Step(cpu, dt time.Duration) int {
	if c.max <= 1 || dt <= 0 {
		return c.cur
	}
	use := cpu.Seconds() / dt.Seconds()
	switch {
	case c.cur == 1:
		if use > Up {
			c.cur, c.calm = c.max, 0
		}
	case use < Down:
		c.calm += dt
		if c.calm >= Hold {
			c.cur, c.calm = 1, 0
		}
	default:
		c.calm = 0
	}
	return c.cur
}

// Loop drives a Controller from the process's CPU time.
type Loop struct {
	// CPU is the process's CPU time so far (user and system).
	CPU func() time.Duration
	// Set runs the process on n processors; n == Max means the runtime's
	// own choice again.
	Set func(n int)
	// On reports whether the controller is on (procs: adaptive, read at
	// each tick so that a reload turns it on or off).
	On func() bool
	// Max is all the processors: the runtime's choice at the start.
	Max int

	c      *Controller
	last   time.Duration
	lastAt time.Time
}

// Tick samples the CPU time at now and sets the processors when the
// controller changes them. While On is false it keeps (or puts back) all.
func (l *Loop) Tick(now time.Time) {
	if l.c == nil {
		l.c = NewController(l.Max)
	}
	if !l.On() {
		l.Stop()
		return
	}
	cpu := l.CPU()
	if l.lastAt.IsZero() {
		l.last, l.lastAt = cpu, now
		return
	}
	before := l.c.Procs()
	n := l.c.Step(cpu-l.last, now.Sub(l.lastAt))
	l.last, l.lastAt = cpu, now
	if n != before {
		l.Set(n)
	}
}

// Stop gives every processor back, and starts the controller afresh.
func (l *Loop) Stop() {
	if l.c != nil && l.c.Procs() != l.Max {
		l.Set(l.Max)
	}
	l.c, l.lastAt = NewController(l.Max), time.Time{}
}

// Run ticks at each of ticks until ctx ends, then gives every processor
// back.
func (l *Loop) Run(ctx context.Context, ticks <-chan time.Time) {
	for {
		select {
		case <-ctx.Done():
			l.Stop()
			return
		case now := <-ticks:
			l.Tick(now)
		}
	}
}

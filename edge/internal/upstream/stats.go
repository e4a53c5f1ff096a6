package upstream

import (
	"math"
	"sync"
	"time"
)

// Stats is what a Pool's addresses carry at a moment: the parts of the
// edge's pressure signal.
type Stats struct {
	InUse    int // connection slots held
	Capacity int // connection slots, over the pool's addresses
	Queue    int // requests waiting for a slot
	// QueueWait is how long the oldest waiting request has waited.
	QueueWait time.Duration
	// P50 and P95 are the upstream's time to an answer's head over the
	// last StatsWindow (the slowest of the pool's addresses); zero without
	// answers in that time.
	P50, P95 time.Duration
}

// StatsWindow is the time over which Stats's latencies are measured.
const StatsWindow = 10 * time.Second

// Stats returns the pool's Stats as of now.
func (p *Pool) Stats(now time.Time) Stats {
	var st Stats
	for _, t := range p.targets {
		s := t.slots
		s.mu.Lock()
		st.InUse += s.inUse
		st.Capacity += s.size
		st.Queue += s.nwait
		for _, q := range s.waiting {
			for _, w := range q.ws {
				st.QueueWait = max(st.QueueWait, time.Duration(now.UnixNano()-w.since))
			}
		}
		s.mu.Unlock()
		p50, p95 := s.lat.quantiles(now)
		st.P50, st.P95 = max(st.P50, p50), max(st.P95, p95)
	}
	return st
}

// latencies counts durations in a window of StatsWindow, in one-second
// slots of logarithmic buckets (a quarter of an octave each, from 1 ms),
// for quantiles within about 19%.
type latencies struct {
	mu    sync.Mutex
	slots [latSlots]latSlot
}

const (
	latSlots   = int(StatsWindow / time.Second)
	latBuckets = 80 // 1 ms · 2^(80/4) ≈ 17 min: the last bucket takes all beyond
)

type latSlot struct {
	sec    int64 // the Unix second the counts are of
	counts [latBuckets]uint32
}

// latBucket is d's bucket: the first whose upper bound, 1 ms · 2^((i+1)/4),
// is at least d.
func latBucket(d time.Duration) int {
	if d <= time.Millisecond {
		return 0
	}
	i := int(math.Ceil(4*math.Log2(float64(d)/float64(time.Millisecond)))) - 1
	return min(max(i, 0), latBuckets-1)
}

// latUpper is bucket i's upper bound.
func latUpper(i int) time.Duration {
	return time.Duration(float64(time.Millisecond) * math.Exp2(float64(i+1)/4))
}

// add counts d at now.
func (l *latencies) add(now time.Time, d time.Duration) {
	sec := now.Unix()
	b := latBucket(d)
	l.mu.Lock()
	s := &l.slots[sec%int64(latSlots)]
	if s.sec != sec {
		*s = latSlot{sec: sec}
	}
	s.counts[b]++
	l.mu.Unlock()
}

// quantiles returns the median and the 95th percentile of the durations
// counted in the window before now (each as its bucket's upper bound).
func (l *latencies) quantiles(now time.Time) (p50, p95 time.Duration) {
	var sum [latBuckets]uint32
	var n uint64
	sec := now.Unix()
	l.mu.Lock()
	for i := range l.slots {
		s := &l.slots[i]
		if s.sec <= sec-int64(latSlots) || s.sec > sec {
			continue
		}
		for b, c := range s.counts {
			sum[b] += c
			n += uint64(c)
		}
	}
	l.mu.Unlock()
	if n == 0 {
		return 0, 0
	}
	var acc uint64
	for b, c := range sum {
		acc += uint64(c)
		if p50 == 0 && 2*acc >= n {
			p50 = latUpper(b)
		}
		if 20*acc >= 19*n {
			return p50, latUpper(b)
		}
	}
	return p50, latUpper(latBuckets - 1)
}

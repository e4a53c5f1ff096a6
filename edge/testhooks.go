package edge

import (
	"time"

	"github.com/maatproxy/maat/edge/internal/park"
)

// testHooks are what tests turn on a Server or a Handler: shorter waits,
// a trace of what parking does, a count of validations. They are no part
// of the configuration, which holds only what an operator sets; the zero
// value is production's. A Server keeps them in its Env, which hands them
// to every Handler it builds; tests give them to newServer, or set them in
// the Env they give NewHandler.
type testHooks struct {
	// spillAfter replaces the const of that name when set (edge/internal/spill: Options.After).
	spillAfter time.Duration
	// streamQuiet replaces the const of that name when set (edge/internal/upstream: Options.StreamQuiet).
	streamQuiet time.Duration
	// parkTrace, when set, is told what the parking of idle HTTP/1
	// connections does (edge/internal/park); parkNoPoll has parked connections wait
	// on goroutines, as where epoll is missing.
	parkTrace  func(park.Event)
	parkNoPoll bool
	// geoCheckInterval is how often the Server looks for replaced geo
	// database files; if zero, geo's default (a minute: the databases
	// change monthly).
	geoCheckInterval time.Duration
	// storeTimeout replaces store.DefaultTimeout, the wait for Redis in
	// one request's call, when set.
	storeTimeout time.Duration
	// validating, when set, is called each time the edge validates a
	// configuration itself (validateOnce).
	validating func()
	// procsTicks, procsCPU and procsSet, when set, replace the processors'
	// controller's ticker, CPU time and GOMAXPROCS (procs: adaptive), so
	// that a test neither waits for the clock nor changes its own
	// process's GOMAXPROCS.
	procsTicks <-chan time.Time
	procsCPU   func() time.Duration
	procsSet   func(int)
}

package edge

import (
	"errors"
	"fmt"
	"sync"
)

// group runs the goroutines a Server starts and waits for them: every one
// is started through Go, none outlives Wait, and an error one returns is
// kept and signalled on failed, so that Serve can stop and report it. Go
// must not be called once Wait has begun (the Server starts goroutines in
// Start and waits in Shutdown, after Start returned).
type group struct {
	wg     sync.WaitGroup
	mu     sync.Mutex
	errs   []error
	failed chan struct{} // closed at the first error
	once   sync.Once
}

func newGroup() *group { return &group{failed: make(chan struct{})} }

// Go runs f in a goroutine; a non-nil error is recorded under name.
func (g *group) Go(name string, f func() error) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		if err := f(); err != nil {
			g.mu.Lock()
			g.errs = append(g.errs, fmt.Errorf("%s: %w", name, err))
			g.mu.Unlock()
			g.once.Do(func() { close(g.failed) })
		}
	}()
}

// Wait waits for every goroutine and returns their errors, joined.
func (g *group) Wait() error {
	g.wg.Wait()
	return g.err()
}

// err returns the errors recorded so far, joined.
func (g *group) err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return errors.Join(g.errs...)
}

package edge

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	rtmetrics "runtime/metrics"
	"runtime/pprof"
	"sync"
	"testing"
	"time"

	"github.com/maatproxy/maat/internal/testattack"
	"golang.org/x/crypto/bcrypt"
)

// TestAttacksLeaveNothing runs a short version of each attack of the
// attack suite (internal/testattack; bench/attack runs the long ones)
// against an edge with short timeouts, and asserts what limits_test.go
// does not: once an attack is over, the edge holds nothing more than
// before it — its goroutines and its live heap are back where they were,
// and it holds no connection to the upstream (but idle ones, which are let
// go), with the edge still running.
//
// It measures the whole process, so it does not call t.Parallel: Go runs
// it before the parallel tests, alone.
func TestAttacksLeaveNothing(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("right"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	up, err := testattack.NewUpstream(16 << 20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Close() })
	e := startEdge(t, fmt.Sprintf(`
limits: {body_timeout: 1s, body_min_rate: 100, write_timeout: 1s, upstream_conns: 8, upstream_queue: 500ms,
  quic_handshakes: 4, auth_attempts: 3, header_bytes: 16384}
timeouts: {handshake: 1s}
policy: ""
sites: [{hosts: [localhost], upstream: %s, compress: false,
  routes: [{path: /admin/, upstream: %[1]s, basic_auth: {users: {%s: %q}}}]}]
`, up.URL, testattack.AuthUser, hash))
	target := testattack.Target{HTTPS: e.Addrs().HTTPS, HTTP3: e.Addrs().HTTP3, TLS: e.tlsConfig(),
		Host: "localhost", Upstream: up, AuthPath: "/admin/", AuthPassword: "right"}
	// The upstream connections the edge keeps idle in its pool are not a
	// leak; they are let go before each count.
	quiesce := func() { e.Server.handler.Load().upstream.CloseIdleConnections() }
	p := testattack.Short()
	// One edge takes every attack in turn, and after each holds no more
	// than it did before it.
	for _, sc := range testattack.Scenarios() {
		t.Run(sc.Name, func(t *testing.T) {
			quiesce()
			before := countProcess()

			peak := watchGoroutines()
			var out testattack.Outcome
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			began := time.Now()
			reqs := up.Stats().Requests
			if err := sc.Run(ctx, target, p, &out); err != nil {
				t.Fatalf("the attack: %v", err)
			}
			if n := up.Stats().Requests - reqs; sc.Name == "path-spellings" && n != 0 {
				t.Errorf("%d spellings of a path behind basic auth reached the upstream without a password: %s", n, out.Answers.String())
			}
			top := peak()
			if out.Held == 0 || top <= before.goroutines {
				t.Fatalf("the attack did not take hold (held %d, goroutines %d → %d at most): %s",
					out.Held, before.goroutines, top, out.Answers.String())
			}
			var after processCount
			start := time.Now()
			back := waitFor(t, 15*time.Second, func() bool {
				quiesce()
				after = countProcess()
				return after.goroutines <= before.goroutines+2 && after.heap <= before.heap+1<<20 &&
					up.Stats().Conns == 0
			})
			t.Logf("attack %v; goroutines %d → %d → %d, live heap %.1f → %.1f MiB, back after %v; answered %s",
				start.Sub(began).Round(time.Millisecond), before.goroutines, top, after.goroutines,
				float64(before.heap)/(1<<20), float64(after.heap)/(1<<20), time.Since(start).Round(time.Millisecond),
				out.Answers.String())
			if !back {
				t.Errorf("after the attack (%s): goroutines %d → %d, live heap %.1f → %.1f MiB, upstream connections %d; goroutines now:\n%s",
					out.Answers.String(), before.goroutines, after.goroutines,
					float64(before.heap)/(1<<20), float64(after.heap)/(1<<20), up.Stats().Conns, goroutineDump())
			}
		})
	}
}

// processCount is what the process holds at one time.
type processCount struct {
	goroutines int
	heap       uint64 // live heap after a collection
}

func countProcess() processCount {
	runtime.GC()
	runtime.GC() // and what sync.Pools kept through the first
	s := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	rtmetrics.Read(s)
	return processCount{goroutines: runtime.NumGoroutine(), heap: s[0].Value.Uint64()}
}

// watchGoroutines samples the goroutine count every 5 ms until the
// returned function is called, which returns the highest count seen.
func watchGoroutines() func() int {
	stop := make(chan struct{})
	top := runtime.NumGoroutine() // written by the sampler only, read after it ends
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				top = max(top, runtime.NumGoroutine())
			}
		}
	})
	return func() int {
		close(stop)
		wg.Wait()
		return top
	}
}

func goroutineDump() string {
	var b bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
	return b.String()
}

package edge

import (
	"io"
	"net/http"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maatproxy/maat/edge/config"
	"github.com/maatproxy/maat/edge/internal/procs"
)

// TestProcsAdaptive: with procs: adaptive, a calm edge goes down to one
// processor and a busy one gets them all back, as maat_procs says; a
// reload to procs: all gives them back at once; the edge answers
// throughout. The controller's clock, CPU time and GOMAXPROCS are the
// test's (hooks), so that it waits for no clock and leaves the test
// process's GOMAXPROCS alone.
func TestProcsAdaptive(t *testing.T) {
	t.Parallel()
	max := runtime.GOMAXPROCS(0)
	up := echoUpstream(t, "a")
	site := "sites: [{hosts: [localhost], upstream: " + up.URL + "}]\n"
	ticks := make(chan time.Time)
	var cpu atomic.Int64
	sets := make(chan int, 8)
	cfg, err := config.Parse("test.yaml", []byte(edgeConfigText("", "procs: adaptive\n"+site)))
	if err != nil {
		t.Fatal(err)
	}
	e := startEdgeHooks(t, cfg, testHooks{procsTicks: ticks, procsSet: func(n int) { sets <- n },
		procsCPU: func() time.Duration { return time.Duration(cpu.Load()) }}, io.Discard)
	now := time.Now()
	tick := func(used time.Duration) {
		cpu.Add(int64(used))
		now = now.Add(procs.Every)
		ticks <- now
	}
	procsGauge := func() string { return scrape(t, e)["maat_procs"] }
	wantSet := func(want int, what string) {
		t.Helper()
		select {
		case n := <-sets:
			if n != want {
				t.Fatalf("%s: set %d processors, want %d", what, n, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no change of processors, want %d", what, want)
		}
		tick(0) // the loop has finished the tick that set it
		if g := procsGauge(); g != strconv.Itoa(want) {
			t.Fatalf("%s: maat_procs %s, want %d", what, g, want)
		}
	}
	if g := procsGauge(); g != strconv.Itoa(max) {
		t.Fatalf("at the start: maat_procs %s, want %d", g, max)
	}
	tick(0)
	for range int(procs.Hold/procs.Every) + 1 {
		tick(procs.Every / 100)
	}
	if max < 2 {
		select {
		case n := <-sets:
			t.Fatalf("with one processor in all, set %d", n)
		default:
		}
		return
	}
	wantSet(1, "calm")
	req, _ := http.NewRequest("GET", e.url("/"), nil)
	req.Host = "localhost"
	res, err := e.client(t, "h2").Do(req)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("on one processor: %v %v", res, err)
	}
	res.Body.Close()
	tick(procs.Every) // a whole processor's worth
	wantSet(max, "busy")
	for range int(procs.Hold/procs.Every) + 1 {
		tick(0)
	}
	wantSet(1, "calm again")
	if err := reloadText(t, e.Server, "", "procs: all\n"+site); err != nil {
		t.Fatal(err)
	}
	tick(0)
	wantSet(max, "reloaded to procs: all")
}

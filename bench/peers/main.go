package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/maatproxy/maat/internal/testproc"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	edge, caddy string
	baseline    string // another edge binary, measured beside the first as "edge0"
	floor       string // the gofloor binary, or "" to leave it out
	noPark      bool   // also measure the edge with limits.park_after: 0s, as "edge-nopark"
	adaptive    bool   // also measure the edge with procs: adaptive, as "edge-adaptive"
	rounds      int
	duration    time.Duration
	hsDuration  time.Duration
	idle        int
	only        string // "load", "handshake", "idle" or "" for all
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("peers", flag.ContinueOnError)
	fs.StringVar(&o.edge, "edge", "bin/edge", "the edge binary, built from this tree")
	fs.StringVar(&o.caddy, "caddy", "bin/caddy", "the Caddy binary, built from bench/peers/caddy")
	fs.StringVar(&o.floor, "floor", "", "the gofloor binary (bench/peers/gofloor): net/http's server doing the least a proxy does, the floor of any Go front")
	fs.StringVar(&o.baseline, "baseline", "", "an earlier edge binary to measure beside -edge, as edge0 (before and after a change, in one run)")
	fs.BoolVar(&o.noPark, "nopark", false, "also measure the edge with parking off (limits.park_after: 0s), as edge-nopark")
	fs.BoolVar(&o.adaptive, "adaptive", false, "also measure the edge with procs: adaptive (one processor while calm), as edge-adaptive")
	fs.IntVar(&o.rounds, "rounds", 3, "rounds of each measurement; the order of fronts rotates each round")
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "length of each load run (whole seconds)")
	fs.DurationVar(&o.hsDuration, "handshake-duration", 3*time.Second, "length of each handshake run")
	fs.IntVar(&o.idle, "idle", 5000, "idle connections held against each front (0: skip)")
	fs.StringVar(&o.only, "only", "", "run only one part: load, handshake or idle")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.rounds < 1 || o.duration < time.Second || o.hsDuration <= 0 || o.idle < 0 {
		return o, fmt.Errorf("peers: -rounds ≥ 1, -duration ≥ 1s, -handshake-duration > 0, -idle ≥ 0")
	}
	if !slices.Contains([]string{"", "load", "handshake", "idle"}, o.only) {
		return o, fmt.Errorf("peers: -only %q: load, handshake or idle", o.only)
	}
	return o, nil
}

func run(ctx context.Context, args []string, out io.Writer) error {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	if err := need(); err != nil {
		return err
	}
	raiseFileLimit()
	dir, err := os.MkdirTemp("", "maat-peers-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	s := &setup{dir: dir}
	if s.certFile, s.keyFile, err = writeCert(dir); err != nil {
		return err
	}
	if s.upstream, err = freePort(); err != nil {
		return err
	}
	up, err := s.startUpstream(ctx)
	if err != nil {
		return err
	}
	defer up.stop()
	starts := []func() (*front, error){
		func() (*front, error) { return s.startNginxFront(ctx) },
		func() (*front, error) { return s.startCaddy(ctx, o.caddy) },
		func() (*front, error) { return s.startEdge(ctx, "edge", o.edge, "") },
	}
	if o.noPark {
		starts = append(starts, func() (*front, error) {
			return s.startEdge(ctx, "edge-nopark", o.edge, "  park_after: 0s\n") // under limits:
		})
	}
	if o.adaptive {
		starts = append(starts, func() (*front, error) {
			return s.startEdge(ctx, "edge-adaptive", o.edge, "procs: adaptive\n")
		})
	}
	if o.floor != "" {
		starts = append(starts, func() (*front, error) { return s.startFloor(ctx, o.floor) })
	}
	if o.baseline != "" {
		starts = append(starts, func() (*front, error) { return s.startEdge(ctx, "edge0", o.baseline, "") })
	}
	var fronts []*front
	defer func() {
		for _, f := range fronts {
			f.stop()
		}
	}()
	for _, start := range starts {
		f, err := start()
		if err != nil {
			return err
		}
		f.restart = start
		fronts = append(fronts, f)
	}
	fmt.Fprintf(out, "peers: %d cores, load average %s at start; upstream nginx serving %d bytes\n",
		numCPU(), testproc.LoadAvg(), bodySize)
	if o.only == "" || o.only == "load" {
		if err := loadTables(ctx, out, fronts, o); err != nil {
			return err
		}
	}
	if o.only == "" || o.only == "handshake" {
		if err := handshakeTable(ctx, out, fronts, o); err != nil {
			return err
		}
	}
	if (o.only == "" || o.only == "idle") && o.idle > 0 {
		if err := idleTable(ctx, out, fronts, o.idle); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "load average %s at the end\n", testproc.LoadAvg())
	return nil
}

// raiseFileLimit lifts the soft descriptor limit to the hard one (the
// idle connections need thousands); the fronts inherit it.
func raiseFileLimit() {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) == nil && l.Cur < l.Max {
		l.Cur = l.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
}

// rotated is fronts in round r's order: each front goes first in turn.
func rotated(fronts []*front, r int) []*front {
	k := r % len(fronts)
	return append(slices.Clone(fronts[k:]), fronts[:k]...)
}

// loadTables measures HTTP/1.1 and HTTP/2 throughput and CPU per request.
func loadTables(ctx context.Context, out io.Writer, fronts []*front, o options) error {
	kinds := []struct {
		title string
		load  func(context.Context, string, time.Duration) (sample, error)
	}{
		{"HTTP/1.1, wrk -t2 -c32", runWrk},
		{"HTTP/2, h2load -c16 -m10", runH2load},
	}
	for _, k := range kinds {
		for _, f := range fronts { // warm up: connection pools, JIT-free but caches
			if _, err := k.load(ctx, f.addr, time.Second); err != nil {
				return fmt.Errorf("%s: %w", f.name, err)
			}
		}
	}
	results := make([]map[string][]sample, len(kinds))
	for i := range results {
		results[i] = map[string][]sample{}
	}
	for r := range o.rounds {
		for i, k := range kinds {
			for _, f := range rotated(fronts, r) {
				s, err := measure(f, func() (sample, error) { return k.load(ctx, f.addr, o.duration) })
				if err != nil {
					return err
				}
				results[i][f.name] = append(results[i][f.name], s)
			}
		}
	}
	for i, k := range kinds {
		fmt.Fprintf(out, "\n%s, %d rounds of %s, order rotating; medians [min–max]\n", k.title, o.rounds, o.duration)
		printTable(out, fronts, results[i], "req/s", "CPU µs/req")
	}
	return nil
}

// handshakeTable measures new TLS connections per second, full and
// resumed, each carrying one request.
func handshakeTable(ctx context.Context, out io.Writer, fronts []*front, o options) error {
	const workers = 8
	for _, resume := range []bool{false, true} {
		results := map[string][]sample{}
		resumed := map[string]int64{}
		for r := range o.rounds {
			for _, f := range rotated(fronts, r) {
				var n int64
				s, err := measure(f, func() (sample, error) {
					s, res, err := handshakes(ctx, f.addr, o.hsDuration, workers, resume)
					n = res
					return s, err
				})
				if err != nil {
					return err
				}
				results[f.name] = append(results[f.name], s)
				resumed[f.name] += n
			}
		}
		kind := "full handshakes"
		if resume {
			kind = "resumed handshakes (session tickets)"
		}
		fmt.Fprintf(out, "\nNew TLS 1.3 connections, %s, one request each, %d clients, %d rounds of %s; medians [min–max]\n",
			kind, workers, o.rounds, o.hsDuration)
		printTable(out, fronts, results, "conns/s", "CPU µs/conn")
		if resume {
			for _, f := range fronts {
				var total int64
				for _, s := range results[f.name] {
					total += s.requests
				}
				fmt.Fprintf(out, "  %-6s resumed %d of %d connections\n", f.name, resumed[f.name], total)
			}
		}
	}
	return nil
}

// idleTable measures the memory an idle connection holds in each front,
// each time in a front started afresh: memory a runtime took for earlier
// connections and kept would hide the growth.
func idleTable(ctx context.Context, out io.Writer, fronts []*front, n int) error {
	fmt.Fprintf(out, "\nIdle connections: %d held open after one request each, in a fresh front; growth of its resident memory\n", n)
	fmt.Fprintf(out, "%-8s %16s %16s\n", "front", "HTTP/1.1 B/conn", "HTTP/2 B/conn")
	for i, f := range fronts {
		var per [2]float64
		for j, h2 := range []bool{false, true} {
			f.stop()
			nf, err := f.restart()
			if err != nil {
				return err
			}
			nf.restart = f.restart
			fronts[i], f = nf, nf
			r, err := holdIdle(ctx, f, n, h2)
			if err != nil {
				return fmt.Errorf("%s idle: %w", f.name, err)
			}
			per[j] = r.perConn()
		}
		fmt.Fprintf(out, "%-8s %16.0f %16.0f\n", f.name, per[0], per[1])
	}
	return nil
}

// Command attack runs the attacks of issue 15 against a real edge on
// loopback, one fresh edge process per attack in front of an upstream it
// runs itself, and prints a Markdown table of what each attack cost the
// edge and its upstream, and what an honest client saw meanwhile. Then it
// runs the gate cases of issue 33 (bypass tries: paths, passes, parrots,
// forwarded addresses, redirects, the tarpit, TRACE, resumption), each
// against a fresh edge too, and prints a second table: how many tries got
// through, and how many honest ones were refused.
//
//	go run ./bench/attack                      # the edge of this tree
//	go run ./bench/attack -src /tmp/before     # the edge of another tree
//	go run ./bench/attack -run 'idle|quic'     # some attacks only
//	go run ./bench/attack -gate                # the gate cases only
//	go run ./bench/attack -run gate/paths      # one gate case
//
// The edge is measured from outside: goroutines from its /metrics, RSS and
// CPU time from /proc/PID; the refusals from its maat_* counters. The
// honest client and the upstream run in processes of their own (this
// program, as "attack probe" and "attack upstream"), apart from the
// attackers. The
// attacks themselves live in internal/testattack, shared with the edge's
// tests.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"syscall"
	"time"

	"github.com/maatproxy/maat/internal/testattack"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(os.Args) > 1 && (os.Args[1] == "probe" || os.Args[1] == "upstream") {
		sub := map[string]func([]string, io.Reader, io.Writer) error{"probe": probeMain, "upstream": upstreamMain}[os.Args[1]]
		if err := sub(os.Args[2:], os.Stdin, os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "attack %s: %v\n", os.Args[1], err)
			os.Exit(1)
		}
		return
	}
	if err := run(ctx, os.Args, os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "attack:", err)
		os.Exit(1)
	}
}

// options are the command line.
type options struct {
	src, bin   string
	extra      string
	run        *regexp.Regexp
	probeEvery time.Duration
	settle     time.Duration
	bigMB      int64
	verbose    bool
	gate       bool   // the gate cases only
	chromium   string // the Chromium for the parrot case; "" = found on PATH, "none" = none
	p          testattack.Params
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	o, short, err := parseWith(args, testattack.Full(), stderr)
	if err != nil || !short {
		return o, err
	}
	// Again, over the short counts: a flag given still wins. The holds stay
	// long, as they wait for the edge's own timeouts.
	p := testattack.Short()
	p.Hold = testattack.Full().Hold
	o, _, err = parseWith(args, p, io.Discard)
	return o, err
}

// parseWith parses args over the counts and times p.
func parseWith(args []string, p testattack.Params, stderr io.Writer) (options, bool, error) {
	fs := flag.NewFlagSet("attack", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: %s [flags]\n\n"+
			"Runs each attack of issue 15 against a fresh edge process on loopback and prints\n"+
			"a Markdown table: upstream connections and requests, the edge's goroutines, RSS\n"+
			"and CPU, the honest client's latency, and the bounds that fired. Then runs the\n"+
			"gate cases of issue 33 (named gate/…), each against a fresh edge, and prints a\n"+
			"second table: each bypass try, how often it got through, and how often an honest\n"+
			"try was refused.\n\nflags:\n", fs.Name())
		fs.PrintDefaults()
	}
	o := options{p: p}
	q := &o.p
	fs.StringVar(&o.src, "src", ".", "source tree whose ./cmd/edge is built and attacked")
	fs.StringVar(&o.bin, "bin", "", "an edge binary to attack instead of building -src")
	fs.StringVar(&o.extra, "extra", "", "YAML appended to the edge's configuration, e.g. 'limits: {body_timeout: 5s}'")
	runRE := fs.String("run", "", "run only the attacks and gate cases (gate/…) whose name matches this regular expression")
	short := fs.Bool("short", false, "small counts (a quick check of the program)")
	fs.DurationVar(&o.probeEvery, "probe-every", 40*time.Millisecond, "the honest client's interval between requests")
	fs.DurationVar(&o.settle, "settle", 15*time.Second, "how long to wait after an attack for the edge's goroutines to return to their baseline")
	fs.Int64Var(&o.bigMB, "big-mb", 50, "size of the upstream's large response, MB")
	fs.BoolVar(&o.verbose, "v", false, "copy the edge's log to stderr")
	fs.BoolVar(&o.gate, "gate", false, "run only the gate cases of issue 33 (the second table)")
	fs.StringVar(&o.chromium, "chromium", "", "the Chromium whose fingerprint the parrots are compared with; \"\" = chromium on PATH, \"none\" = the Chrome emulation's")
	fs.IntVar(&q.ResetStreams, "reset-streams", q.ResetStreams, "rapid reset: streams opened and reset")
	fs.IntVar(&q.HeldConns, "held-conns", q.HeldConns, "HTTP/2 connections whose streams' bodies never come")
	fs.IntVar(&q.HeldStreams, "held-streams", q.HeldStreams, "streams per such connection")
	fs.IntVar(&q.TrickleClients, "trickle-clients", q.TrickleClients, "HTTP/1.1 clients trickling a body")
	fs.DurationVar(&q.TrickleEvery, "trickle-every", q.TrickleEvery, "time between two bytes of a trickled body")
	fs.IntVar(&q.SlowConns, "slow-conns", q.SlowConns, "HTTP/1.1 connections that never read the large response")
	fs.IntVar(&q.SlowStreams, "slow-streams", q.SlowStreams, "HTTP/2 streams behind a zero window")
	fs.IntVar(&q.IdleConns, "idle-conns", q.IdleConns, "idle HTTP/2 connections, and as many HTTP/1.1 ones")
	fs.IntVar(&q.IdleSources, "idle-sources", q.IdleSources, "client addresses the idle connections come from")
	fs.IntVar(&q.AuthClients, "auth-clients", q.AuthClients, "clients trying wrong passwords")
	fs.DurationVar(&q.AuthEvery, "auth-every", q.AuthEvery, "each password client's pace")
	fs.DurationVar(&q.AuthFor, "auth-for", q.AuthFor, "how long the password flood lasts")
	fs.IntVar(&q.QUICClients, "quic-clients", q.QUICClients, "clients sending QUIC Initials and never reading")
	fs.IntVar(&q.HeaderRequests, "header-requests", q.HeaderRequests, "oversized requests per protocol")
	fs.IntVar(&q.H2HeaderBytes, "h2-header-bytes", q.H2HeaderBytes, "HPACK-encoded size of each oversized HTTP/2 header list")
	fs.IntVar(&q.H1HeaderBytes, "h1-header-bytes", q.H1HeaderBytes, "size of each oversized HTTP/1.1 header field")
	fs.DurationVar(&q.Hold, "hold", q.Hold, "the longest a slow attack is held waiting for the edge to cut it (the run length)")
	if err := fs.Parse(args[1:]); err != nil {
		return o, false, err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return o, false, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	var err error
	if o.run, err = regexp.Compile(*runRE); err != nil {
		return o, false, fmt.Errorf("-run: %w", err)
	}
	return o, *short, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	// The deaf QUIC clients hide their UDP sockets on purpose.
	if err := os.Setenv("QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING", "true"); err != nil {
		return err
	}
	scenarios, gates := selectAttacks(o)
	if len(scenarios) == 0 && len(gates) == 0 {
		return fmt.Errorf("no attack matches -run %q", o.run)
	}
	dir, err := os.MkdirTemp("", "maat-attack-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin, err := buildEdge(ctx, o, dir, stderr)
	if err != nil {
		return err
	}
	env := describe(o, bin)
	fmt.Fprintf(stderr, "attacking %s\n", env.edge)
	if len(scenarios) > 0 {
		var rows []row
		for i, sc := range scenarios {
			fmt.Fprintf(stderr, "[%d/%d] %s …\n", i+1, len(scenarios), sc.Title)
			r, err := runScenario(ctx, o, bin, dir, sc, stderr)
			if err != nil {
				return fmt.Errorf("%s: %w", sc.Name, err)
			}
			fmt.Fprintf(stderr, "      %s\n", r.brief())
			rows = append(rows, r)
		}
		env.loadAfter = loadAverage()
		writeTable(stdout, env, rows)
	}
	if len(gates) == 0 {
		return nil
	}
	if len(scenarios) > 0 {
		fmt.Fprintln(stdout)
	}
	cases := runGate(ctx, o, bin, dir, gates, stderr)
	writeGateTable(stdout, env, cases)
	var failed []error
	for _, c := range cases {
		if c.err != nil {
			failed = append(failed, fmt.Errorf("%s: %w", c.title, c.err))
		}
	}
	return errors.Join(failed...)
}

// selectAttacks returns the attacks and gate cases -run selects; -gate
// leaves the attacks out.
func selectAttacks(o options) ([]testattack.Scenario, []testattack.GateCase) {
	var scenarios []testattack.Scenario
	if !o.gate {
		for _, sc := range testattack.Scenarios() {
			if o.run.MatchString(sc.Name) {
				scenarios = append(scenarios, sc)
			}
		}
	}
	var gates []testattack.GateCase
	for _, gc := range testattack.GateCases() {
		if o.run.MatchString(gc.Name) {
			gates = append(gates, gc)
		}
	}
	return scenarios, gates
}

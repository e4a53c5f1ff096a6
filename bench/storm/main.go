// Command storm is the storm of issue 35 as a bounded, reproducible
// benchmark: a slow upstream with a fixed capacity (-slots requests at a
// time, -upstream-rate requests a second in all), bots of the kinds seen
// in the wild (curl itself, python-requests over Go's TLS, Go's net/http,
// utls Chrome parrots over Go's HTTP/2, an honest crawler) from many
// loopback addresses (127.16.0.0 and up, one /24 each), and people
// browsing as Chrome does (utls Chrome 133 with Chrome's HTTP/2), some
// with a pass cookie earned before the storm and some without, each from
// an address of its own (127.100.0.0 and up). An optional calm phase
// (people only) comes before the storm. Everything is bounded in count and
// time and stops by itself.
//
// It runs the storm against the edge (built from this tree, or -edge),
// and, in the same run, against nginx with a per-IP limit_req (-nginx) and
// Anubis behind nginx (-anubis with -nginx), one front after the other,
// each in front of the same upstream, and prints a Markdown table per
// front: people's p50/p95 and success rate, each bot kind's share of
// requests that reached the upstream, the upstream's peak queue, and the
// front's CPU time over the storm (from /proc: nginx's master and workers,
// Anubis's process and its nginx). With -calm, also the share of people's
// requests challenged in the calm phase, and the time from the storm's
// start to the defence in force: the end of the first second in which the
// bots' share reaching the upstream fell below -threshold.
//
//	go run ./bench/storm [-edge bin/edge] [-nginx /usr/sbin/nginx] [-anubis bin/anubis] [-calm 10s] [-storm 20s]
//	go run ./bench/storm -maat-config 'challenge: {when: storm}'
//
// make storm runs it (STORMFLAGS passes flags; NGINX= and ANUBIS= the
// peers' binaries); docs/operations.md ("Storm") says what each knob does.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/maatproxy/maat/internal/testproc"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "storm:", err)
		os.Exit(1)
	}
}

// options are the command line.
type options struct {
	src, edge, nginx, anubis, curl string
	maatConfig                     string
	fronts                         string

	people      int
	passShare   float64
	think       time.Duration
	bots, addrs int
	botRate     float64
	perAddr     int
	botConc     int
	kinds       string

	slots        int
	upstreamRate float64

	calm, storm time.Duration
	timeout     time.Duration
	threshold   float64

	nginxRate, nginxBurst int
	anubisDifficulty      int
	mint                  bool
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("storm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: storm [flags]\n\nRuns a bounded storm of bots and people against the edge (and nginx, Anubis)\nin front of a slow upstream, and prints a Markdown table per front.\n\nflags:\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&o.src, "src", ".", "source tree whose ./cmd/edge is built, when -edge is not given")
	fs.StringVar(&o.edge, "edge", "", "the edge binary (\"\" = build -src's ./cmd/edge)")
	fs.StringVar(&o.nginx, "nginx", "", "nginx binary: adds nginx with a per-IP limit_req, and is Anubis's TLS front")
	fs.StringVar(&o.anubis, "anubis", "", "Anubis binary (needs -nginx): adds Anubis behind nginx")
	fs.StringVar(&o.curl, "curl", "curl", "the curl binary of the curl bots (\"none\" = no curl bots)")
	fs.StringVar(&o.maatConfig, "maat-config", "", "YAML merged over the edge's configuration, e.g. 'challenge: {when: storm}'")
	fs.StringVar(&o.fronts, "fronts", "maat,nginx,anubis", "the fronts to run, of those whose binaries are given")
	fs.IntVar(&o.people, "people", 40, "people browsing")
	fs.Float64Var(&o.passShare, "pass", 0.75, "share of people who earn a pass cookie before the measured phases")
	fs.DurationVar(&o.think, "think", time.Second, "a person's time between two pages")
	fs.IntVar(&o.bots, "bots", 300, "bots, shared evenly among -kinds")
	fs.IntVar(&o.addrs, "addrs", 2000, "the bots' addresses (each its own /24), shared evenly among -kinds")
	fs.Float64Var(&o.botRate, "rate", 400, "the bots' requests a second, all together")
	fs.IntVar(&o.perAddr, "per-addr", 10, "a bot's requests from one address (one keep-alive connection) before it moves to the next")
	fs.IntVar(&o.botConc, "bot-conc", 0, "a bot's requests in flight at most (curl bots: one, a single curl process sending one request at a time); past that it waits. 0 = never wait: as many as it sends within -timeout, so that every front is sent the same storm")
	fs.StringVar(&o.kinds, "kinds", strings.Join(kindNames[:], ","), "the bot kinds")
	fs.IntVar(&o.slots, "slots", 8, "the upstream's capacity: requests it serves at a time")
	fs.Float64Var(&o.upstreamRate, "upstream-rate", 200, "the upstream's requests a second at capacity (service time = slots/rate)")
	fs.DurationVar(&o.calm, "calm", 0, "a calm phase (people only) before the storm; 0 = none")
	fs.DurationVar(&o.storm, "storm", 20*time.Second, "the storm's length")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "a request's time limit")
	fs.Float64Var(&o.threshold, "threshold", 0.05, "the bots' share reaching the upstream in one second below which the defence is in force")
	fs.IntVar(&o.nginxRate, "nginx-rate", 5, "nginx's limit_req rate per IP, requests a second")
	fs.IntVar(&o.nginxBurst, "nginx-burst", 10, "nginx's limit_req burst")
	fs.BoolVar(&o.mint, "mint", true, "Maat: mint the people's passes with the edge's secret (false: earn them by solving the warm-up's challenge, which an edge that does not challenge a calm day never gives)")
	fs.IntVar(&o.anubisDifficulty, "anubis-difficulty", 4, "Anubis's DIFFICULTY")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	switch {
	case o.people < 0 || o.bots < 0 || o.addrs < 1 || o.perAddr < 1 || o.slots < 1 || o.botConc < 0:
		return o, errors.New("-people and -bots must be ≥ 0; -bot-conc ≥ 0; -addrs, -per-addr and -slots ≥ 1")
	case o.botRate <= 0 || o.upstreamRate <= 0:
		return o, errors.New("-rate and -upstream-rate must be > 0")
	case o.storm <= 0 || o.storm+o.calm > maxSeconds*time.Second:
		return o, fmt.Errorf("-storm must be > 0, and -calm + -storm at most %v", maxSeconds*time.Second)
	case o.passShare < 0 || o.passShare > 1:
		return o, errors.New("-pass is a share: 0 to 1")
	case o.anubis != "" && o.nginx == "":
		return o, errors.New("-anubis needs -nginx: Anubis runs behind nginx")
	case o.people > 250*150:
		return o, errors.New("-people: at most 37500")
	}
	if _, err := o.kindList(); err != nil {
		return o, err
	}
	return o, nil
}

// kindList is -kinds, less curl when there is no curl.
func (o options) kindList() ([]kind, error) {
	var out []kind
	for _, name := range strings.Split(o.kinds, ",") {
		k := kindOf(strings.TrimSpace(name))
		if k < 0 {
			return nil, fmt.Errorf("-kinds: unknown kind %q (want %s)", name, strings.Join(kindNames[:], ", "))
		}
		if k == kindCurl && o.curl == "none" {
			continue
		}
		out = append(out, k)
	}
	if len(out)*o.addrs > 0 && o.addrs/max(1, len(out)) > 256*200 {
		return nil, errors.New("-addrs: too many")
	}
	return out, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if o.curl != "none" {
		if o.curl, err = exec.LookPath(o.curl); err != nil {
			fmt.Fprintf(stderr, "no curl (%v): no curl bots\n", err)
			o.curl = "none"
		}
	}
	dir, err := os.MkdirTemp("", "maat-storm-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if o.edge == "" && strings.Contains(o.fronts, "maat") {
		o.edge = filepath.Join(dir, "edge")
		fmt.Fprintf(stderr, "building %s/cmd/edge …\n", o.src)
		cmd := exec.CommandContext(ctx, "go", "build", "-o", o.edge, "./cmd/edge")
		cmd.Dir, cmd.Stdout, cmd.Stderr = o.src, stderr, stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go build ./cmd/edge: %w", err)
		}
	}
	up, err := newUpstream(o.slots, o.upstreamRate)
	if err != nil {
		return err
	}
	defer up.close()
	load := testproc.LoadAvg()
	var results []result
	for _, name := range []string{"nginx", "anubis", "maat"} {
		if !strings.Contains(o.fronts, name) {
			continue
		}
		var f *front
		switch {
		case name == "maat":
			f, err = startMaat(ctx, o.edge, dir, up.url, o.maatConfig, o.mint)
		case name == "nginx" && o.nginx != "":
			f, err = startNginx(ctx, o.nginx, dir, strings.TrimPrefix(up.url, "http://"), o.nginxRate, o.nginxBurst, false)
		case name == "anubis" && o.anubis != "":
			f, err = startAnubis(ctx, o.anubis, o.nginx, dir, up.url, o.anubisDifficulty)
		default:
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		fmt.Fprintf(stderr, "%s: %d people, %d bots at %.0f req/s from %d addresses; upstream %d at a time, %.0f req/s; calm %v, storm %v …\n",
			f.name, o.people, o.bots, o.botRate, o.addrs, o.slots, o.upstreamRate, o.calm, o.storm)
		r, err := storm(ctx, o, f, up, stderr)
		f.stop()
		if err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
		results = append(results, r)
	}
	writeTable(stdout, o, results, load, testproc.LoadAvg())
	return nil
}

// clock says which phase the run is in.
type clock struct{ ph atomic.Int32 }

func (c *clock) phase() phase { return phase(c.ph.Load()) }
func (c *clock) set(p phase)  { c.ph.Store(int32(p)) }

// result is one front's figures.
type result struct {
	front   string
	people  *peopleTally
	bots    *botTally
	reached [numKinds]int64
	kinds   []kind
	peak    int64
	// cpuCalm, cpuStorm are the front's CPU time over each phase.
	cpuCalm, cpuStorm time.Duration
	// harnessCPU is this process's and its curl children's CPU time over
	// the storm and its last answers: on a machine of few cores, what the
	// clients cost is taken from the front.
	harnessCPU time.Duration
	// inForce is the time from the storm's start to the end of the first
	// second the bots' share reaching the upstream fell below the
	// threshold; -1 = never.
	inForce time.Duration
}

// storm runs the phases against f: the warm-up (passes earned), the calm
// (people only), the storm (people and bots).
func storm(ctx context.Context, o options, f *front, up *upstream, stderr io.Writer) (result, error) {
	up.reset()
	r := result{front: f.name, people: &peopleTally{}, bots: &botTally{}, inForce: -1}
	kinds, _ := o.kindList()
	r.kinds = kinds
	var ck clock
	people := make([]*person, o.people)
	nPass := int(float64(o.people)*o.passShare + 0.5)
	for i := range people {
		people[i] = &person{id: i, from: personAddr(i), withPass: i < nPass, jar: map[string]string{}, front: f}
	}
	// The warm-up: those with a pass earn it, a few at a time.
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for _, p := range people[:nPass] {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			p.earn(ctx, f, r.people, o.timeout)
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return r, ctx.Err()
	}
	how := "earned"
	if f.mint != nil {
		how = "hold a minted"
	}
	fmt.Fprintf(stderr, "  warm-up: %d of %d people %s pass\n", r.people.passes, nPass, how)

	// The bots, whose curl processes start now, before the measured
	// phases: starting them is not the storm's.
	var bots []*bot
	var curlStart time.Duration // the curl processes' CPU before the storm
	interval := time.Duration(float64(o.bots) / o.botRate * float64(time.Second))
	conc := o.botConc
	if conc == 0 {
		// Never waits: a bot has at most this many requests unanswered
		// (each is cut at -timeout), so it sends at its pace whatever a
		// front answers, and every front is sent the same storm. A cap
		// that a slow front reaches sends that front fewer requests.
		conc = int(o.timeout/interval) + 2
	}
	if len(kinds) > 0 && o.bots > 0 {
		perKind := o.addrs / len(kinds)
		botsOf := make([]int, len(kinds))
		for b := range o.bots {
			botsOf[b%len(kinds)]++
		}
		for b := range o.bots {
			ki := b % len(kinds)
			nth := b / len(kinds)
			bt := &bot{k: kinds[ki], interval: interval, perAddr: o.perAddr, front: f, tally: r.bots, timeout: o.timeout, curl: o.curl, conc: conc}
			for j := nth; j < perKind; j += botsOf[ki] {
				bt.addrs = append(bt.addrs, botAddr(bt.k, j, perKind))
			}
			if len(bt.addrs) == 0 {
				bt.addrs = append(bt.addrs, botAddr(bt.k, nth%max(1, perKind), perKind))
			}
			if bt.k == kindCurl {
				if err := bt.startCurl(); err != nil {
					for _, bt := range bots {
						bt.abandonCurl()
					}
					return r, fmt.Errorf("starting curl: %w", err)
				}
			}
			bots = append(bots, bt)
		}
		// Their start-up (loading curl and its libraries) done, too, and
		// its CPU time kept, not to count it as the storm's.
		for _, bt := range bots {
			if bt.proc != nil {
				waitReading(bt.proc.cmd.Process.Pid, 10*time.Second)
				c, _ := testproc.CPUOf(bt.proc.cmd.Process.Pid) // 0 where /proc does not tell
				curlStart += c
			}
		}
	}

	run, stop := context.WithCancel(ctx)
	defer stop()
	ck.set(phaseCalm)
	cpu0 := f.cpu()
	for i, p := range people {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Spread the first pages over one think time.
			if !sleepUntil(run, time.Now().Add(o.think*time.Duration(i)/time.Duration(max(1, len(people))))) {
				return
			}
			for run.Err() == nil {
				p.visit(run, f, &ck, r.people, o.timeout)
				if !sleepUntil(run, time.Now().Add(o.think)) {
					break
				}
			}
			if p.conn != nil {
				p.conn.close()
			}
		}()
	}
	if o.calm > 0 && !sleepUntil(ctx, time.Now().Add(o.calm)) {
		stop()
		wg.Wait()
		for _, bt := range bots {
			bt.abandonCurl()
		}
		return r, ctx.Err()
	}
	cpu1 := f.cpu()
	self1 := selfCPU()
	// The storm.
	ck.set(phaseStorm)
	up.peakQueue.Store(up.queue.Load())
	start := time.Now()
	r.bots.start = start
	var bwg sync.WaitGroup
	for b, bt := range bots {
		bt.until = start.Add(o.storm)
		bwg.Add(1)
		go func() {
			defer bwg.Done()
			// Spread the bots' first requests over one interval.
			if sleepUntil(run, start.Add(interval*time.Duration(b)/time.Duration(o.bots))) {
				bt.run(run, b)
			}
			bt.abandonCurl()
		}()
	}
	sleepUntil(ctx, start.Add(o.storm))
	cpu2 := f.cpu()
	stop()
	bwg.Wait()
	// Once every curl process has ended and been waited for (its CPU is
	// the children's then), less their start-up before the storm; with
	// the bots' last answers after the storm's end.
	r.harnessCPU = selfCPU() - self1 - curlStart
	wg.Wait()
	// Read once every bot has stopped: a request counts on both sides.
	for k := range numKinds {
		r.reached[k] = up.bots[k].Load()
	}
	r.peak = up.peakQueue.Load()
	r.cpuCalm, r.cpuStorm = cpu1-cpu0, cpu2-cpu1
	r.inForce = inForce(r.bots, up, int(o.storm/time.Second), o.threshold, stderr)
	return r, ctx.Err()
}

// inForce is the time from the storm's start to the end of the first
// second from which on the bots' share reaching the upstream stays below
// threshold (by the second each request was sent in, both sides); the
// storm's last second, which its end cuts, is not judged. -1 = never.
func inForce(bots *botTally, up *upstream, seconds int, threshold float64, stderr io.Writer) time.Duration {
	found := -1
	for i := range max(0, seconds-1) {
		sent, got := bots.sentPerSecond[i].Load(), up.perSecond[i].Load()
		if os.Getenv("STORM_DEBUG") != "" {
			fmt.Fprintf(stderr, "  second %d: bots sent %d, reached %d\n", i, sent, got)
		}
		below := sent == 0 || float64(got) < threshold*float64(sent)
		switch {
		case below && found < 0:
			found = i
		case !below:
			found = -1
		}
	}
	if found < 0 {
		return -1
	}
	return time.Duration(found+1) * time.Second
}

package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"regexp"
	"strconv"
	"time"

	"github.com/maatproxy/maat/internal/testproc"
)

// sample is one measured run against one front.
type sample struct {
	requests int64         // answered with 2xx
	failed   int64         // any other outcome
	firstErr error         // the first failure, when there were some
	elapsed  time.Duration // as the load tool measured it
	cpu      time.Duration // the front's CPU time over the run
}

func (s sample) rate() float64 { return float64(s.requests) / s.elapsed.Seconds() }

// cpuPer is the front's CPU time per request (or connection), in µs.
func (s sample) cpuPer() float64 {
	if s.requests == 0 {
		return 0
	}
	return float64(s.cpu.Microseconds()) / float64(s.requests)
}

// measure runs load against f and adds the front's CPU time over it.
func measure(f *front, load func() (sample, error)) (sample, error) {
	pids := f.pids()
	before, err := testproc.CPUTotal(pids)
	if err != nil {
		return sample{}, err
	}
	s, err := load()
	if err != nil {
		return sample{}, fmt.Errorf("%s: %w", f.name, err)
	}
	after, err := testproc.CPUTotal(pids)
	if err != nil {
		return sample{}, err
	}
	s.cpu = after - before
	return s, nil
}

// wrk runs HTTP/1.1 keep-alive load: 2 threads, 32 connections.
func runWrk(ctx context.Context, addr string, d time.Duration) (sample, error) {
	out, err := exec.CommandContext(ctx, "wrk", "-t2", "-c32", "-d", fmt.Sprintf("%ds", int(d.Seconds())),
		"-H", "Host: localhost", "-H", "User-Agent: "+userAgent, "https://"+addr+"/").CombinedOutput()
	if err != nil {
		return sample{}, fmt.Errorf("wrk: %w\n%s", err, out)
	}
	return parseWrk(out)
}

var (
	wrkTotal  = regexp.MustCompile(`(?m)^\s*(\d+) requests in ([0-9.]+)(us|ms|s|m),`)
	wrkNon2xx = regexp.MustCompile(`(?m)^\s*Non-2xx or 3xx responses: (\d+)`)
	wrkErrors = regexp.MustCompile(`(?m)^\s*Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)`)
)

var errOutput = errors.New("peers: load tool output not understood")

// parseWrk reads wrk's summary: requests and time, minus non-2xx and
// failed ones.
func parseWrk(out []byte) (sample, error) {
	m := wrkTotal.FindSubmatch(out)
	if m == nil {
		return sample{}, fmt.Errorf("%w: %s", errOutput, out)
	}
	n, _ := strconv.ParseInt(string(m[1]), 10, 64)
	v, _ := strconv.ParseFloat(string(m[2]), 64)
	unit := map[string]time.Duration{"us": time.Microsecond, "ms": time.Millisecond, "s": time.Second, "m": time.Minute}[string(m[3])]
	s := sample{requests: n, elapsed: time.Duration(math.Round(v * float64(unit)))}
	if m := wrkNon2xx.FindSubmatch(out); m != nil {
		bad, _ := strconv.ParseInt(string(m[1]), 10, 64)
		s.requests -= bad
		s.failed += bad
	}
	if m := wrkErrors.FindSubmatch(out); m != nil {
		for _, g := range m[1:] {
			e, _ := strconv.ParseInt(string(g), 10, 64)
			s.failed += e
		}
	}
	return s, nil
}

// runH2load runs HTTP/2 load: 16 connections, 10 streams each.
func runH2load(ctx context.Context, addr string, d time.Duration) (sample, error) {
	out, err := exec.CommandContext(ctx, "h2load", "-c16", "-m10", "-t1", "-D", fmt.Sprint(int(d.Seconds())),
		"-H", ":authority: localhost", "-H", "user-agent: "+userAgent, "https://"+addr+"/").CombinedOutput()
	if err != nil {
		return sample{}, fmt.Errorf("h2load: %w\n%s", err, out)
	}
	return parseH2load(out)
}

var (
	h2Finished = regexp.MustCompile(`(?m)^finished in ([0-9.]+)(us|ms|s),`)
	h2Requests = regexp.MustCompile(`(?m)^requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout`)
	h2Status   = regexp.MustCompile(`(?m)^status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx`)
	h2Protocol = regexp.MustCompile(`(?m)^Application protocol: (\S+)`)
)

// parseH2load reads h2load's summary: 2xx answers and the time taken.
func parseH2load(out []byte) (sample, error) {
	f, r, st := h2Finished.FindSubmatch(out), h2Requests.FindSubmatch(out), h2Status.FindSubmatch(out)
	if f == nil || r == nil || st == nil {
		return sample{}, fmt.Errorf("%w: %s", errOutput, out)
	}
	if p := h2Protocol.FindSubmatch(out); p == nil || string(p[1]) != "h2" {
		return sample{}, fmt.Errorf("%w: not HTTP/2: %s", errOutput, out)
	}
	v, _ := strconv.ParseFloat(string(f[1]), 64)
	unit := map[string]time.Duration{"us": time.Microsecond, "ms": time.Millisecond, "s": time.Second}[string(f[2])]
	// Requests still in flight when the time is up count as failed and
	// errored in h2load's summary; they are not failures of the front.
	// Answers other than 2xx are.
	s := sample{elapsed: time.Duration(math.Round(v * float64(unit)))}
	s.requests, _ = strconv.ParseInt(string(st[1]), 10, 64)
	for _, g := range st[2:] {
		n, _ := strconv.ParseInt(string(g), 10, 64)
		s.failed += n
	}
	return s, nil
}

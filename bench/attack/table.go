package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// environment says what was attacked, on what, and how loaded the box was.
type environment struct {
	edge                  string
	extra                 string
	cpus                  int
	goVersion             string
	loadBefore, loadAfter string
	start                 time.Time
}

func describe(o options, bin string) environment {
	env := environment{edge: bin, extra: o.extra, cpus: runtime.NumCPU(), goVersion: runtime.Version(),
		loadBefore: loadAverage(), start: time.Now()}
	if o.bin == "" {
		env.edge = o.src + "/cmd/edge"
		if out, err := exec.Command("git", "-C", o.src, "describe", "--always", "--dirty").Output(); err == nil {
			env.edge += " at " + strings.TrimSpace(string(out))
		}
	}
	return env
}

// loadAverage is the first three fields of /proc/loadavg.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func writeTable(w io.Writer, env environment, rows []row) {
	fmt.Fprintf(w, "Edge: %s. Limits: ", env.edge)
	if env.extra == "" {
		fmt.Fprint(w, "the edge's defaults.")
	} else {
		fmt.Fprintf(w, "the edge's defaults and `%s`.", env.extra)
	}
	fmt.Fprintf(w, "\nBox: %d CPUs, %s; load average %s before, %s after; %s, %v.\n\n",
		env.cpus, env.goVersion, env.loadBefore, env.loadAfter, env.start.UTC().Format("2006-01-02 15:04 UTC"),
		time.Since(env.start).Round(time.Second))
	fmt.Fprintln(w, "| attack | upstream conns max / end / after | requests upstream | edge goroutines base / peak / after | edge RSS MiB base / peak / after | edge CPU (cores) | honest p50 / p99 (n, failed) | bounds fired (edge metrics) | attackers were answered | notes |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %d / %d / %d | %d | %d / %d / %d | %s / %s / %s | %.2f | %s | %s | %s | %s |\n",
			r.title, r.upMax, r.upEnd, r.upAfter, r.upRequests, r.gBase, r.gPeak, r.gAfter,
			mib(r.rssBase), mib(r.rssPeak), mib(r.rssAfter), r.cpu, r.honest, cell(r.fired), cell(r.answers),
			cell(strings.Join(append([]string{fmt.Sprintf("attack %v, settled %v after", r.took.Round(100*time.Millisecond), r.settled.Round(100*time.Millisecond))}, r.notes...), "; ")))
	}
}

func mib(b int64) string { return fmt.Sprintf("%.0f", float64(b)/(1<<20)) }

// cell escapes a table cell.
func cell(s string) string {
	if s == "" {
		return "—"
	}
	return strings.ReplaceAll(s, "|", `\|`)
}

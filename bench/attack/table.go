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

// writeGateTable writes the gate cases' table: a row per try, the case's
// title on its first row; then the totals.
func writeGateTable(w io.Writer, env environment, cases []gateCase) {
	fmt.Fprintf(w, "Gate (issue 33). Edge: %s.\nBox: %d CPUs, %s; %s.\n\n", env.edge, env.cpus, env.goVersion,
		env.start.UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintln(w, "| case | try | protocols | tries | got through | honest refused | answers | expected | notes |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	var bad, tries, refused, honest int
	for _, c := range cases {
		title := c.title
		for _, r := range c.rows {
			n := r.Counts()
			through, wrong := n.Verdict(), "—"
			if r.Honest {
				through, wrong = "—", n.Verdict()
				refused, honest = refused+n.Bad, honest+n.Tries
			} else {
				bad, tries = bad+n.Bad, tries+n.Tries
			}
			fmt.Fprintf(w, "| %s | %s | %s | %d | %s | %s | %s | %s | %s |\n", strings.ReplaceAll(title, "|", `\|`), cell(r.Try),
				cell(strings.Join(n.Protos, ", ")), n.Tries, through, wrong, cell(n.Answers), cell(r.Expected),
				cell(strings.Join(n.Notes, "; ")))
			title = ""
		}
		if c.err != nil {
			fmt.Fprintf(w, "| %s | the case stopped | — | — | — | — | — | — | %s |\n", strings.ReplaceAll(title, "|", `\|`), cell(c.err.Error()))
		}
	}
	fmt.Fprintf(w, "\nGot through: %d of %d attack tries. Honest tries refused: %d of %d.\n", bad, tries, refused, honest)
}

package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"
)

// writeTable prints the run's figures as Markdown.
func writeTable(w io.Writer, o options, rs []result, loadBefore, loadAfter string) {
	host, _ := os.Hostname()
	fmt.Fprintf(w, "Storm (bench/storm) on %s, %d cores, load average %s before, %s after.\n", host, runtime.NumCPU(), loadBefore, loadAfter)
	fmt.Fprintf(w, "%d people (%d%% with a pass), a page every %v; %d bots, %.0f req/s from %d addresses (%d requests per address and connection); "+
		"upstream: %d at a time, %.0f req/s; calm %v, storm %v.\n\n",
		o.people, int(o.passShare*100+0.5), o.think, o.bots, o.botRate, o.addrs, o.perAddr, o.slots, o.upstreamRate, o.calm, o.storm)
	fmt.Fprintln(w, "| front | people with a pass: p50 / p95, success | people without: p95, success, challenged | bot requests reaching the upstream | upstream peak queue | front CPU (storm) | front CPU per request |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, r := range rs {
		with, without := r.people.s[phaseStorm][1], r.people.s[phaseStorm][0]
		var sent, reached int64
		for _, k := range r.kinds {
			sent += r.bots.sent[k].Load()
			reached += r.reached[k]
		}
		// Per request sent in the storm, bots' and people's (their
		// challenges' pages and solutions included).
		all := sent + int64(with.requests+without.requests+with.challenged+without.challenged)
		perReq := "—"
		if all > 0 {
			perReq = fmt.Sprintf("%.0f µs", float64(r.cpuStorm.Microseconds())/float64(all))
		}
		fmt.Fprintf(w, "| %s | %s / %s, %s | %s, %s, %s | %s | %d | %.1f s | %s |\n", r.front,
			ms(percentile(with.latencies, 50)), ms(percentile(with.latencies, 95)), pct(with.ok, with.requests),
			ms(percentile(without.latencies, 95)), pct(without.ok, without.requests), pct(without.challenged, without.requests),
			pct64(reached, sent), r.peak, r.cpuStorm.Seconds(), perReq)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Each bot kind's share of requests reaching the upstream (of those it sent):\n\n| front |")
	for _, k := range rs[0].kinds {
		fmt.Fprintf(w, " %s |", kindTitles[k])
	}
	fmt.Fprintf(w, "\n|---|%s\n", strings.Repeat("---|", len(rs[0].kinds)))
	for _, r := range rs {
		fmt.Fprintf(w, "| %s |", r.front)
		for _, k := range r.kinds {
			fmt.Fprintf(w, " %s of %d |", pct64(r.reached[k], r.bots.sent[k].Load()), r.bots.sent[k].Load())
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "\nWhat the bots were answered (2xx / refused, 3xx–5xx / no answer in -timeout; of them cut by the run's end):\n\n| front |")
	for _, k := range rs[0].kinds {
		fmt.Fprintf(w, " %s |", k)
	}
	fmt.Fprintf(w, "\n|---|%s\n", strings.Repeat("---|", len(rs[0].kinds)))
	for _, r := range rs {
		fmt.Fprintf(w, "| %s |", r.front)
		for _, k := range r.kinds {
			fmt.Fprintf(w, " %d / %d / %d; %d |", r.bots.ok[k].Load(), r.bots.refused[k].Load(), r.bots.failed[k].Load(), r.bots.cut[k].Load())
		}
		fmt.Fprintln(w)
	}
	if o.calm > 0 {
		fmt.Fprintf(w, "\nCalm (%v, people only), then the storm:\n\n", o.calm)
		fmt.Fprintln(w, "| front | people's requests challenged in the calm | people's p95 in the calm | front CPU (calm) | defence in force (bots' share < "+
			fmt.Sprintf("%.0f%%", o.threshold*100)+") |")
		fmt.Fprintln(w, "|---|---|---|---|---|")
		for _, r := range rs {
			a, b := r.people.s[phaseCalm][0], r.people.s[phaseCalm][1]
			lat := append(append([]time.Duration(nil), a.latencies...), b.latencies...)
			force := "never"
			if r.inForce >= 0 {
				force = fmt.Sprintf("%v after the storm began", r.inForce)
			}
			fmt.Fprintf(w, "| %s | %s | %s | %.1f s | %s |\n", r.front, pct(a.challenged+b.challenged, a.requests+b.requests),
				ms(percentile(lat, 95)), r.cpuCalm.Seconds(), force)
		}
	}
	fmt.Fprintf(w, "\nThe harness's own CPU over the storm (clients, upstream, curl processes):")
	for _, r := range rs {
		fmt.Fprintf(w, " %s %.1f s;", r.front, r.harnessCPU.Seconds())
	}
	fmt.Fprintln(w)
	for _, r := range rs {
		if len(r.people.earnErrs) > 0 {
			fmt.Fprintf(w, "\n%s: passes not earned: %s\n", r.front, strings.Join(r.people.earnErrs, "; "))
		}
	}
}

func ms(d time.Duration) string { return fmt.Sprintf("%d ms", d.Milliseconds()) }

func pct(a, b int) string { return pct64(int64(a), int64(b)) }

func pct64(a, b int64) string {
	if b == 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(a)/float64(b))
}

package main

import (
	"fmt"
	"io"
	"runtime"
	"slices"
)

func numCPU() int { return runtime.NumCPU() }

// stats are the median, minimum and maximum of some figures.
type stats struct{ med, min, max float64 }

func summarize(xs []float64) stats {
	if len(xs) == 0 {
		return stats{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return stats{med: med, min: s[0], max: s[len(s)-1]}
}

func (s stats) String() string {
	return fmt.Sprintf("%8.0f [%.0f–%.0f]", s.med, s.min, s.max)
}

// printTable prints rate and CPU per unit for each front, then the edge's
// ratios to the others.
func printTable(out io.Writer, fronts []*front, results map[string][]sample, rateName, cpuName string) {
	fmt.Fprintf(out, "%-8s %-26s %-22s %s\n", "front", rateName, cpuName, "failed")
	rate, cpu := map[string]stats{}, map[string]stats{}
	for _, f := range fronts {
		var rs, cs []float64
		var failed int64
		var firstErr error
		for _, s := range results[f.name] {
			rs = append(rs, s.rate())
			cs = append(cs, s.cpuPer())
			failed += s.failed
			if firstErr == nil {
				firstErr = s.firstErr
			}
		}
		rate[f.name], cpu[f.name] = summarize(rs), summarize(cs)
		fmt.Fprintf(out, "%-8s %-26s %-22s %d", f.name, rate[f.name], cpu[f.name], failed)
		if firstErr != nil {
			fmt.Fprintf(out, " (first: %v)", firstErr)
		}
		fmt.Fprintln(out)
	}
	e, ok := rate["edge"]
	if !ok {
		return
	}
	for _, peer := range []string{"caddy", "nginx", "gofloor", "edge0", "edge-nopark", "edge-adaptive"} {
		p, ok := rate[peer]
		if !ok || p.med == 0 || cpu[peer].med == 0 {
			continue
		}
		fmt.Fprintf(out, "edge/%-11s %s %.2f×, CPU per unit %.2f×\n", peer, rateName, e.med/p.med, cpu["edge"].med/cpu[peer].med)
	}
}

package edge

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// seriesNames lists the names of every series m can expose: the families
// its registry gathers now, and those of its vectors not touched yet
// (described), with a histogram's _bucket, _sum and _count.
func seriesNames(t *testing.T, m *metrics) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	add := func(name, typ string) {
		names[name] = true
		if typ == "HISTOGRAM" || typ == "SUMMARY" {
			names[name+"_sum"], names[name+"_count"] = true, true
			if typ == "HISTOGRAM" {
				names[name+"_bucket"] = true
			}
		}
	}
	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		add(f.GetName(), f.GetType().String())
	}
	// The registry describes every series it holds, touched or not; the
	// metrics' histogram fields say which of them are histograms.
	hist := map[string]bool{}
	v := reflect.ValueOf(m).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		f = reflect.NewAt(f.Type(), f.Addr().UnsafePointer()).Elem()
		switch c := f.Interface().(type) {
		case prometheus.Histogram:
			for _, n := range describe(c) {
				hist[n] = true
			}
		case *prometheus.HistogramVec:
			for _, n := range describe(c) {
				hist[n] = true
			}
		}
	}
	for _, n := range describe(m.reg) {
		typ := "COUNTER"
		if hist[n] {
			typ = "HISTOGRAM"
		}
		add(n, typ)
	}
	return names
}

// TestGrafanaDashboardSeries: every series dist/grafana/maat.json queries
// is one the edge exposes, and its panels use the data source variable.
func TestGrafanaDashboardSeries(t *testing.T) {
	t.Parallel()
	fp := filepath.Join(t.TempDir(), "fp.jsonl")
	e := startEdge(t, "log: {fingerprints: "+fp+"}\nsites: [{hosts: [localhost], upstream: 'http://127.0.0.1:1'}]\n")
	names := seriesNames(t, e.metrics)
	if !names["maat_requests_total"] || !names["maat_upstream_duration_seconds_bucket"] || !names["go_goroutines"] {
		t.Fatalf("the registry's names lack the edge's own: %v", slices.Sorted(maps.Keys(names)))
	}

	raw, err := os.ReadFile(filepath.Join("..", "dist", "grafana", "maat.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title      string            `json:"title"`
		UID        string            `json:"uid"`
		Panels     []json.RawMessage `json:"panels"`
		Templating struct {
			List []struct {
				Name, Type string
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("maat.json: %v", err)
	}
	if dash.Title == "" || dash.UID == "" || len(dash.Panels) < 6 {
		t.Fatalf("maat.json: title %q, uid %q, %d panels", dash.Title, dash.UID, len(dash.Panels))
	}
	if !slices.ContainsFunc(dash.Templating.List, func(v struct{ Name, Type string }) bool { return v.Name == "datasource" && v.Type == "datasource" }) {
		t.Error("maat.json has no datasource variable: the dashboard would not import on another Grafana")
	}

	// Every expression's series, wherever it stands (panels in rows too).
	var exprs []string
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && (k == "expr" || k == "query") {
					exprs = append(exprs, s)
				}
				if k == "datasource" {
					if ds, ok := x.(map[string]any); ok && ds["uid"] != "${datasource}" {
						t.Errorf("maat.json: a datasource is %v, not ${datasource}", ds["uid"])
					}
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	var all any
	_ = json.Unmarshal(raw, &all)
	walk(all)
	if len(exprs) < 8 {
		t.Fatalf("maat.json has %d queries", len(exprs))
	}
	series := regexp.MustCompile(`\b(?:maat|go|process)_[a-z0-9_]+\b`)
	used := map[string]bool{}
	for _, x := range exprs {
		for _, name := range series.FindAllString(x, -1) {
			used[name] = true
			if !names[name] {
				t.Errorf("maat.json queries %s, which the edge does not expose (in %s)", name, x)
			}
		}
	}
	for _, want := range []string{"maat_requests_total", "maat_challenges_total", "maat_upstream_duration_seconds_bucket"} {
		if !used[want] {
			t.Errorf("maat.json does not query %s", want)
		}
	}
	t.Logf("maat.json: %d queries over %d series", len(exprs), len(used))
}

// describe returns the names of the series c describes.
func describe(c prometheus.Collector) []string {
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	var out []string
	for d := range ch {
		if sm := fq.FindStringSubmatch(d.String()); sm != nil {
			out = append(out, sm[1])
		}
	}
	return out
}

package testattack

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metrics are the counters and gauges an edge exports on its admin
// /metrics (histograms and summaries are left out).
type Metrics struct{ series map[string]series }

type series struct {
	name   string
	labels map[string]string
	value  float64
}

// Scrape reads the metrics at url.
func Scrape(ctx context.Context, url string) (Metrics, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return Metrics{}, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return Metrics{}, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return Metrics{}, fmt.Errorf("testattack: %s: %s", url, res.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(res.Body)
	if err != nil {
		return Metrics{}, err
	}
	m := Metrics{series: map[string]series{}}
	for name, f := range fams {
		for _, mt := range f.GetMetric() {
			var v float64
			switch {
			case mt.Counter != nil:
				v = mt.GetCounter().GetValue()
			case mt.Gauge != nil:
				v = mt.GetGauge().GetValue()
			case mt.Untyped != nil:
				v = mt.GetUntyped().GetValue()
			default:
				continue
			}
			s := series{name: name, labels: map[string]string{}, value: v}
			keys := []string{}
			for _, l := range mt.GetLabel() {
				s.labels[l.GetName()] = l.GetValue()
				keys = append(keys, l.GetName()+"="+l.GetValue())
			}
			slices.Sort(keys)
			m.series[name+"{"+strings.Join(keys, ",")+"}"] = s
		}
	}
	return m, nil
}

// Value is the sum of the series named name whose labels include every
// label=value pair of match.
func (m Metrics) Value(name string, match ...string) float64 {
	v := 0.0
	for _, s := range m.series {
		if s.name == name && s.matches(match) {
			v += s.value
		}
	}
	return v
}

func (s series) matches(match []string) bool {
	for i := 0; i+1 < len(match); i += 2 {
		if s.labels[match[i]] != match[i+1] {
			return false
		}
	}
	return true
}

// Fired tallies the bounds that fired between before and m: requests and
// connections refused by a limit (maat_limited_total, by limit), requests
// blamed on the client (maat_client_errors_total, by reason), upstream
// failures (maat_upstream_errors_total, by reason) and QUIC handshakes
// that did not finish (maat_tls_handshakes_total).
func (m Metrics) Fired(before Metrics) *Tally {
	t := &Tally{}
	for k, s := range m.series {
		d := int(s.value - before.series[k].value)
		if d <= 0 {
			continue
		}
		switch s.name {
		case "maat_limited_total":
			t.Add(s.labels["limit"], d)
		case "maat_client_errors_total":
			t.Add("client "+s.labels["reason"], d)
		case "maat_upstream_errors_total":
			t.Add(s.labels["reason"], d)
		case "maat_tls_handshakes_total":
			if s.labels["transport"] == "quic" && s.labels["result"] != "ok" { // ok: the honest client's
				t.Add("quic handshake "+s.labels["result"], d)
			}
		}
	}
	return t
}

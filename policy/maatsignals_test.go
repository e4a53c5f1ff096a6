package policy

import (
	"os"
	"strings"
	"testing"
)

// TestMaatSignalsInForce: Maat's own signals add weight only under a
// policy that says so with a signals: section, its own or an imported
// one's: Maat's default policy, or the one line (builtin)/maat-signals.yaml
// that an Anubis policy adds. An Anubis policy without it decides as in
// Anubis; rules that name a signal still see it fire.
func TestMaatSignalsInForce(t *testing.T) {
	t.Parallel()
	// A Chrome User-Agent on curl's TLS stack, over HTTP/1.1, without
	// Accept-Language: ua_tls_mismatch, browser_headers_missing and
	// proto_mismatch fire.
	liar := func() *Request {
		r := chromeRequest()
		r.ClientFamily, r.Proto, r.HeaderOrder, r.H2FP = "curl", "HTTP/1.1", nil, ""
		r.Header.Del("Accept-Language")
		return r
	}
	const anubis = "bots:\n  - {name: browsers, user_agent_regex: Mozilla, action: WEIGH, weight: {adjust: 10}}\n" +
		"thresholds:\n  - {name: low, expression: weight < 20, action: ALLOW}\n  - {name: high, expression: weight >= 20, action: DENY}\n"
	tests := []struct {
		name   string
		src    string
		on     bool
		why    string
		weight int
		action Action
	}{
		{"anubis policy", anubis, false, "no signals: section; `- import: (builtin)/maat-signals.yaml` under bots: switches them on", 10, ALLOW},
		{"one import line", strings.Replace(anubis, "bots:\n", "bots:\n  - import: (builtin)/maat-signals.yaml\n", 1), true, "signals: at (builtin)/maat-signals.yaml:", 10 + 30 + 10 + 10, DENY},
		{"own signals section", anubis + "signals: {proto_mismatch: off}\n", true, "signals: at p.yaml:6", 10 + 30 + 10, DENY},
		{"signal matcher without weights", strings.Replace(anubis, "bots:\n", "bots:\n  - {name: liar, signal: ua_tls_mismatch, action: DENY}\n", 1), false, "no signals: section", 0, DENY},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := Parse("p.yaml", []byte(tt.src), Options{})
			if err != nil {
				t.Fatal(err)
			}
			on, why := p.MaatSignals()
			if on != tt.on || !strings.Contains(why, tt.why) {
				t.Errorf("MaatSignals() = %v, %q; want %v, …%q…", on, why, tt.on, tt.why)
			}
			r := liar()
			d := p.Evaluate(r)
			if d.Weight != tt.weight || d.Action != tt.action {
				t.Errorf("weight %d %s, want %d %s\n%s", d.Weight, d.Action, tt.weight, tt.action, p.Explain(r))
			}
			if !d.Signals.Has(SignalUATLSMismatch) {
				t.Errorf("signals %v: ua_tls_mismatch did not fire", d.Signals)
			}
		})
	}
	def := mustDefault(t)
	if on, why := def.MaatSignals(); !on || !strings.Contains(why, DefaultName) {
		t.Errorf("default policy: MaatSignals() = %v, %q", on, why)
	}
}

// TestMaatSignalsWeights: (builtin)/maat-signals.yaml, the default
// policy and defaultSignalWeights give each signal the same weight.
func TestMaatSignalsWeights(t *testing.T) {
	t.Parallel()
	p, err := Parse("p.yaml", []byte("bots:\n  - import: (builtin)/maat-signals.yaml\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p.weights != defaultSignalWeights || p.off != 0 || len(p.Rules()) != 0 {
		t.Errorf("maat-signals.yaml: weights %v off %b rules %d, want %v", p.weights, p.off, len(p.Rules()), defaultSignalWeights)
	}
	if def := mustDefault(t); def.weights != defaultSignalWeights {
		t.Errorf("default policy weights %v, want %v", def.weights, defaultSignalWeights)
	}
	doc, err := os.ReadFile("lists/maat-signals.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for s := range numSignals {
		if !strings.Contains(string(doc), "\n  "+s.String()+": ") {
			t.Errorf("maat-signals.yaml does not name %s", s)
		}
	}
}

package policy

import (
	"math"
	"testing"
)

func TestWaitMaxWeight(t *testing.T) {
	t.Parallel()
	const bots = "bots: [{name: x, path_regex: ^/x$, action: DENY}]\n"
	tests := []struct {
		name   string
		policy string
		want   int
	}{
		{"default", "", 20},
		{"Anubis's thresholds example", "file:testdata/anubis/good/thresholds.yaml", 10},
		{"legacy: every weight above zero", bots, math.MaxInt},
		{"min and max", bots + "thresholds: [{name: a, max: 1, action: ALLOW}, {name: c, min: 1, max: 35, action: CHALLENGE, challenge: {bits: 16}}, {name: d, min: 35, action: DENY}]", 35},
		{"the lowest band, not the first listed", bots + "thresholds: [{name: hi, expression: weight >= 50, action: CHALLENGE, challenge: {bits: 16}}, {name: lo, expression: weight > 0 && weight < 15, action: CHALLENGE, challenge: {bits: 16}}, {name: ok, expression: 'true', action: ALLOW}]", 15},
		{"a challenge band ended by a divert", bots + "thresholds: [{name: ok, expression: weight <= 0, action: ALLOW}, {name: c, expression: weight < 80, action: CHALLENGE, challenge: {bits: 16}}, {name: tarpit, expression: 'true', action: DIVERT, divert_to: tarpit}]", 80},
		{"no challenge threshold", bots + "thresholds: [{name: ok, expression: weight < 10, action: ALLOW}, {name: no, expression: 'true', action: DENY}]", 0},
		{"a CEL threshold", bots + "thresholds: [{name: ok, expression: weight <= 0, action: ALLOW}, {name: c, expression: 'int(string(weight)) < 25', action: CHALLENGE, challenge: {bits: 16}}, {name: no, expression: 'true', action: DENY}]", 25},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var p *Policy
			switch {
			case tt.policy == "":
				p = mustDefault(t)
			case tt.policy[:5] == "file:":
				var err error
				if p, err = Load(tt.policy[5:], Options{}); err != nil {
					t.Fatal(err)
				}
			default:
				p = mustParse(t, tt.policy)
			}
			if got := p.WaitMaxWeight(); got != tt.want {
				t.Errorf("WaitMaxWeight = %d, want %d", got, tt.want)
			}
		})
	}
}

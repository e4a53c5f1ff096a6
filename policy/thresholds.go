package policy

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"cel.dev/cel-go/cel"
)

// Thresholds map the total weight of a request to an action when no rule
// decided. Threshold expressions that only compare weight with constants
// (the usual case) are reduced to weightPred and evaluated without CEL.

type threshold struct {
	name, id, src string
	pred          *weightPred // nil: use prg
	prg           cel.Program
	action        Action
	challenge     Challenge
	divertTo      string
}

func (p *Policy) compileThreshold(ft *fileThreshold, env *cel.Env) (threshold, error) {
	t := threshold{name: ft.Name, src: ft.src, id: hashJSON(ft)}
	var errs []error
	if ft.Name == "" {
		errs = append(errs, errors.New("name: is required"))
	}
	a, ok := parseAction(ft.Action)
	if !ok || a == WEIGH || a == RATE {
		errs = append(errs, fmt.Errorf("action %q: want ALLOW, DENY, CHALLENGE or DIVERT", ft.Action))
	} else if err := setDivert(&t.divertTo, a, ft.DivertTo); err != nil {
		errs = append(errs, err)
	}
	t.action = a
	switch {
	case a == CHALLENGE && ft.Challenge == nil:
		errs = append(errs, errors.New("action CHALLENGE needs challenge: {algorithm, difficulty}, as in Anubis"))
	case ft.Challenge != nil: // checked on any action, as Anubis checks it
		c, err := p.challenge(ft.Challenge, ft.src)
		if err != nil {
			errs = append(errs, err)
		}
		if a == CHALLENGE {
			t.challenge = c
		}
	}
	switch {
	case ft.Expression != nil && (ft.Min != nil || ft.Max != nil):
		errs = append(errs, errors.New("set expression or min/max, not both"))
	case ft.Expression != nil:
		src, err := ft.Expression.source()
		if err != nil {
			errs = append(errs, err)
			break
		}
		a, prg, err := compileBoolAST(env, src)
		if err != nil {
			errs = append(errs, err)
			break
		}
		facts, err := checkLoadRefs(a)
		if err != nil {
			errs = append(errs, err)
			break
		}
		if facts.pressure {
			p.usesPressure = append(p.usesPressure, fmt.Sprintf("%s: threshold %q", ft.src, ft.Name))
		}
		p.readsLoad = p.readsLoad || facts.load
		if pred, ok := reduceWeight(a.NativeRep().Expr()); ok {
			t.pred = pred
		} else {
			t.prg = prg
		}
	case ft.Min == nil && ft.Max == nil:
		errs = append(errs, errors.New("expression: is required (or min:/max:)"))
	default:
		t.pred = &weightPred{op: "true"}
		if ft.Min != nil {
			t.pred = &weightPred{op: "_>=_", k: int64(*ft.Min)}
		}
		if ft.Max != nil {
			lt := &weightPred{op: "_<_", k: int64(*ft.Max)}
			t.pred = &weightPred{op: "_&&_", l: t.pred, r: lt}
		}
	}
	return t, errors.Join(errs...)
}

// match reports whether the threshold decides weight w for r (whose
// Storm, Pressure, Upstream and Load a threshold may read).
func (t *threshold) match(w int, r *Request) bool {
	if t.pred != nil {
		return t.pred.eval(int64(w), r.Storm)
	}
	return evalBool(t.prg, &activation{r: r, weight: int64(w)})
}

// The site's states WaitMaxWeightFor distinguishes: calm (a zero Request:
// pressure 0, storm off) and storm (storm on, pressure 1, the upstream's
// slots full).
var (
	calmRequest  = Request{}
	stormRequest = Request{Storm: true, Pressure: 1, Upstream: UpstreamLoad{InUse: 1, Capacity: 1}}
)

// waitMaxWeight computes WaitMaxWeight for the site's state r: the first
// weight above the start of the lowest band of weights that a CHALLENGE
// threshold decides at which another threshold (or none) decides.
func waitMaxWeight(ts []threshold, r *Request) int {
	decider := func(w int) int {
		for i := range ts {
			if ts[i].match(w, r) {
				return i
			}
		}
		return -1
	}
	band := -1
	for _, w := range weightPoints(ts) {
		d := decider(w)
		switch {
		case band < 0 && d >= 0 && ts[d].action == CHALLENGE:
			band = d
		case band >= 0 && d != band:
			return w
		}
	}
	if band < 0 {
		return 0
	}
	return math.MaxInt
}

// weightSpan bounds the weights waitMaxWeight looks at; no policy weighs
// a request near a million.
const weightSpan = 1 << 20

// weightPoints returns, in ascending order, weights at which every change
// of the deciding threshold shows: around each constant of thresholds that
// compare the weight, or every weight in a smaller span when a threshold
// is a CEL expression that could not be reduced.
func weightPoints(ts []threshold) []int {
	pts := []int{-weightSpan, weightSpan}
	var walk func(w *weightPred) bool
	walk = func(w *weightPred) bool {
		switch w.op {
		case "_&&_", "_||_":
			return walk(w.l) && walk(w.r)
		case "true", "storm", "!storm":
			return true
		}
		if w.k > -weightSpan && w.k < weightSpan {
			k := int(w.k)
			pts = append(pts, k-1, k, k+1)
		}
		return true
	}
	for i := range ts {
		if ts[i].pred == nil || !walk(ts[i].pred) {
			pts = pts[:0]
			for w := -256; w <= 1024; w++ {
				pts = append(pts, w)
			}
			return pts
		}
	}
	slices.Sort(pts)
	return slices.Compact(pts)
}

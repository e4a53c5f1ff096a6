package policy

import (
	"fmt"
	"slices"
	"strings"

	"cel.dev/cel-go/common/types"

	"github.com/maatproxy/maat/clientnet"
)

// scan is the per-request prefilter state, kept on Evaluate's stack.
type scan struct {
	uaFound, pathFound litBits
	uaAll, pathAll     bool
	act                *activation
}

// Evaluate decides what to do with r. It does no I/O and, for a typical
// browser request under the default policy, does not allocate.
func (p *Policy) Evaluate(r *Request) Decision {
	var d Decision
	var sc scan
	p.evaluate(r, &d, &sc, nil)
	return d
}

// evaluate is Evaluate with an optional trace for Explain.
func (p *Policy) evaluate(r *Request, d *Decision, sc *scan, trace *strings.Builder) {
	d.p = p
	ua := headerValue(r, "User-Agent")
	sc.uaAll = p.ua.scan(ua, &sc.uaFound)
	sc.pathAll = p.path.scan(r.Path, &sc.pathFound)

	d.Signals = computeSignals(r, ua) &^ p.off
	for s := range d.Signals.All {
		d.Weight += p.weights[s]
		if trace != nil {
			fmt.Fprintf(trace, "signal %s: weight %+d\n", s, p.weights[s])
		}
	}
	for i := range p.rules {
		ru := &p.rules[i]
		if !p.matches(ru, r, ua, d.Signals, sc) {
			continue
		}
		d.addMatched(i)
		if ru.action == WEIGH {
			d.Weight += ru.adjust
			if trace != nil {
				fmt.Fprintf(trace, "rule %s (%s, %s): WEIGH %+d\n", ru.name, ru.id, ru.src, ru.adjust)
			}
			continue
		}
		if trace != nil {
			fmt.Fprintf(trace, "rule %s (%s, %s): %s\n", ru.name, ru.id, ru.src, ru.action)
		}
		d.Action, d.Rule, d.RuleID = ru.action, ru.name, ru.id
		switch ru.action {
		case CHALLENGE:
			d.Challenge = ru.challenge
		case RATE:
			d.Rate = RateLimit{Key: ru.rateKeyFor(r), Rate: ru.perSecond, Burst: ru.burst}
		}
		return
	}
	for i := range p.thresholds {
		t := &p.thresholds[i]
		if !t.match(d.Weight) {
			continue
		}
		if trace != nil {
			fmt.Fprintf(trace, "threshold %s (%s): weight %d: %s\n", t.name, t.src, d.Weight, t.action)
		}
		d.Action, d.Rule, d.RuleID = t.action, t.name, t.id
		if t.action == CHALLENGE {
			d.Challenge = t.challenge
		}
		return
	}
	if trace != nil {
		fmt.Fprintf(trace, "no rule or threshold decided: weight %d: ALLOW\n", d.Weight)
	}
	d.Action = ALLOW
}

func (t *threshold) match(w int) bool {
	if t.pred != nil {
		return t.pred.eval(int64(w))
	}
	out, _, err := t.prg.Eval(map[string]any{"weight": int64(w)})
	if err != nil {
		return false
	}
	b, ok := out.(types.Bool)
	return ok && bool(b)
}

// matches reports whether every matcher of ru holds for r. Cheap matchers
// go first; the expression last.
func (p *Policy) matches(ru *rule, r *Request, ua string, sigs Signals, sc *scan) bool {
	if ru.signals != 0 && sigs&ru.signals == 0 {
		return false
	}
	if len(ru.families) > 0 && !slices.Contains(ru.families, r.ClientFamily) {
		return false
	}
	if !ru.ja4.empty() && !ru.ja4.match(r.JA4) {
		return false
	}
	if !ru.hfp.empty() && !ru.hfp.match(r.HFP) {
		return false
	}
	if !ru.h2f.empty() && !ru.h2f.match(r.H2FP) {
		return false
	}
	if !ru.addrs.empty() && !ru.addrs.contains(r.RemoteAddr) {
		return false
	}
	if ru.path != nil && !ru.path.match(r.Path, &sc.pathFound, sc.pathAll) {
		return false
	}
	if ru.ua != nil && !ru.ua.match(ua, &sc.uaFound, sc.uaAll) {
		return false
	}
	for _, h := range ru.headers {
		v := headerValue(r, h.name)
		if v == "" && h.name == "Host" {
			v = r.Host
		}
		if v == "" || !h.re.MatchString(v) {
			return false
		}
	}
	if ru.expr != nil {
		if sc.act == nil {
			sc.act = &activation{r: r}
		}
		if !evalBool(ru.expr, sc.act) {
			return false
		}
	}
	return true
}

// rateKeyFor builds the bucket key of a RATE rule for r.
func (ru *rule) rateKeyFor(r *Request) string {
	switch ru.rateKey {
	case rateByJA4:
		if r.JA4 != "" {
			return ru.rateKeyPrefix + "ja4:" + r.JA4
		}
	case rateByPass:
		if r.Pass != "" {
			return ru.rateKeyPrefix + "pass:" + r.Pass
		}
	}
	return ru.rateKeyPrefix + "ip:" + clientnet.Prefix(r.RemoteAddr).String()
}

// Explain evaluates r and describes, line by line, the signals that fired,
// the rules that matched, the weight and the decision: the output of
// `edge policy explain`.
func (p *Policy) Explain(r *Request) string {
	var b strings.Builder
	var d Decision
	var sc scan
	fmt.Fprintf(&b, "policy %s\n", p.version)
	p.evaluate(r, &d, &sc, &b)
	fmt.Fprintf(&b, "decision: %s weight=%d", d.Action, d.Weight)
	switch d.Action {
	case CHALLENGE:
		fmt.Fprintf(&b, " challenge=%s bits=%d", d.Challenge.Algorithm, d.Challenge.Bits)
	case RATE:
		fmt.Fprintf(&b, " key=%s rate=%g/s burst=%d", d.Rate.Key, d.Rate.Rate, d.Rate.Burst)
	}
	if d.Rule != "" {
		fmt.Fprintf(&b, " rule=%s", d.Rule)
	}
	b.WriteByte('\n')
	return b.String()
}

package policy

import (
	"net/netip"
	"slices"
)

// Early refusal: deciding from what a connection shows before its first
// request (the ClientHello's JA4, the client's address and what the geo
// databases say of it) that every request on it would be denied, so that
// the edge can refuse it at the handshake (issue 35, "cheap refusals").
//
// The answer must be exact in one direction: DenyConn reports true only if
// Evaluate decides DENY (not DENY_AND_REROUTE, which answers with a
// redirect) for every Request whose connection facts are those of the
// ConnInfo, whatever its method, path, headers, HTTP fingerprints, crawler
// verification or reverse DNS. Where that cannot be shown it reports false,
// and the request path decides as always.
//
// The walk follows Evaluate's: rules in order, the first matching non-WEIGH
// rule decides, WEIGH rules and signals add weight, thresholds map the
// weight. A rule whose matchers all read connection facts (ja4:,
// client_family:, remote_addresses:, asns:, geoip:) matches or not, as it
// would for every request; a rule that also reads the request may match
// (unless a connection matcher already rules it out): if it would decide
// anything but DENY, the answer is false; if it would weigh, its weight
// widens the span of weights a request may reach. Every signal may fire or
// not. The thresholds must then decide DENY at every weight of the span;
// a threshold that is a CEL expression not reduced to comparisons of the
// weight makes the answer false.

// ConnInfo is what the policy can know of a connection before its first
// request: the fields of Request that the connection fixes. The edge fills
// them as it fills Request, so that a request on the connection sees the
// same values.
type ConnInfo struct {
	RemoteAddr netip.Addr
	// JA4 and ClientFamily are Request.JA4 and Request.ClientFamily.
	JA4          string
	ClientFamily string
	// ASN, ASOrg and Country are the geo databases' answer for
	// RemoteAddr, as in Request.
	ASN     uint32
	ASOrg   string
	Country string
}

// earlyPlan is what compile precomputes for DenyConn.
type earlyPlan struct {
	// any: some rule on connection facts alone, or some threshold, denies;
	// without one DenyConn is always false.
	any bool
	// connOnly[i]: rule i reads connection facts only.
	connOnly []bool
	// sigLo, sigHi bound the weight the signals add together.
	sigLo, sigHi int
	// reduced: every threshold compares the weight with constants only;
	// points are those constants and their neighbours, sorted.
	reduced bool
	points  []int
}

// planEarly computes p.early; compile calls it once the rules and
// thresholds are compiled.
func (p *Policy) planEarly() earlyPlan {
	e := earlyPlan{connOnly: make([]bool, len(p.rules)), reduced: true}
	for i := range p.rules {
		ru := &p.rules[i]
		e.connOnly[i] = ru.connOnly()
		if e.connOnly[i] && ru.denies() && !ru.never {
			e.any = true
		}
	}
	if p.signalsAt != "" {
		for s := range Signal(numSignals) {
			if p.off&(1<<s) == 0 {
				w := p.weights[s]
				e.sigLo += min(0, w)
				e.sigHi += max(0, w)
			}
		}
	}
	var walk func(w *weightPred)
	walk = func(w *weightPred) {
		switch w.op {
		case "_&&_", "_||_":
			walk(w.l)
			walk(w.r)
		case "true", "storm", "!storm":
		default:
			k := int(w.k)
			e.points = append(e.points, k-1, k, k+1)
		}
	}
	thresholdDenies := false
	for i := range p.thresholds {
		t := &p.thresholds[i]
		if t.pred == nil {
			e.reduced = false
			continue
		}
		walk(t.pred)
		thresholdDenies = thresholdDenies || t.action == DENY
	}
	slices.Sort(e.points)
	e.points = slices.Compact(e.points)
	e.any = e.any || e.reduced && thresholdDenies
	return e
}

// connOnly reports whether every matcher of ru reads connection facts.
func (ru *rule) connOnly() bool {
	return ru.ua == nil && ru.path == nil && len(ru.headers) == 0 && ru.hfp.empty() && ru.h2f.empty() &&
		ru.signals == 0 && ru.expr == nil
}

// denies reports whether ru, when it matches, answers with a deny page:
// DENY, not Anubis's DENY_AND_REROUTE (a redirect).
func (ru *rule) denies() bool { return ru.action == DENY && ru.rerouteTo == "" }

// DeniesConns reports whether DenyConn can ever report true under p: some
// rule on connection facts alone, or some threshold, denies. The edge asks
// it once per policy to skip the early check altogether.
func (p *Policy) DeniesConns() bool { return p.early.any }

// DenyConn reports whether every request on a connection with the facts c
// is denied under p (see the top of early.go for how exactly). It does not
// allocate.
func (p *Policy) DenyConn(c *ConnInfo) bool {
	e := &p.early
	if !e.any {
		return false
	}
	r := Request{RemoteAddr: c.RemoteAddr, JA4: c.JA4, ClientFamily: c.ClientFamily, ASN: c.ASN, ASOrg: c.ASOrg, Country: c.Country}
	var family uint64
	if b, ok := p.familyBit[r.ClientFamily]; ok {
		family = 1 << b
	}
	lo, hi := e.sigLo, e.sigHi
	for i := range p.rules {
		ru := &p.rules[i]
		if !p.connMatches(ru, &r, family) {
			continue
		}
		switch {
		case e.connOnly[i] && ru.action == WEIGH:
			lo += ru.adjust
			hi += ru.adjust
		case e.connOnly[i]:
			return ru.denies() // it decides every request
		case ru.action == WEIGH: // it may weigh a request, or not
			lo += min(0, ru.adjust)
			hi += max(0, ru.adjust)
		case !ru.denies():
			return false // it may decide something else
		}
		// A DENY rule that may match: it denies, or the walk goes on.
	}
	return p.thresholdsDeny(lo, hi)
}

// connMatches reports whether the connection matchers of ru hold for r:
// those of matches that read connection facts only.
func (p *Policy) connMatches(ru *rule, r *Request, family uint64) bool {
	if ru.never {
		return false
	}
	if len(ru.families) > 0 && ru.famMask&family == 0 &&
		(!p.famOverflow || !slices.Contains(ru.families, r.ClientFamily)) {
		return false
	}
	if !ru.ja4.empty() && !ru.ja4.match(r.JA4) {
		return false
	}
	if !ru.addrs.empty() && !ru.addrs.contains(r.RemoteAddr) {
		return false
	}
	if len(ru.asns)+len(ru.countries) > 0 && !ru.matchGeo(r) {
		return false
	}
	return true
}

// thresholdsDeny reports whether the thresholds decide DENY at every weight
// from lo to hi. The deciding threshold changes only at the constants the
// thresholds compare the weight with, so lo, hi and the constants and
// their neighbours between them show every decision in the span.
func (p *Policy) thresholdsDeny(lo, hi int) bool {
	e := &p.early
	if !e.reduced || len(p.thresholds) == 0 {
		return false
	}
	if !p.thresholdDenies(lo) || !p.thresholdDenies(hi) {
		return false
	}
	i, _ := slices.BinarySearch(e.points, lo)
	for ; i < len(e.points) && e.points[i] <= hi; i++ {
		if !p.thresholdDenies(e.points[i]) {
			return false
		}
	}
	return true
}

// thresholdDenies reports whether the threshold deciding weight w denies,
// calm or in a storm alike: the edge refuses early only what every request
// would be denied whatever the site's load.
func (p *Policy) thresholdDenies(w int) bool {
	return p.thresholdDeniesIn(w, false) && p.thresholdDeniesIn(w, true)
}

func (p *Policy) thresholdDeniesIn(w int, storm bool) bool {
	for i := range p.thresholds {
		if t := &p.thresholds[i]; t.pred.eval(int64(w), storm) {
			return t.action == DENY
		}
	}
	return false // no threshold: ALLOW
}

package policy

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/maatproxy/maat/clientnet"
)

// scan is the per-request prefilter state, kept on Evaluate's stack.
type scan struct {
	uaFound, pathFound litBits
	uaSum, pathSum     uint64 // found literal ids modulo 64, as bits
	uaAll, pathAll     bool
	family             uint64 // the request's client family as a familyBit bit; 0 if no rule names it
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
	defer func() { d.NeedFCrDNS = sc.act != nil && sc.act.needDNS }()
	ua := headerValue(r, "User-Agent")
	sc.uaAll = p.ua.scan(ua, &sc.uaFound, &sc.uaSum)
	sc.pathAll = p.path.scan(r.Path, &sc.pathFound, &sc.pathSum)
	if b, ok := p.familyBit[r.ClientFamily]; ok {
		sc.family = 1 << b
	}

	raw, claim := p.signals(r, ua)
	d.raw = raw
	d.Signals = raw &^ p.off
	d.BrowserAgrees = browserAgrees(r, claim)
	for s := range d.Signals.All {
		if p.signalsAt == "" {
			if trace != nil {
				fmt.Fprintf(trace, "signal %s: fired, no weight (Maat's signals are not in force: no signals: section)\n", s)
			}
			continue
		}
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
		d.RerouteTo, d.DivertTo = ru.rerouteTo, ru.divertTo
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
		if !t.match(d.Weight, r) {
			continue
		}
		if trace != nil {
			fmt.Fprintf(trace, "threshold %s (%s): weight %d: %s\n", t.name, t.src, d.Weight, t.action)
		}
		d.Action, d.Rule, d.RuleID, d.DivertTo = t.action, t.name, t.id, t.divertTo
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

// matches reports whether every matcher of ru holds for r. Cheap matchers
// go first; the expression last.
func (p *Policy) matches(ru *rule, r *Request, ua string, sigs Signals, sc *scan) bool {
	if ru.never {
		return false
	}
	if ru.signals != 0 && sigs&ru.signals == 0 {
		return false
	}
	// The prefilters rule most rules out with one AND each.
	if ru.ua != nil && ru.ua.absent(sc.uaSum, sc.uaAll) || ru.path != nil && ru.path.absent(sc.pathSum, sc.pathAll) {
		return false
	}
	if len(ru.families) > 0 && ru.famMask&sc.family == 0 &&
		(!p.famOverflow || !slices.Contains(ru.families, r.ClientFamily)) {
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
	if len(ru.asns)+len(ru.countries) > 0 && !ru.matchGeo(r) {
		return false
	}
	if ru.path != nil && !ru.path.match(r.Path, &sc.pathFound, sc.pathSum, sc.pathAll) {
		return false
	}
	if ru.ua != nil && !ru.ua.match(ua, &sc.uaFound, sc.uaSum, sc.uaAll) {
		return false
	}
	for _, h := range ru.headers {
		v := headerValue(r, h.name)
		if v == "" && h.name == "Host" {
			v = r.Host // Go moves Host out of the header; Maat reads it
		}
		if h.re == nil && v == "" || h.re != nil && !h.re.MatchString(v) {
			return false
		}
	}
	if ru.expr != nil {
		if sc.act == nil {
			sc.act = &activation{p: p, r: r}
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
	case rateByCluster:
		if r.Cluster != "" {
			return ru.rateKeyPrefix + "cluster:" + r.Cluster
		}
	case rateByASN:
		if r.ASN != 0 {
			return ru.rateKeyPrefix + "asn:" + strconv.FormatUint(uint64(r.ASN), 10)
		}
	case rateByHFP:
		if r.HFP != "" {
			return ru.rateKeyPrefix + "hfp:" + r.HFP
		}
	case rateByH2FP:
		if r.H2FP != "" {
			return ru.rateKeyPrefix + "h2fp:" + r.H2FP
		}
	}
	return ru.rateKeyPrefix + "ip:" + clientnet.Prefix(r.RemoteAddr).String()
}

// Checks says which of the checks that run before evaluation the caller
// ran for a request given to ExplainChecks.
type Checks struct {
	// Crawler: the Verifier ran (Request.CrawlerVerified is its answer),
	// as the edge does for every request that claims a known crawler.
	Crawler bool
	// Geo: the geo databases were consulted (Request.ASN, ASOrg and
	// Country are their answer).
	Geo bool
	// FCrDNS: forward-confirmed reverse DNS of the address was looked up
	// (Request.FCrDNS is the answer), as the edge does when an evaluation
	// reaches verifyFCrDNS or reverseDNS (Decision.NeedFCrDNS).
	FCrDNS bool
}

// Explain is ExplainChecks with the checks inferred from r: crawler
// verification ran when r.CrawlerVerified is not CrawlerUnchecked, geo
// when r.ASN or r.Country is set, reverse DNS when r.FCrDNS is checked.
func (p *Policy) Explain(r *Request) string {
	return p.ExplainChecks(r, Checks{Crawler: r.CrawlerVerified != CrawlerUnchecked, Geo: r.ASN != 0 || r.Country != "", FCrDNS: r.FCrDNS.Checked})
}

// ExplainChecks evaluates r as Evaluate does and describes, line by line,
// the checks that were run and those skipped (crawler verification, geo),
// the signals that fired, the rules that matched, the weight, the decision
// and whether the no-JS wait may be offered: the output of
// `edge policy explain`. The decision is Evaluate's for the same Request:
// to agree with a live decision, give it what the edge gives Evaluate
// (the Verifier's answer and the geo lookup) and say so in ran.
func (p *Policy) ExplainChecks(r *Request, ran Checks) string {
	var b strings.Builder
	var d Decision
	var sc scan
	fmt.Fprintf(&b, "policy %s\n", p.version)
	p.explainChecks(&b, r, ran)
	p.evaluate(r, &d, &sc, &b)
	p.explainFCrDNS(&b, r, &d, ran)
	fmt.Fprintf(&b, "decision: %s weight=%d", d.Action, d.Weight)
	switch d.Action {
	case CHALLENGE:
		fmt.Fprintf(&b, " challenge=%s bits=%d", d.Challenge.Algorithm, d.Challenge.Bits)
	case RATE:
		fmt.Fprintf(&b, " key=%s rate=%g/s burst=%d", d.Rate.Key, d.Rate.Rate, d.Rate.Burst)
	case DENY:
		if d.RerouteTo != "" {
			fmt.Fprintf(&b, " reroute_to=%s (a redirect, as Anubis's DENY_AND_REROUTE)", d.RerouteTo)
		}
	case DIVERT:
		fmt.Fprintf(&b, " divert_to=%s", d.DivertTo)
	}
	if d.Rule != "" {
		fmt.Fprintf(&b, " rule=%s", d.Rule)
	}
	b.WriteByte('\n')
	if d.Action == CHALLENGE {
		p.explainWait(&b, &d)
	}
	return b.String()
}

// explainChecks says which checks ran before evaluation and what they
// found.
func (p *Policy) explainChecks(b *strings.Builder, r *Request, ran Checks) {
	ua := headerValue(r, "User-Agent")
	switch name := ClaimedCrawler(ua); {
	case name == "":
		b.WriteString("check crawler verification: not needed (no known crawler claimed)\n")
	case !ran.Crawler:
		fmt.Fprintf(b, "check crawler verification: SKIPPED: the User-Agent claims %s; live, the edge verifies it (published ranges or forward-confirmed reverse DNS), so fake_crawler or verified_crawler may fire live but not here\n", name)
	case r.CrawlerVerified == CrawlerVerified:
		fmt.Fprintf(b, "check crawler verification: ran: %s verified\n", name)
	case r.CrawlerVerified == CrawlerFailed:
		fmt.Fprintf(b, "check crawler verification: ran: %s FAILED: the address is not the crawler's\n", name)
	default:
		fmt.Fprintf(b, "check crawler verification: ran: %s could not be verified (no published ranges or DNS names, or DNS failed for now)\n", name)
	}
	if p.UsesPressure() || p.readsLoad {
		u := &r.Upstream
		storm := "off"
		if r.Storm {
			storm = "on"
		}
		fmt.Fprintf(b, "check site load: as given: pressure %.2f, storm %s; upstream %d/%d in use, %d queued (wait %.0f ms), p50 %.0f ms, p95 %.0f ms; load average %.2f %.2f %.2f\n",
			r.Pressure, storm, u.InUse, u.Capacity, u.Queue, u.QueueWaitMs, u.P50Ms, u.P95Ms, r.Load[0], r.Load[1], r.Load[2])
	}
	var dbs []string
	if !p.geo.ASN {
		dbs = append(dbs, "geo.asn_db")
	}
	if !p.geo.Country {
		dbs = append(dbs, "geo.country_db")
	}
	switch {
	case ran.Geo:
		asn, org, country := "unknown", "", "unknown"
		if r.ASN != 0 {
			asn = "AS" + strconv.FormatUint(uint64(r.ASN), 10)
		}
		if r.ASOrg != "" {
			org = " (" + r.ASOrg + ")"
		}
		if r.Country != "" {
			country = r.Country
		}
		fmt.Fprintf(b, "check geo: ran: %s%s, country %s\n", asn, org, country)
	case len(dbs) == 2:
		b.WriteString("check geo: SKIPPED: no geo database (geo.asn_db, geo.country_db); asns:, geoip:, asn, country and hosting_asn see nothing\n")
	default:
		fmt.Fprintf(b, "check geo: SKIPPED: no ASN or country given for %s; asns:, geoip:, asn, country and hosting_asn see nothing\n", r.RemoteAddr)
	}
}

// explainFCrDNS says what forward-confirmed reverse DNS found, when an
// expression read it, or that the lookup was skipped.
func (p *Policy) explainFCrDNS(b *strings.Builder, r *Request, d *Decision, ran Checks) {
	f := &r.FCrDNS
	switch {
	case d.NeedFCrDNS:
		b.WriteString("check reverse DNS: SKIPPED: an expression reads verifyFCrDNS or reverseDNS; live, the edge looks the address up and decides again, so the decision may differ\n")
	case !ran.FCrDNS || !f.Checked:
	case f.Failed:
		b.WriteString("check reverse DNS: ran: the lookup failed (verifyFCrDNS is false)\n")
	case len(f.Names) == 0:
		b.WriteString("check reverse DNS: ran: no PTR record\n")
	default:
		confirmed := "none resolves back to the address"
		if f.Confirmed {
			confirmed = "one resolves back to the address"
		}
		fmt.Fprintf(b, "check reverse DNS: ran: %s; %s\n", strings.Join(f.Names, ", "), confirmed)
	}
}

// explainWait says whether the no-JS wait may be offered by default.
func (p *Policy) explainWait(b *strings.Builder, d *Decision) {
	var lies []string
	for s := range d.raw.All {
		if lieSignals&(1<<s) != 0 {
			lies = append(lies, s.String())
		}
	}
	limit := p.WaitMaxWeight()
	below := fmt.Sprintf("weight %d < %d", d.Weight, limit)
	if limit == math.MaxInt {
		below = fmt.Sprintf("weight %d; the lowest challenge band has no upper bound", d.Weight)
	}
	switch {
	case len(lies) > 0:
		fmt.Fprintf(b, "no-JS wait: not offered: %s fired\n", strings.Join(lies, ", "))
	case !d.BrowserAgrees:
		b.WriteString("no-JS wait: not offered: the fingerprints do not show the browser the User-Agent claims\n")
	case d.Weight >= limit:
		fmt.Fprintf(b, "no-JS wait: not offered: weight %d is not below %d (WaitMaxWeight)\n", d.Weight, limit)
	default:
		fmt.Fprintf(b, "no-JS wait: may be offered (the fingerprints agree with the browser; %s)\n", below)
	}
}

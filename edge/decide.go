package edge

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/maatproxy/maat/challenge"
	"github.com/maatproxy/maat/fplog"
	"github.com/maatproxy/maat/httpfp"
	"github.com/maatproxy/maat/policy"
)

// decide weighs the request with the policy and answers it when the policy
// says so (deny, reroute, rate limit, challenge, divert). It reports
// whether the request goes on to its route. The verdict is the same for a
// site that enforces the policy and one that runs dry (dry_run): the
// latter only records it (dryRun) and lets the request through.
func (h *Handler) decide(w *recorder, r *http.Request, st *reqState) bool {
	sp := h.policyFor(st.site)
	cl := st.challengeClient()
	// A valid pass of any kind: the client's cluster, and its line's
	// priority, are its pass's.
	passed := sp.challenger.Check(r, cl, challenge.Need{Wait: true}) == challenge.PassOK
	pr := h.policyRequest(r, st, passed)
	dec := sp.policy.Evaluate(&pr)
	if dec.NeedFCrDNS { // an Anubis verifyFCrDNS or reverseDNS expression
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		pr.FCrDNS = h.env.verifier.FCrDNS(ctx, st.client)
		cancel()
		dec = sp.policy.Evaluate(&pr)
	}
	st.weight = dec.Weight
	st.rules = dec.AppendNames(st.rulesBuf[:0])
	wait := h.waitFor(sp.policy, &dec, &pr)
	v := h.verdict(r, sp, &dec, &pr, cl, passed, wait)
	st.action = v.action
	if v.reason != "" {
		st.reason = v.reason
	}
	st.challenge = v.challenge
	// Pass holders and the crawlers the policy lets through go first in
	// the upstream's line.
	st.priority = st.action == fplog.ActionPass ||
		st.action == fplog.ActionAllow && pr.CrawlerVerified == policy.CrawlerVerified
	if st.site.dryRun {
		return h.dryRun(st)
	}
	return h.enforce(w, r, st, sp, &dec, cl, wait, &v)
}

// verdict is what the policy's decision comes to for one request, as the
// fingerprint log keeps it.
type verdict struct {
	action    string           // fplog.Action…
	reason    string           // why, when the log says: reasonChallengeCalm
	challenge *fplog.Challenge // CHALLENGE: the challenge the client gets
	missing   challenge.Reason // CHALLENGE: why the client's pass does not do
	retry     time.Duration    // RATE: when the client's bucket has a token again
}

// verdict works out what the decision dec of sp comes to for r, from
// client cl (passed: with a valid pass of any kind, wait: the no-JavaScript
// wait it may take): a RATE rule takes from its bucket, a CHALLENGE checks
// the pass against what the rule asks. It answers nothing: enforce does,
// unless the site runs dry.
func (h *Handler) verdict(r *http.Request, sp *sitePolicy, dec *policy.Decision, pr *policy.Request, cl challenge.Client, passed bool, wait time.Duration) verdict {
	switch dec.Action {
	case policy.DENY:
		return verdict{action: fplog.ActionDeny}
	case policy.DIVERT:
		return verdict{action: fplog.ActionDivert}
	case policy.RATE:
		ok, retry, err := h.env.Store.Take(r.Context(), dec.Rate.Key, dec.Rate.Rate, dec.Rate.Burst)
		if err != nil {
			// The shared store is down: serve rather than lock everyone out.
			h.env.Log.LogAttrs(r.Context(), slog.LevelError, "rate_store_failed", slog.String("error", err.Error()))
		} else if !ok {
			return verdict{action: fplog.ActionRate, retry: retry}
		}
		return verdict{action: fplog.ActionAllow}
	case policy.CHALLENGE:
		// challenge.when false (a calm site): no challenge for a client no
		// lie-detection signal fired on, and any valid pass passes.
		calm := h.when != nil && !dec.Lied() && !h.when.Eval(pr)
		if calm && passed {
			return verdict{action: fplog.ActionPass}
		}
		reason := sp.challenger.Check(r, cl, challengeNeed(dec, wait))
		switch {
		case reason == challenge.PassOK:
			return verdict{action: fplog.ActionPass}
		case calm:
			return verdict{action: fplog.ActionAllow, reason: reasonChallengeCalm}
		}
		return verdict{action: fplog.ActionChallenge, missing: reason,
			challenge: &fplog.Challenge{Alg: dec.Challenge.Algorithm, Bits: dec.Challenge.Bits}}
	}
	if passed {
		return verdict{action: fplog.ActionPass}
	}
	return verdict{action: fplog.ActionAllow}
}

// enforce answers the request as v, the verdict on the decision dec of
// sp, says: a DENY, DIVERT, RATE or CHALLENGE is answered here (false);
// the rest goes on to its route (true).
func (h *Handler) enforce(w *recorder, r *http.Request, st *reqState, sp *sitePolicy, dec *policy.Decision, cl challenge.Client, wait time.Duration, v *verdict) bool {
	switch v.action {
	case fplog.ActionDeny:
		if dec.RerouteTo != "" { // Anubis's DENY_AND_REROUTE
			w.Header().Set(challenge.MitigatedHeader, "deny")
			writeRedirect(w, dec.RerouteTo, http.StatusTemporaryRedirect)
			return false
		}
		sp.challenger.Deny(w, r, st.id, ruleReason(dec.Rule))
		return false
	case fplog.ActionDivert:
		h.divert(w, r, st, dec.DivertTo)
		return false
	case fplog.ActionRate:
		sp.challenger.RateLimited(w, r, st.id, v.retry)
		return false
	case fplog.ActionChallenge:
		h.env.metrics.challenges.WithLabelValues("issued", v.missing.String()).Inc()
		// An Anubis difficulty of 0 asks only that the page's script
		// runs: one bit, not challenge's default for an unset Bits.
		spec := challenge.Spec{Algorithm: dec.Challenge.Algorithm, Bits: max(dec.Challenge.Bits, 1), Rule: dec.Rule, Wait: wait}
		sp.challenger.Challenge(w, r, cl, spec, st.id)
		return false
	}
	return true
}

// waitFor is the no-JavaScript wait the client may take instead of the
// proof of work, or 0 when it may not (DESIGN.md: "never to a client a
// lie-detection signal fired on"). A policy's metarefresh challenge asks
// only for the wait. Otherwise the wait is offered for a proof of work of
// at most challenge.WaitBits (what a wait's pass stands for) to a client
// whose TLS (and HTTP/2) fingerprint agrees with the browser it claims
// (a parrot, tls_http_mismatch, is a lie)
// and whose weight is below challenge.wait.max_weight; it grows with the
// weight, to twice challenge.wait.duration at max_weight.
func (h *Handler) waitFor(p *policy.Policy, d *policy.Decision, r *policy.Request) time.Duration {
	base := h.cfg.Challenge.Wait.Duration.D()
	if d.Action == policy.CHALLENGE && d.Challenge.Algorithm == "metarefresh" {
		return base
	}
	maxWeight := h.cfg.Challenge.Wait.MaxWeight
	switch maxWeight {
	case -1:
		return 0
	case 0:
		maxWeight = p.WaitMaxWeightFor(r)
	}
	if !d.BrowserAgrees || d.Lied() || d.Weight >= maxWeight || d.Action == policy.CHALLENGE && d.Challenge.Bits > challenge.WaitBits {
		return 0
	}
	if d.Weight <= 0 || maxWeight <= 0 {
		return base
	}
	return base + base*time.Duration(d.Weight)/time.Duration(maxWeight)
}

// challengeNeed is what a pass must show for the CHALLENGE decision d,
// with the no-JavaScript wait offered when wait > 0.
func challengeNeed(d *policy.Decision, wait time.Duration) challenge.Need {
	need := challenge.Need{Bits: d.Challenge.Bits, Wait: wait > 0}
	if d.Challenge.Algorithm == "metarefresh" {
		need.Bits = min(need.Bits, challenge.WaitBits) // the rule asks for the wait alone
	}
	return need
}

// policyRequest is what the policy sees of r; passed: r carries a valid
// pass cookie.
func (h *Handler) policyRequest(r *http.Request, st *reqState, passed bool) policy.Request {
	pr := policy.Request{
		RemoteAddr: st.client,
		Host:       r.Host,
		Method:     r.Method,
		Path:       st.match, // the path as lenient upstreams read it (urlpath), folded on a case-insensitive route
		RawQuery:   r.URL.RawQuery,
		Proto:      r.Proto,
		TLS:        r.TLS != nil,
		Header:     r.Header,
		JA4:        st.ja4,
	}
	if st.tls != nil {
		pr.ClientFamily, pr.ClientVersions = st.tls.Client.Family, st.tls.Client.Versions
	}
	if st.http != nil {
		pr.HFP, pr.H2FP = st.http.HFP, st.http.H2FP
		if c, ok := httpfp.LookupClient(st.http.H2FP); ok {
			pr.H2Family = c.Family
		}
		if st.http.Ordered {
			pr.HeaderOrder = st.http.Names
		}
	}
	if h.env.Geo != nil {
		st.geo = h.env.Geo.Lookup(st.client)
		pr.ASN, pr.ASOrg, pr.Country = st.geo.ASN, st.geo.ASOrg, st.geo.Country
	}
	if policy.ClaimedCrawler(r.UserAgent()) != "" {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		pr.CrawlerVerified = h.env.verifier.Verify(ctx, r.UserAgent(), st.client)
		cancel()
	}
	h.loadFacts(r, st, &pr, passed)
	return pr
}

func ruleReason(rule string) string {
	if rule == "" {
		return "policy"
	}
	return rule
}

// loadFacts fills what the policy knows of the site's load and the
// client's cluster: the site's pressure and storm mode, its upstream's
// parts, the system's load averages, and the cluster key (which, with a
// valid pass, is also the pass's key for RATE by pass).
func (h *Handler) loadFacts(r *http.Request, st *reqState, pr *policy.Request, passed bool) {
	var pass string
	if passed {
		pass = passCookie(r)
	}
	var h2fp string
	if st.http != nil {
		h2fp = st.http.H2FP
	}
	st.cluster = clusterKey(pass, st.ja4, h2fp, st.geo.ASN, st.client)
	pr.Cluster = st.cluster
	if pass != "" {
		pr.Pass = st.cluster
	}
	if st.site != nil && st.site.load != nil {
		l := st.site.load.read(st.start)
		st.pressure = l.pressure
		pr.Pressure, pr.Storm, pr.Upstream = l.pressure, l.storm, upstreamLoad(l.stats)
	}
	pr.Load = h.loadAvg.read(st.start)
}

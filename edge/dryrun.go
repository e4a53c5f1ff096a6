package edge

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/maatproxy/maat/challenge"
	"github.com/maatproxy/maat/fplog"
	"github.com/maatproxy/maat/policy"
)

// dryRun records what the decision dec of sp would have done to the
// request of a site that runs dry (dry_run), and lets the request through:
// nothing is answered, diverted or challenged. The log line keeps the
// action (dry_run: true marks it), and maat_dry_run_total counts it. A
// RATE rule still takes from its bucket, so that the log shows what would
// have been limited; a CHALLENGE a valid pass meets is a PASS, as live.
func (h *Handler) dryRun(r *http.Request, st *reqState, sp *sitePolicy, dec *policy.Decision, cl challenge.Client, wait time.Duration) bool {
	st.dryRun = true
	switch dec.Action {
	case policy.DENY:
		st.action = fplog.ActionDeny
	case policy.DIVERT:
		st.action = fplog.ActionDivert
	case policy.RATE:
		st.action = fplog.ActionAllow
		ok, _, err := h.env.Store.Take(r.Context(), dec.Rate.Key, dec.Rate.Rate, dec.Rate.Burst)
		if err != nil {
			h.env.Log.LogAttrs(r.Context(), slog.LevelError, "rate_store_failed", slog.String("error", err.Error()))
		} else if !ok {
			st.action = fplog.ActionRate
		}
	case policy.CHALLENGE:
		st.action = fplog.ActionPass
		if sp.challenger.Check(r, cl, challengeNeed(dec, wait)) != challenge.PassOK {
			st.action = fplog.ActionChallenge
			st.challenge = &fplog.Challenge{Alg: dec.Challenge.Algorithm, Bits: dec.Challenge.Bits}
		}
	default:
		st.action = fplog.ActionAllow
		if sp.challenger.Check(r, cl, challenge.Need{Wait: true}) == challenge.PassOK {
			st.action = fplog.ActionPass
		}
	}
	h.env.metrics.dryRun.WithLabelValues(st.siteName(), st.action).Inc()
	return true
}

package edge

// dryRun records that the request of a site that runs dry (dry_run) is
// let through whatever its verdict (decide's, the same as when the site
// enforces the policy): nothing is answered, diverted or challenged. The
// log line keeps the verdict's action, reason, rules and challenge
// (dry_run: true marks it), and maat_dry_run_total counts it. A RATE rule
// still took from its bucket, so that the log shows what would have been
// limited; no challenge is served, so no pass is handed out.
func (h *Handler) dryRun(st *reqState) bool {
	st.dryRun = true
	h.env.metrics.dryRun.WithLabelValues(st.siteName(), st.action).Inc()
	return true
}

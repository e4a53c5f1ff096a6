package edge

import (
	"cmp"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"slices"

	"github.com/maatproxy/maat/edge/internal/console"
	"github.com/maatproxy/maat/edge/internal/secret"
	"github.com/maatproxy/maat/fplog"
)

// record hands a finished request to the console's recorder.
func (h *Handler) record(st *reqState) {
	c := h.env.console
	if c == nil {
		return
	}
	q := console.Request{Time: st.start, Site: st.siteName(), Action: st.action, Rules: st.rules, JA4: st.ja4,
		ASN: st.geo.ASN, ASOrg: st.geo.ASOrg}
	if st.site == nil {
		q.Site = ""
	}
	if st.tls != nil {
		q.Family = st.tls.Client.Family
	}
	if h.cfg.Log.ClientIP != fplog.ClientIPNone {
		q.Client = st.client // the page shows it as the log writes it
	}
	c.Record(&q)
}

// consolePage is the admin listener's page: what the Server's recorder
// counted, client addresses as log.client_ip of the configuration in use
// says, and the upstreams of its sites.
func (s *Server) consolePage() http.Handler {
	key := secret.Derive(s.env.Secret, "maat fplog client_ip") // the fingerprint log's, so that hashes match
	return &console.Page{
		Recorder:  s.env.console,
		Upstreams: upstreamStats{s},
		Privacy:   func() (string, []byte) { return s.handler.Load().cfg.Log.ClientIP, key },
	}
}

// upstreamStats reports the upstream addresses of the Handler in use.
type upstreamStats struct{ s *Server }

// UpstreamStats is, for now, what the upstream pools tell: the slots in
// use and the requests waiting, against limits.upstream_conns; pressure
// is their share of the capacity.
func (u upstreamStats) UpstreamStats() []console.UpstreamRow {
	h := u.s.handler.Load()
	if h == nil || h.sites == nil {
		return nil
	}
	capacity := h.cfg.Limits.UpstreamConns
	var rows []console.UpstreamRow
	seen := map[[2]string]bool{}
	for _, st := range sitesOf(h.sites) {
		for _, rt := range st.routes {
			if rt.pool == nil || rt.static != nil {
				continue
			}
			for _, a := range rt.pool.State() {
				k := [2]string{st.name, a.Addr}
				if seen[k] {
					continue // routes of a site to the same address share its slots
				}
				seen[k] = true
				row := console.UpstreamRow{Site: st.name, Upstream: a.Addr, InUse: a.Busy, Capacity: capacity, Queue: a.Waiting}
				if capacity > 0 {
					row.Pressure = min(1, float64(a.Busy+a.Waiting)/float64(capacity))
				}
				rows = append(rows, row)
			}
		}
	}
	return rows
}

// adminAuth asks for listen.admin_auth's user and password, when the
// configuration in use sets them, before next.
func (s *Server) adminAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := s.handler.Load().cfg.Listen.AdminAuth
		if a != nil {
			user, pass, _ := r.BasicAuth()
			okUser, okPass := sameSecret(user, a.User), sameSecret(pass, a.Password) // both, always
			if !okUser || !okPass {
				w.Header().Set("WWW-Authenticate", `Basic realm="maat admin", charset="UTF-8"`)
				http.Error(w, "401 unauthorized: listen.admin_auth's user and password are needed", http.StatusUnauthorized)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// sameSecret compares a and b in constant time: their SHA-256 sums, so
// that not even the length tells.
func sameSecret(a, b string) bool {
	x, y := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(x[:], y[:]) == 1
}

// sitesOf lists the sites of t in configuration order.
func sitesOf(t *siteTable) []*site {
	var out []*site
	add := func(st *site) {
		if st != nil && !slices.Contains(out, st) {
			out = append(out, st)
		}
	}
	for _, st := range t.byHost {
		add(st)
	}
	for _, st := range t.wildcard {
		add(st)
	}
	add(t.fallback)
	slices.SortFunc(out, func(a, b *site) int { return cmp.Compare(a.index, b.index) })
	return out
}

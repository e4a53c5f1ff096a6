package edge

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"time"

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

// UpstreamStats is each site's pools as the pressure signal measured
// them last (the maat_upstream_* gauges' numbers): pressure, slots in
// use, capacity and queue.
func (u upstreamStats) UpstreamStats() []console.UpstreamRow {
	h := u.s.handler.Load()
	if h == nil || h.sites == nil {
		return nil
	}
	now := time.Now()
	var rows []console.UpstreamRow
	for _, st := range h.sites.list {
		l := st.load
		if l == nil {
			continue
		}
		pools, _ := l.byPool(now)
		for _, pl := range pools {
			rows = append(rows, console.UpstreamRow{Site: st.name, Upstream: pl.name, Pressure: pl.pressure,
				InUse: pl.stats.InUse, Capacity: pl.stats.Capacity, Queue: pl.stats.Queue})
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

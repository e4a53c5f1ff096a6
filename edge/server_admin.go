package edge

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/maatproxy/maat/edge/config"
)

// startAdmin serves the admin listener: the console, liveness, readiness
// and metrics.
func (s *Server) startAdmin() error {
	if s.base.Listen.Admin == "" {
		return nil
	}
	ln, err := s.listenTCP(s.base.Listen.Admin)
	if err != nil {
		return fmt.Errorf("edge: listen admin: %w", err)
	}
	s.track(ln)
	s.addrs.Admin = ln.Addr().String()
	s.adm = &http.Server{Handler: s.adminHandler(), ReadHeaderTimeout: 10 * time.Second}
	s.group.Go("admin", func() error { return serveErr(s.adm.Serve(ln)) })
	return nil
}

// adminHandler serves the admin listener: the console, liveness, readiness
// and metrics. listen.admin_auth, when set, guards the console and the
// metrics; the probes stay open.
func (s *Server) adminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", s.adminAuth(s.consolePage()))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.Handle("GET /metrics", s.adminAuth(s.metrics.handler()))
	mux.Handle("/debug/pprof/", s.adminAuth(s.pprofHandler()))
	return mux
}

// pprofHandler serves net/http/pprof's pages while listen.admin_pprof is
// on in the configuration in use (a reload turns it on or off), and 404
// otherwise.
func (s *Server) pprofHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.handler.Load().cfg.Listen.AdminPprof {
			http.NotFound(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

type readiness struct {
	Ready    bool         `json:"ready"`
	Draining bool         `json:"draining,omitempty"`
	Sites    []string     `json:"sites"` // the host names of the configuration in use
	Store    *storeStatus `json:"store,omitempty"`
	Certs    []certStatus `json:"certificates,omitempty"`
}

// storeStatus is the shared store's state: "ok", or "degraded" (serving
// from this node's memory) since a time, with the last error.
type storeStatus struct {
	State string    `json:"state"`
	Since time.Time `json:"since,omitzero"`
	Error string    `json:"error,omitempty"`
}

type certStatus struct {
	Name      string    `json:"name"`
	NotAfter  time.Time `json:"not_after,omitzero"`
	Error     string    `json:"error,omitempty"`
	NextRetry time.Time `json:"next_retry,omitzero"`
	Ready     bool      `json:"ready"`
	// Reason says why a name is not ready: its last error, or that it
	// has no certificate yet (being ordered, or expired).
	Reason string `json:"reason,omitempty"`
}

// readyz is 200 while the edge serves and has a certificate for every
// configured name — those a reload added included; 503 while draining or
// when a name has none. The body lists the sites' names and says which
// name lacks what.
func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	now := time.Now()
	rd := readiness{Ready: !s.stopping.Load(), Draining: s.stopping.Load(), Sites: []string{}}
	for _, sc := range s.handler.Load().cfg.Sites {
		for _, h := range sc.Hosts {
			rd.Sites = append(rd.Sites, config.NormalizeHost(h))
		}
	}
	if s.shared != nil {
		// A degraded node still serves (that is the point), so it stays
		// ready; the body says what it lacks.
		ok, since, err := s.shared.Health()
		rd.Store = &storeStatus{State: "ok", Since: since}
		if !ok {
			rd.Store.State, rd.Store.Error = "degraded", errString(err)
		}
	}
	for _, ns := range s.certs.Status() {
		cs := certStatus{Name: ns.Name, NotAfter: ns.NotAfter, NextRetry: ns.NextRetry, Ready: ns.Ready(now), Error: ns.LastError}
		if !cs.Ready {
			rd.Ready = false
			switch {
			case ns.LastError != "":
				cs.Reason = ns.LastError
			case ns.Ordering:
				cs.Reason = "no certificate yet: being ordered"
			case ns.NotAfter.IsZero():
				cs.Reason = "no certificate yet"
			default:
				cs.Reason = "the certificate expired"
			}
		}
		rd.Certs = append(rd.Certs, cs)
	}
	w.Header().Set("Content-Type", "application/json")
	if !rd.Ready {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(rd)
}

package edge

import (
	"context"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// reqState is what the edge decided for one request; it travels to the
// reverse proxy's hooks in the request context.
type reqState struct {
	start       time.Time
	id          string
	peer        netip.Addr
	peerTrusted bool
	client      netip.Addr
	site        *site
	route       *route
	target      *target
	tries       int
	tried       map[*target]bool
	ja4         string
	weight      int
	action      string
	status      int
	upstreamErr error
	demo        func(http.Header)
}

type stateKey struct{}

func stateOf(r *http.Request) *reqState {
	st, _ := r.Context().Value(stateKey{}).(*reqState)
	return st
}

// serveTCP is the handler for HTTP/1.1 and HTTP/2: it advertises HTTP/3.
func (s *Server) serveTCP(w http.ResponseWriter, r *http.Request) {
	if s.altSvc != "" {
		w.Header()["Alt-Svc"] = []string{s.altSvc}
	}
	s.serve(w, r)
}

func (s *Server) handlerH3() http.Handler { return http.HandlerFunc(s.serve) }

// serve is the handler chain of DESIGN.md: site, /.maat/, policy,
// challenge, upstream, log.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	rt := s.rt.Load()
	st := &reqState{start: time.Now(), id: s.nextID()}
	st.peer = peerAddr(r.RemoteAddr)
	st.peerTrusted = rt.trusted.contains(st.peer)
	st.client = rt.trusted.clientAddr(st.peer, r.Header["X-Forwarded-For"])
	rec := &recorder{ResponseWriter: w}
	r = r.WithContext(context.WithValue(r.Context(), stateKey{}, st))

	st.site = rt.sites.lookup(r.Host)
	if st.site == nil {
		s.errorPage(rec, r, http.StatusMisdirectedRequest, "unknown_site")
		return
	}
	st.action = "ALLOW"
	st.route = st.site.route(r.URL.Path)
	st.target = st.route.pool.pick(st.start, nil)
	if st.site.maxBody > 0 && r.Body != nil {
		r.Body = http.MaxBytesReader(rec, r.Body, st.site.maxBody)
	}
	if rt.cfg.Demo {
		st.demo = func(h http.Header) { demoHeaders(h, r, st) }
	}
	s.proxy.ServeHTTP(rec, r)
}

// errorPage answers with a short page naming the reason and request id.
func (s *Server) errorPage(w http.ResponseWriter, r *http.Request, status int, reason string) {
	st := stateOf(r)
	id := ""
	if st != nil {
		id = st.id
	}
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(strconv.Itoa(status) + " " + http.StatusText(status) + "\n\n" + errorText(reason) +
		"\nreason: " + reason + "\nrequest id: " + id + "\n"))
}

func errorText(reason string) string {
	switch reason {
	case "upstream_unreachable":
		return "The site's server cannot be reached right now. Please try again in a moment."
	case "upstream_timeout":
		return "The site's server took too long to answer. Please try again in a moment."
	case "unknown_site":
		return "This server does not serve that host name."
	}
	return "The site's server answered with an error."
}

var idSeq atomic.Uint64

// nextID returns a request id: process prefix and a counter, cheap and unique
// per node.
func (s *Server) nextID() string {
	var b [24]byte
	n := copy(b[:], s.idPrefix)
	return string(strconv.AppendUint(b[:n], idSeq.Add(1), 36))
}

// recorder remembers the status and size of a response. It unwraps for
// http.ResponseController, so flushing (SSE) and hijacking (websockets) reach
// the real writer.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 && code >= 200 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(p)
	r.bytes += int64(n)
	return n, err
}

func (r *recorder) Flush() { _ = http.NewResponseController(r.ResponseWriter).Flush() }

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func itoa(n int) string { return strconv.Itoa(n) }

// demoHeaders tells the demo upstream what the edge saw; only `edge demo`
// sends these.
func demoHeaders(h http.Header, r *http.Request, st *reqState) {
	h["X-Maat-Proto"] = []string{r.Proto}
	h["X-Maat-Client"] = []string{st.client.String()}
	_ = strings.ToLower
}

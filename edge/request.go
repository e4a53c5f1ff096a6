package edge

import (
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/maatproxy/maat/challenge"
	"github.com/maatproxy/maat/edge/internal/spill"
	"github.com/maatproxy/maat/edge/internal/upstream"
	"github.com/maatproxy/maat/fplog"
	"github.com/maatproxy/maat/geo"
	"github.com/maatproxy/maat/httpfp"
	"github.com/maatproxy/maat/tlsfp"
)

// reqState is what the edge knows and decided for one request; it travels
// to the reverse proxy's hooks in the request context.
type reqState struct {
	start       time.Time
	id          string
	peer        netip.Addr
	peerTrusted bool
	clientOK    bool // false: a trusted proxy named the client with garbage (forwarded.Proxies.Client)
	client      netip.Addr
	site        *site
	route       *route
	model       string         // the path as the most lenient common upstream reads it (urlpath)
	match       string         // model, folded when the route matches in any case: what guards decide on
	up          upstream.Route // what the upstream transport needs, on the request's context
	tls         *tlsfp.Fingerprint
	http        *httpfp.Fingerprint
	ja4         string  // the JA4 decisions use: the session's full handshake's (tlsfp.Fingerprint.JA4Session)
	cluster     string  // the client's cluster (clusterKey), for the upstream's line and the log
	pressure    float64 // the site's pressure when the policy judged the request
	priority    bool    // first in the upstream's line: a pass holder, a crawler the policy allows
	weight      int
	action      string
	dryRun      bool   // the site runs dry: action is what the policy would have done (dryRun)
	reason      string // why the edge answered itself with an error (reasons.go), for the log
	challenge   *fplog.Challenge
	rules       []string
	rulesBuf    [8]string
	status      int       // overrides the recorded status (499: the client left)
	upstreamErr error     // why the upstream exchange failed, for the log
	clientErr   error     // why reading the client's request failed
	geo         geo.Info  // the client's ASN and country, with geo databases
	rec         *recorder // the response, as the edge writes it
	demo        bool
	user        string       // the basic-auth user, once accepted
	hdrVals     [8]string    // the values of the headers rewrite adds
	recorder    recorder     // the response's, which rec points to
	out         http.Request // the upstream request of a common exchange (proxyCommon)
}

type stateKey struct{}

func stateOf(r *http.Request) *reqState {
	st, _ := r.Context().Value(stateKey{}).(*reqState)
	return st
}

func (st *reqState) siteName() string {
	if st == nil || st.site == nil {
		return "unknown"
	}
	return st.site.name
}

// newState reads what the connection and the request say about the client.
func (h *Handler) newState(r *http.Request) *reqState {
	st := &reqState{start: time.Now(), id: h.env.ids.next(), demo: h.cfg.Demo}
	st.peer = peerAddr(r.RemoteAddr)
	st.peerTrusted = h.trusted.Contains(st.peer)
	st.client, st.clientOK = h.trusted.Client(st.peer, r.Header["X-Forwarded-For"])
	if st.peerTrusted {
		// A trusted proxy in front named the request already: keep its ID,
		// so one request has one ID in every log.
		if id := r.Header.Get("X-Request-Id"); validRequestID(id) {
			st.id = id
		}
	}
	st.tls = tlsfp.FromContext(r.Context())
	if st.tls != nil {
		// A resumed session's hello has another JA4 than its full
		// handshake (pre_shared_key counts): the policy, its RATE buckets
		// and the client's cluster go by the full handshake's, so that
		// resuming changes no decision. The log and X-Maat-JA4 keep
		// FoxIO's JA4 of the connection's own hello.
		st.ja4 = st.tls.JA4Session
	}
	if fp, ok := httpfp.FromRequest(r); ok {
		st.http = fp
	} else if r.ProtoMajor == 3 {
		st.http = httpfp.NewH3Fingerprint(r, httpfp.Config{JA4H: h.cfg.Fingerprints.JA4H})
	}
	return st
}

// challengeClient is what a pass is bound to: the client's network, and
// its TLS stack as the session's full handshake showed it (so that a
// resumed session keeps its pass), with the stack's known family (so
// that a pass holds across TCP and QUIC for the same browser only).
func (st *reqState) challengeClient() challenge.Client {
	cl := challenge.Client{IP: st.client}
	if st.tls != nil {
		cl.JA4, cl.Family = st.tls.JA4Session, st.tls.Client.Family
	}
	return cl
}

// validRequestID accepts the request IDs proxies send: 1 to 128 printable
// ASCII characters without spaces or quotes.
func validRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// recorder remembers the status and size of a response. It unwraps for
// http.ResponseController, so flushing (SSE) and hijacking (websockets) reach
// the real writer.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
	// With dw set, each write must finish within writeTimeout
	// (limits.write_timeout): a client that stops reading is dropped. The
	// deadline is moved only when less than 7/8 of writeTimeout is left
	// of it: each write still has at least that long, and a response
	// written in many pieces does not move a timer for each.
	dw           deadlineWriter
	writeTimeout time.Duration
	deadline     time.Time // the write deadline set, zero before the first write
	// spill, when an upstream answers, is its body; a write that blocks
	// for spill.After() starts draining it ahead of the client.
	spill      *spill.Body
	spillTimer *time.Timer
}

// deadlineWriter is what net/http's HTTP/1 and HTTP/2 response writers
// offer http.ResponseController for write deadlines.
type deadlineWriter interface{ SetWriteDeadline(time.Time) error }

// armWrite makes sure the next write has at least 7/8 of writeTimeout.
func (r *recorder) armWrite() {
	if r.dw == nil {
		return
	}
	now := time.Now()
	if r.deadline.Sub(now) >= r.writeTimeout-r.writeTimeout/8 {
		return
	}
	r.deadline = now.Add(r.writeTimeout)
	_ = r.dw.SetWriteDeadline(r.deadline)
}

func (r *recorder) WriteHeader(code int) {
	if code == http.StatusContinue {
		// An upstream's 100 Continue (forwarded by ReverseProxy's client
		// trace or the upstream transport's Route.Info) always comes after
		// the edge began to read the body (prebuffer), when net/http's
		// HTTP/1.1 and HTTP/2 servers sent their own: the client would get
		// two. Other 1xx (103 Early Hints) pass.
		return
	}
	if r.status == 0 && code >= 200 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	r.armWrite()
	if sb := r.spill; sb != nil {
		if r.spillTimer == nil {
			r.spillTimer = time.AfterFunc(sb.After(), sb.Drain)
		} else {
			r.spillTimer.Reset(sb.After())
		}
		defer r.spillTimer.Stop()
	}
	n, err := r.ResponseWriter.Write(p)
	r.bytes += int64(n)
	return n, err
}

func (r *recorder) Flush() {
	r.armWrite()
	_ = http.NewResponseController(r.ResponseWriter).Flush()
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// finish writes the access and fingerprint log lines and the metrics of a
// request.
func (h *Handler) finish(st *reqState, rec *recorder, r *http.Request) {
	status := rec.status
	if st.status != 0 {
		status = st.status
	}
	h.env.metrics.requests.WithLabelValues(st.siteName(), st.action, protoLabel(r.ProtoMajor)).Inc()
	h.record(st)
	if st.site != nil && st.site.access != nil {
		st.site.access.Write(&fplog.AccessRecord{
			Time: st.start, RequestID: st.id, RemoteIP: st.client, User: st.user, Method: r.Method, URI: r.RequestURI,
			Proto: r.Proto, Status: status, Bytes: rec.bytes, Referer: r.Referer(), UserAgent: r.UserAgent(),
			Host: r.Host, Duration: time.Since(st.start),
		})
	}
	if h.env.FPLog == nil {
		return
	}
	line := fplog.Record{
		Time:      st.start,
		RequestID: st.id,
		RemoteIP:  st.client,
		ASN:       st.geo.ASN,
		ASOrg:     st.geo.ASOrg,
		Country:   st.geo.Country,
		Host:      r.Host,
		Method:    r.Method,
		Path:      r.URL.Path,
		Proto:     r.Proto,
		UserAgent: r.UserAgent(),
		Cluster:   st.cluster,
		Pressure:  st.pressure,
		Weight:    st.weight,
		Rules:     st.rules,
		Action:    st.action,
		DryRun:    st.dryRun,
		Reason:    st.reason,
		Challenge: st.challenge,
		Status:    status,
		Bytes:     rec.bytes,
		Duration:  time.Since(st.start),
	}
	if f := st.tls; f != nil {
		line.TLSVersion, line.SNI, line.ALPN = f.TLSVersion, f.SNI, f.ALPN
		line.JA4 = f.JA4
		if f.JA4Session != f.JA4 {
			line.JA4Session = f.JA4Session
		}
		line.JA4R, line.JA4O, line.JA4RO = f.JA4R, f.JA4O, f.JA4RO
		line.ClientFamily = f.Client.Family
	}
	line.Resumed = r.TLS != nil && r.TLS.DidResume
	if hf := st.http; hf != nil {
		line.HFP, line.HFPR, line.H2FP = hf.HFP, hf.HFPR, hf.H2FP
		if h.cfg.Fingerprints.JA4H {
			line.JA4H = hf.JA4H
		}
	}
	h.env.FPLog.Write(&line)
}

func protoLabel(major int) string {
	switch major {
	case 3:
		return "h3"
	case 2:
		return "h2"
	}
	return "h1"
}

// demoHeaders tells the demo upstream what the edge saw; only `edge demo`
// sends these (DESIGN.md's contract headers are sent always).
func demoHeaders(h http.Header, r *http.Request, st *reqState) {
	h["X-Maat-Proto"] = []string{r.Proto}
	h["X-Maat-Client"] = []string{st.client.String()}
	if st.tls != nil {
		h["X-Maat-Tls-Version"] = []string{st.tls.TLSVersion}
		if st.tls.Client.Family != "" {
			h["X-Maat-Family"] = []string{st.tls.Client.Family + " " + st.tls.Client.Versions}
		}
	}
	if st.http != nil {
		h["X-Maat-Hfp"] = []string{st.http.HFP}
		h["X-Maat-Header-Order"] = []string{strings.Join(st.http.Names, ", ")}
		if st.http.H2FP != "" {
			h["X-Maat-H2fp"] = []string{st.http.H2FP}
		}
	}
	if len(st.rules) > 0 {
		h["X-Maat-Rules"] = []string{strings.Join(st.rules, ", ")}
	}
}

// peerAddr parses http.Request.RemoteAddr ("ip:port").
func peerAddr(remote string) netip.Addr {
	if ap, err := netip.ParseAddrPort(remote); err == nil {
		return ap.Addr().Unmap()
	}
	a, _ := netip.ParseAddr(remote)
	return a.Unmap()
}

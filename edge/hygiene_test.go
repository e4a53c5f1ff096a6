package edge

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/maatproxy/maat/httpfp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"golang.org/x/crypto/bcrypt"
)

// hygieneSite is the configuration the hygiene tests run against: basic
// auth on /admin/, a prefix redirect, and the raw upstream behind both.
func hygieneSite(up string) string {
	hash, _ := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	return fmt.Sprintf(`
policy: ""
sites:
  - hosts: [localhost]
    upstream: %[1]s
    compress: false
    redirects:
      - { from: /old/, to: / }
      - { from: /away/, to: "https://example.org/" }
    routes:
      - path: /admin/
        upstream: %[1]s
        basic_auth: { users: { alice: %[2]q } }
`, up, hash)
}

// TestBasicAuthCannotBeWalkedAround: every spelling of a path under a
// protected route asks for the password, and with it the upstream gets the
// one normalized path.
func TestBasicAuthCannotBeWalkedAround(t *testing.T) {
	t.Parallel()
	up := newRawUpstream(t)
	h := newTestHandler(t, hygieneSite(up.URL))
	for _, p := range []string{
		"/admin/secret", "//admin/secret", "/x/../admin/secret", "/./admin/secret", "/%2e/admin/secret",
		"/%2E%2E/admin/secret", "///admin//secret", "/%61dmin/secret", "/admin/./secret", "/admin%2Fsecret",
		"/x/%2e%2e/admin/secret",
	} {
		t.Run(p, func(t *testing.T) { // not parallel: the counts below follow
			w := serveRaw(t, h, "GET "+p+" HTTP/1.1\r\nHost: localhost\r\nUser-Agent: Go-http-client/1.1\r\n\r\n")
			if w.Code != http.StatusUnauthorized {
				t.Fatalf("without a password: %d %q, want 401", w.Code, w.Body)
			}
			w = serveRaw(t, h, "GET "+p+" HTTP/1.1\r\nHost: localhost\r\nUser-Agent: Go-http-client/1.1\r\nAuthorization: Basic YWxpY2U6cHc=\r\n\r\n")
			if w.Code != http.StatusOK {
				t.Fatalf("with the password: %d %q", w.Code, w.Body)
			}
		})
	}
	for _, head := range up.heads() {
		line := requestLine(head)
		if line != "GET /admin/secret HTTP/1.1" && line != "GET /admin%2Fsecret HTTP/1.1" {
			t.Errorf("the upstream got %q", line)
		}
	}
	if n := len(up.heads()); n != 11 {
		t.Errorf("the upstream got %d requests, want 11 (one per authorized spelling)", n)
	}
}

// TestBadPathsRefused: what cannot be normalized, or would decode into a
// path other than the one the routes saw, is a 400 that never reaches the
// upstream.
func TestBadPathsRefused(t *testing.T) {
	t.Parallel()
	up := newRawUpstream(t)
	h := newTestHandler(t, hygieneSite(up.URL))
	for _, p := range []string{
		"/old/%2Fevil.example", "/%2F%2Fevil.example", "/a%2F..%2Fadmin/secret", "/a/%2F/b", "/x%2F.%2Fy",
		"/old/\\evil.example", "/a%00b", "/a%0d%0aSet-Cookie:x",
	} {
		t.Run(p, func(t *testing.T) { // not parallel: the count below follows
			w := serveRaw(t, h, "GET "+p+" HTTP/1.1\r\nHost: localhost\r\n\r\n")
			if w.Code != http.StatusBadRequest {
				t.Errorf("%d %q, want 400", w.Code, w.Body)
			}
		})
	}
	if n := len(up.heads()); n != 0 {
		t.Errorf("the upstream got %d requests: %q", n, up.heads())
	}
}

// TestRedirectsStayOnSite: no path turns a prefix redirect into a
// scheme-relative, backslash or header-splitting Location.
func TestRedirectsStayOnSite(t *testing.T) {
	t.Parallel()
	up := newRawUpstream(t)
	h := newTestHandler(t, hygieneSite(up.URL))
	for _, tt := range []struct{ path, want string }{
		{"/old/page", "/page"},
		{"/old//evil.example", "/evil.example"},
		{"/old/..//evil.example", ""}, // → "/evil.example": not under /old/ at all
		{"/old/%09/evil.example", ""}, // a control character: 400
		{"/old/https:evil.example", "/https:evil.example"},
		{"/old/javascript:alert(1)", "/javascript:alert%281%29"},
		{"/old/%2e%2e/%2e%2e//evil.example", ""},
		{"/old/x?a=//evil.example", "/x?a=//evil.example"},
		{"/away/x", "https://example.org/x"},
		{"/away//evil.example", "https://example.org/evil.example"},
	} {
		t.Run(tt.path, func(t *testing.T) {
			t.Parallel()
			w := serveRaw(t, h, "GET "+tt.path+" HTTP/1.1\r\nHost: localhost\r\nUser-Agent: Go-http-client/1.1\r\n\r\n")
			loc := w.Header().Get("Location")
			if tt.want == "" {
				if w.Code/100 == 3 {
					t.Fatalf("redirected to %q", loc)
				}
				return
			}
			if w.Code != http.StatusMovedPermanently || loc != tt.want {
				t.Fatalf("%d to %q, want 301 to %q", w.Code, loc, tt.want)
			}
			u, err := url.Parse(loc)
			if err != nil || (u.Host != "" && u.Host != "example.org") || strings.HasPrefix(loc, "//") || strings.ContainsAny(loc, "\\\r\n") {
				t.Errorf("Location %q leaves the site", loc)
			}
		})
	}
}

func TestSafeLocation(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want string }{
		{"/a", "/a"},
		{"//evil.example", "/evil.example"},
		{"/\\evil.example", "/evil.example"},
		{"\\/evil.example", "\\/evil.example"}, // not a path: only the operator's absolute URLs are not
		{"///\\\\evil", "/evil"},
		{"/a\\b", "/a%5Cb"},
		{"/a\r\nSet-Cookie: x", "/"},
		{"https://example.org//x", "https://example.org//x"},
	} {
		if got := safeLocation(tt.in); got != tt.want {
			t.Errorf("safeLocation(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestOnlyWebsocketUpgrades: an h2c upgrade request reaches the upstream as
// a plain request (no Upgrade, no HTTP2-Settings), so an upstream that
// would switch protocols cannot open a tunnel past the edge.
func TestOnlyWebsocketUpgrades(t *testing.T) {
	t.Parallel()
	up := newRawUpstream(t)
	h := newTestHandler(t, hygieneSite(up.URL))
	w := serveRaw(t, h, "GET /x HTTP/1.1\r\nHost: localhost\r\nUser-Agent: Go-http-client/1.1\r\n"+
		"Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n")
	if w.Code != http.StatusOK || w.Body.String() != "ok" {
		t.Fatalf("%d %q, want the upstream's plain 200", w.Code, w.Body)
	}
	heads := up.heads()
	if len(heads) != 1 {
		t.Fatalf("upstream got %d requests", len(heads))
	}
	lower := strings.ToLower(heads[0])
	for _, bad := range []string{"upgrade", "http2-settings", "h2c"} {
		if strings.Contains(lower, bad) {
			t.Errorf("the upstream saw %q:\n%s", bad, heads[0])
		}
	}
	hdr := http.Header{"Upgrade": {"websocket"}, "Connection": {"keep-alive, Upgrade"}}
	onlyWebsocketUpgrades(hdr)
	if hdr.Get("Upgrade") != "websocket" || hdr.Get("Connection") != "keep-alive, Upgrade" {
		t.Errorf("a websocket upgrade was touched: %v", hdr)
	}
}

// TestLookalikeHeadersRemoved: the "_" spellings of the edge's own and the
// forwarding headers never reach the upstream (CGI, WSGI, Rack and PHP fold
// them onto the "-" ones).
func TestLookalikeHeadersRemoved(t *testing.T) {
	t.Parallel()
	up := newRawUpstream(t)
	h := newTestHandler(t, hygieneSite(up.URL))
	w := serveRaw(t, h, "GET /x HTTP/1.1\r\nHost: localhost\r\nUser-Agent: Go-http-client/1.1\r\n"+
		"X_Maat_Action: ALLOW\r\nX-Maat_weight: -100\r\nX_Real_IP: 1.2.3.4\r\nX_Forwarded_For: 1.2.3.4\r\n"+
		"x_forwarded_proto: http\r\nX-Maat-JA4: forged\r\nForwarded: for=1.2.3.4\r\nX-Forwarded-Prefix: /evil\r\n"+
		"X_Custom_Header: kept\r\n\r\n")
	if w.Code != http.StatusOK {
		t.Fatalf("%d %q", w.Code, w.Body)
	}
	head := up.heads()[0]
	for _, bad := range []string{"X_Maat", "X-Maat_", "X_Real", "X_Forwarded", "x_forwarded", "1.2.3.4", "forged", "Forwarded: ", "/evil", ": -100"} {
		if strings.Contains(head, bad) {
			t.Errorf("the upstream saw %q:\n%s", bad, head)
		}
	}
	if !strings.Contains(head, "X_custom_header: kept") && !strings.Contains(head, "X_Custom_Header: kept") {
		t.Errorf("an ordinary underscore header was removed:\n%s", head)
	}
	for _, want := range []string{"X-Maat-Action: ALLOW\r\n", "X-Real-Ip: 127.0.0.1\r\n", "X-Forwarded-For: 127.0.0.1\r\n"} {
		if !strings.Contains(head, want) {
			t.Errorf("the upstream did not get %q:\n%s", want, head)
		}
	}
}

// TestFailoverSendsTheSameRequest: a retry on the next address after a
// refused connection is byte for byte the request the first try would have
// sent: one base path, header rules applied once, a trusted proxy's
// X-Forwarded-For extended once.
func TestFailoverSendsTheSameRequest(t *testing.T) {
	t.Parallel()
	up := newRawUpstream(t)
	dead := deadAddr(t)
	h := newTestHandler(t, fmt.Sprintf(`
policy: ""
trusted_proxies: [127.0.0.0/8]
sites:
  - hosts: [localhost]
    compress: false
    upstream: [http://%s/base, %s/base]
    headers: { request: { add: { X-Added: one } } }
`, dead, up.URL))
	for i := range 3 { // the first request meets the dead address first
		w := serveRaw(t, h, "GET /x?q=1 HTTP/1.1\r\nHost: localhost\r\nUser-Agent: Go-http-client/1.1\r\nX-Forwarded-For: 203.0.113.9\r\n\r\n")
		if w.Code != http.StatusOK {
			t.Fatalf("request %d: %d %q", i, w.Code, w.Body)
		}
	}
	heads := up.heads()
	if len(heads) != 3 {
		t.Fatalf("the live upstream got %d requests", len(heads))
	}
	for _, head := range heads {
		if line := requestLine(head); line != "GET /base/x?q=1 HTTP/1.1" {
			t.Errorf("request line %q", line)
		}
		if n := strings.Count(head, "X-Added: one"); n != 1 {
			t.Errorf("X-Added appears %d times:\n%s", n, head)
		}
		if !strings.Contains(head, "X-Forwarded-For: 203.0.113.9, 127.0.0.1\r\n") {
			t.Errorf("X-Forwarded-For:\n%s", head)
		}
	}
	if heads[0] != heads[1] && stripID(heads[0]) != stripID(heads[1]) {
		t.Errorf("the retried request differs from a first try:\n%s\n%s", heads[0], heads[1])
	}
}

// stripID drops the X-Request-Id line, which differs per request.
func stripID(head string) string {
	var b strings.Builder
	for line := range strings.SplitSeq(head, "\r\n") {
		if !strings.HasPrefix(line, "X-Request-Id:") {
			b.WriteString(line + "\r\n")
		}
	}
	return b.String()
}

// deadAddr returns a loopback address that refuses connections, as an
// upstream that is down does: nothing can listen on port 0.
func deadAddr(testing.TB) string { return "127.0.0.1:0" }

// hygieneAttacks are paths that try to walk around basic auth and the
// prefix redirect, and the status each must get.
func hygieneAttacks() []struct {
	path   string
	status int
} {
	return []struct {
		path   string
		status int
	}{
		{"//admin/secret", 401}, {"/x/../admin/secret", 401}, {"/%2e/admin/secret", 401},
		{"/old/%2Fevil.example", 400}, {"/old//evil.example", 301},
	}
}

// checkHygieneUpstream fails t if a forged or upgrade header reached up.
func checkHygieneUpstream(t *testing.T, up *rawUpstream) {
	t.Helper()
	for _, head := range up.heads() {
		if strings.Contains(strings.ToLower(head), "x_maat") || strings.Contains(strings.ToLower(head), "upgrade") {
			t.Errorf("the upstream saw:\n%s", head)
		}
	}
}

// TestHygieneOverProtocols sends the same attacks as HTTP/1.1 (raw) and
// HTTP/2 requests reach the Handler; TestHygieneThroughEdge sends them
// over HTTP/3 through a real edge.
func TestHygieneOverProtocols(t *testing.T) {
	t.Parallel()
	up := newRawUpstream(t)
	h := newTestHandler(t, hygieneSite(up.URL))
	t.Run("h1", func(t *testing.T) {
		for _, p := range hygieneAttacks() {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, tlsRequest(t, "GET "+p.path+" HTTP/1.1\r\nHost: localhost\r\nUser-Agent: Go-http-client/1.1\r\n"+
				"Connection: Upgrade, close\r\nUpgrade: h2c\r\nX_Maat_Action: ALLOW\r\n\r\n"))
			if w.Code != p.status {
				t.Errorf("%s: %d, want %d", p.path, w.Code, p.status)
			}
			if loc := w.Header().Get("Location"); strings.HasPrefix(loc, "//") {
				t.Errorf("%s: Location %q", p.path, loc)
			}
		}
	})
	t.Run("h2", func(t *testing.T) {
		hygieneOverClient(t, handlerClient(h, "h2"), handlerURL("/"))
	})
	checkHygieneUpstream(t, up)
}

// hygieneOverClient sends the attacks with c, to base's host, each path
// as it is written.
func hygieneOverClient(t *testing.T, c *http.Client, base string) {
	t.Helper()
	for _, p := range hygieneAttacks() {
		req, _ := http.NewRequest("GET", base, nil)
		req.URL.Path, _ = url.PathUnescape(p.path)
		req.URL.RawPath = p.path // sent as is
		req.Host = "localhost"
		req.Header.Set("User-Agent", "Go-http-client/1.1")
		req.Header.Set("X_Maat_Action", "ALLOW")
		res, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", p.path, err)
		}
		res.Body.Close()
		if res.StatusCode != p.status {
			t.Errorf("%s: %d, want %d", p.path, res.StatusCode, p.status)
		}
	}
}

// TestHygieneThroughEdge sends the attacks through a real edge over
// HTTP/3, whose server hands the Handler its requests by its own path.
func TestHygieneThroughEdge(t *testing.T) {
	t.Parallel()
	up := newRawUpstream(t)
	e := startEdge(t, hygieneSite(up.URL))
	hygieneOverClient(t, e.client(t, "h3"), e.url("/"))
	checkHygieneUpstream(t, up)
}

// rawTLSRequest writes raw request bytes to the edge over TLS (HTTP/1.1)
// and reads one response.
func rawTLSRequest(t testing.TB, e *testEdge, raw string) *http.Response {
	t.Helper()
	c, err := tls.Dial("tcp", e.Addrs().HTTPS, e.tlsConfig("http/1.1"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res
}

// TestClientErrorsAreTheClients: a malformed chunked body is the client's
// 400 and a client that leaves mid-body is logged 499; neither is counted
// or logged as the upstream's failure.
func TestClientErrorsAreTheClients(t *testing.T) {
	t.Parallel()
	up := newRawUpstream(t)
	fp := filepath.Join(t.TempDir(), "fp.jsonl")
	h := newTestHandler(t, "log: {fingerprints: "+fp+"}\nsites: [{hosts: [localhost], upstream: "+up.URL+"}]\n")
	m := h.env.metrics

	w := httptest.NewRecorder()
	h.ServeHTTP(w, tlsRequest(t, "POST /chunks HTTP/1.1\r\nHost: localhost\r\nUser-Agent: Go-http-client/1.1\r\n"+
		"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n5\r\nhello\r\nzz\r\nxx\r\n0\r\n\r\n"))
	if w.Code != http.StatusBadRequest {
		t.Errorf("bad chunk size: %d, want 400", w.Code)
	}
	if l := waitLine(t, fp, "/chunks"); l["status"] != float64(400) {
		t.Errorf("logged status %v, want 400", l["status"])
	}

	// The body ends, short of its Content-Length, where the client closed
	// its connection; net/http's connection reader then ends the request's
	// context as the read fails.
	r := tlsRequest(t, "POST /gone HTTP/1.1\r\nHost: localhost\r\nUser-Agent: Go-http-client/1.1\r\nContent-Length: 1000\r\n\r\nonly a few bytes")
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	r = r.WithContext(ctx)
	r.Body = &goneBody{ReadCloser: r.Body, cancel: cancel}
	h.ServeHTTP(httptest.NewRecorder(), r)
	if l := waitLine(t, fp, "/gone"); l["status"] != float64(499) {
		t.Errorf("a client that left: logged status %v, want 499", l["status"])
	}
	if n := seriesCount(m.upErrors); n != 0 {
		t.Errorf("%d upstream error series; client errors were blamed on the upstream", n)
	}
	if v := counterValue(m.clientErrors.WithLabelValues("localhost", "bad_request_body")); v != 1 {
		t.Errorf("client errors (bad body) = %v, want 1", v)
	}
	if v := counterValue(m.clientErrors.WithLabelValues("localhost", "client_gone")); v != 1 {
		t.Errorf("client errors (gone) = %v, want 1", v)
	}
}

// goneBody is the body of a client whose connection closed: as net/http's
// connection reader does, a failed read ends the request's context.
type goneBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *goneBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		b.cancel()
	}
	return n, err
}

// TestHTTP1RequestsCarryTLS: over HTTP/1.1 as over HTTP/2 the request knows
// it came over TLS: the policy sees it (a browser that claims HTTP/2 but
// speaks HTTP/1.1 over TLS fires proto_mismatch) and the upstream is told
// https.
func TestHTTP1RequestsCarryTLS(t *testing.T) {
	t.Parallel()
	up := newRawUpstream(t)
	e, fp := startLoggingEdge(t, up.URL)
	res := rawTLSRequest(t, e, "GET /tls1 HTTP/1.1\r\nHost: localhost\r\nUser-Agent: "+chromeUA+"\r\nConnection: close\r\n\r\n")
	if res.StatusCode == 0 {
		t.Fatal("no answer")
	}
	if rules := waitLine(t, fp, "/tls1").rules(); !slices.Contains(rules, "proto_mismatch") {
		t.Errorf("rules %v: proto_mismatch did not fire over HTTP/1.1 and TLS", rules)
	}
	res = rawTLSRequest(t, e, "GET /tls2 HTTP/1.1\r\nHost: localhost\r\nUser-Agent: Go-http-client/1.1\r\nConnection: close\r\n\r\n")
	if res.StatusCode != 200 {
		t.Fatalf("curl: %d", res.StatusCode)
	}
	heads := up.heads()
	if len(heads) == 0 || !strings.Contains(heads[len(heads)-1], "X-Forwarded-Proto: https\r\n") {
		t.Errorf("the upstream was not told https: %q", heads)
	}
}

// counterValue reads a counter.
func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

// seriesCount counts the series a collector has.
func seriesCount(c prometheus.Collector) int {
	ch := make(chan prometheus.Metric, 64)
	go func() { c.Collect(ch); close(ch) }()
	n := 0
	for range ch {
		n++
	}
	return n
}

// TestRefusedMethods: TRACE, TRACK and CONNECT get 405 with Allow from the
// handler on every protocol, HTTP/1.1's with Connection: close, before the
// site is looked up; GET and OPTIONS do not.
func TestRefusedMethods(t *testing.T) {
	t.Parallel()
	up := newRawUpstream(t)
	h := newTestHandler(t, "policy: \"\"\nsites: [{hosts: [localhost], upstream: "+up.URL+"}]\n")
	for _, proto := range []string{"h1", "h2", "h3"} {
		c := handlerClient(h, proto)
		for _, tt := range []struct {
			method string
			status int
		}{
			{"TRACE", 405}, {"TRACK", 405}, {"CONNECT", 405}, {"GET", 200}, {"OPTIONS", 200},
		} {
			req, _ := http.NewRequest(tt.method, handlerURL("/m"), nil)
			res, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != tt.status {
				t.Errorf("%s %s: %d, want %d", proto, tt.method, res.StatusCode, tt.status)
			}
			if tt.status == 405 {
				if res.Header.Get("Allow") != allowedMethods {
					t.Errorf("%s %s: Allow %q", proto, tt.method, res.Header.Get("Allow"))
				}
				if close := res.Header.Get("Connection") == "close"; close != (proto == "h1") {
					t.Errorf("%s %s: Connection %q", proto, tt.method, res.Header.Get("Connection"))
				}
			}
		}
	}
	for _, head := range up.heads() {
		if m, _, _ := strings.Cut(head, " "); m != "GET" && m != "OPTIONS" {
			t.Errorf("the upstream got %q", requestLine(head))
		}
	}
}

// TestAmbiguousLength: the tap's mark decides on HTTP/1; without a capture
// on a tapped connection, a chunked request is refused; without a tap (a
// handler served directly) and on HTTP/2 and HTTP/3 nothing is.
func TestAmbiguousLength(t *testing.T) {
	t.Parallel()
	tapped := httpfp.NewContext(context.Background(), httpfp.NewConn(nil, httpfp.H1, httpfp.Config{}))
	for _, tt := range []struct {
		name    string
		major   int
		chunked bool
		fp      *httpfp.Fingerprint
		tapped  bool
		want    bool
	}{
		{"marked", 1, true, &httpfp.Fingerprint{AmbiguousLength: true}, true, true},
		{"marked, HTTP/1.0 (no chunked)", 1, false, &httpfp.Fingerprint{AmbiguousLength: true}, true, true},
		{"not marked", 1, true, &httpfp.Fingerprint{}, true, false},
		{"no capture, chunked", 1, true, nil, true, true},
		{"no capture, not chunked", 1, false, nil, true, false},
		{"no tap", 1, true, nil, false, false},
		{"HTTP/2", 2, false, nil, true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest("POST", "/", nil)
			r.ProtoMajor = tt.major
			if tt.chunked {
				r.TransferEncoding = []string{"chunked"}
			}
			if tt.tapped {
				r = r.WithContext(tapped)
			}
			if got := ambiguousLength(r, tt.fp); got != tt.want {
				t.Errorf("ambiguousLength = %v, want %v", got, tt.want)
			}
		})
	}
}

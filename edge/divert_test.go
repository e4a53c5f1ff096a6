package edge

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// tarpit stands in for iocaine or Nepenthes: it answers slowly and without
// end, and records what it was asked.
type tarpit struct {
	*httptest.Server
	hosts             sync.Map // Host headers seen
	inflight, maxSeen atomic.Int64
}

func newTarpit(t *testing.T) *tarpit { return newGatedTarpit(t, nil) }

// newGatedTarpit is a tarpit whose answers, when gate is not nil, hold
// after their first line until gate closes: the test decides when the
// flood it holds moves on.
func newGatedTarpit(t *testing.T, gate <-chan struct{}) *tarpit {
	tp := &tarpit{}
	tp.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tp.hosts.Store(r.Host, true)
		raise(&tp.maxSeen, tp.inflight.Add(1))
		defer tp.inflight.Add(-1)
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, "<p>tarpit page for "+r.URL.Path+"</p>")
		if gate != nil {
			http.NewResponseController(w).Flush()
			select {
			case <-gate:
			case <-r.Context().Done():
				return
			}
		}
		for r.Context().Err() == nil { // garbage, slowly, forever
			if _, err := io.WriteString(w, strings.Repeat("lorem ", 50)); err != nil {
				return
			}
			http.NewResponseController(w).Flush()
			time.Sleep(20 * time.Millisecond)
		}
	}))
	t.Cleanup(tp.Close)
	return tp
}

// divertSite is the configuration the divert tests run against: a DIVERT
// rule sends GPTBot to tp, bounded by max_concurrent 5, max_bytes 4000 and
// max_duration 2s, and logs to fp; everyone else reaches the site, which
// reports on sawBot whether a GPTBot request ever reached it.
func divertSite(t *testing.T, tp *tarpit, fp string) (yamlText string, sawBot *atomic.Bool) {
	t.Helper()
	sawBot = new(atomic.Bool)
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.UserAgent(), "GPTBot") {
			sawBot.Store(true)
		}
		_, _ = io.WriteString(w, "the site")
	}))
	t.Cleanup(site.Close)
	pol := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(pol, []byte(`bots:
  - {name: ai-to-tarpit, user_agent_regex: GPTBot, action: DIVERT, divert_to: tarpit}
  - {name: everyone, path_regex: ., action: ALLOW}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	return "policy: " + pol + "\nlog: {fingerprints: " + fp + "}\n" +
		"divert: {tarpit: {upstream: " + tp.URL + ", max_concurrent: 5, max_bytes: 4000, max_duration: 2s}}\n" +
		"sites: [{hosts: [localhost], upstream: " + site.URL + ", compress: false}]\n", sawBot
}

// TestDivertToTarpit: a DIVERT rule sends GPTBot, unseen, to the tarpit
// with the site's Host; the site's upstream never sees it; the diverted
// answer is cut at max_bytes, logged DIVERT and counted.
func TestDivertToTarpit(t *testing.T) {
	t.Parallel()
	tp := newTarpit(t)
	fp := filepath.Join(t.TempDir(), "fp.jsonl")
	site, siteSawBot := divertSite(t, tp, fp)
	h := newTestHandler(t, site)
	c := handlerClient(h, "h2")

	res, body := get(t, c, handlerURL("/article"), "User-Agent", gptUA)
	if res.StatusCode != 200 || !strings.HasPrefix(body, "<p>tarpit page for /article</p>") || len(body) > 4000 {
		t.Errorf("diverted: %d, %d bytes %.60q", res.StatusCode, len(body), body)
	}
	if _, ok := tp.hosts.Load("localhost"); !ok {
		t.Error("the tarpit did not get the site's Host")
	}
	if l := waitLine(t, fp, "/article"); l.str("action") != "DIVERT" {
		t.Errorf("logged action %s, want DIVERT", l.str("action"))
	}
	if v := counterValue(h.env.metrics.diverted.WithLabelValues("tarpit")); v < 1 {
		t.Errorf("diverted counted %v times", v)
	}
	if res, body := get(t, c, handlerURL("/honest"), "User-Agent", "Go-http-client/1.1"); res.StatusCode != 200 || body != "the site" {
		t.Errorf("honest request: %d %q", res.StatusCode, body)
	}
	if siteSawBot.Load() {
		t.Error("the site's upstream saw a diverted request")
	}
}

// TestDivertFloodBounded: under a flood of diverted requests, each answer
// is cut at max_bytes; beyond max_concurrent the request is denied; honest
// requests are not held back meanwhile: they are served while the flood
// holds every one of the tarpit's slots. It is a limit, so it stays end to
// end: the HTTP/2 connections pace the clients as in production (in
// memory, 200 deny pages at once only measure the CPU).
//
// The tarpit holds its answers until the honest requests are done (its
// gate), and max_duration is a minute here, so that nothing but the
// edge's own limits decides what happens on a loaded machine; max_duration
// has its own tests (TestDivertMaxDuration, …ThroughEdge).
func TestDivertFloodBounded(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	var closeGate sync.Once
	defer closeGate.Do(func() { close(gate) }) // before the servers' Cleanup closes
	tp := newGatedTarpit(t, gate)
	site, siteSawBot := divertSite(t, tp, filepath.Join(t.TempDir(), "fp.jsonl"))
	site = strings.Replace(site, "max_duration: 2s", "max_duration: 1m", 1)
	e := startEdge(t, site)
	c := e.client(t, "h2")

	// The bound is what the edge holds: its connections to the tarpit,
	// counted from dial to Close. The tarpit's own count lags behind the
	// edge's closes (it notices a closed connection when it next reads or
	// writes), so under load it can see more at once than the edge holds.
	var held, maxHeld atomic.Int64
	tr := e.Handler().diverts["tarpit"].transport
	dial := tr.DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		raise(&maxHeld, held.Add(1))
		return &countedConn{Conn: conn, release: func() { held.Add(-1) }}, nil
	}

	// 200 scrapers at once, on their own connections; honest clients on
	// theirs.
	const n, maxConcurrent, maxBytes = 200, 5, 4000
	flood := e.client(t, "h2")
	flood.Timeout = 2 * time.Minute // bounds a hang only: the tarpit holds answers until the gate opens
	var wg sync.WaitGroup
	var tarpitted, denied atomic.Int64
	var other sync.Map // anything else: status or error, for the report
	for i := range n {
		wg.Go(func() {
			req, _ := http.NewRequest("GET", e.url(fmt.Sprint("/flood/", i)), nil)
			req.Host = "localhost"
			req.Header.Set("User-Agent", gptUA)
			res, err := flood.Do(req)
			if err != nil {
				other.Store(i, err.Error())
				return
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			switch {
			case res.StatusCode == 200 && strings.Contains(string(b), "tarpit page") && len(b) <= maxBytes:
				tarpitted.Add(1)
			case res.StatusCode == 403:
				denied.Add(1)
			default:
				other.Store(i, fmt.Sprintf("%d, %d bytes %.80q", res.StatusCode, len(b), b))
			}
		})
	}
	// The flood holds every slot, and the rest of it was denied.
	if !waitFor(t, 30*time.Second, func() bool {
		return tp.inflight.Load() == maxConcurrent && denied.Load() == n-maxConcurrent
	}) {
		t.Errorf("the tarpit holds %d answers, %d requests denied; want %d and %d", tp.inflight.Load(), denied.Load(), maxConcurrent, n-maxConcurrent)
	}
	// Honest requests while it does.
	for range 10 {
		if res, body := get(t, c, e.url("/honest"), "User-Agent", "Go-http-client/1.1"); res.StatusCode != 200 || body != "the site" {
			t.Errorf("honest request during the flood: %d %q", res.StatusCode, body)
		}
	}
	if h, in := held.Load(), tp.inflight.Load(); h != maxConcurrent || in != maxConcurrent {
		t.Errorf("after the honest requests the edge holds %d connections to the tarpit, which holds %d answers; want the flood still holding %d: honest requests waited for it",
			h, in, maxConcurrent)
	}
	closeGate.Do(func() { close(gate) })
	wg.Wait()
	if m := maxHeld.Load(); m > maxConcurrent || tp.maxSeen.Load() == 0 {
		t.Errorf("the edge held %d connections to the tarpit at once, want at most max_concurrent %d (the tarpit saw %d)", m, maxConcurrent, tp.maxSeen.Load())
	}
	if tarpitted.Load()+denied.Load() != n || denied.Load() == 0 {
		other.Range(func(k, v any) bool { t.Logf("request %v: %v", k, v); return true })
		t.Errorf("%d tarpitted (cut at %d bytes), %d denied of %d", tarpitted.Load(), maxBytes, denied.Load(), n)
	}
	if siteSawBot.Load() {
		t.Error("the site's upstream saw a diverted request")
	}
}

// TestDenyAndReroute: Anubis's DENY_AND_REROUTE file behaves as in Anubis:
// the matched client is redirected to reroute_to.
func TestDenyAndReroute(t *testing.T) {
	t.Parallel()
	site := echoUpstream(t, "site")
	h := newTestHandler(t, "policy: ../policy/testdata/good/anubis-deny-and-reroute.yaml\nsites: [{hosts: [localhost], upstream: "+site.URL+"}]\n")
	res, _ := get(t, handlerClient(h, "h2"), handlerURL("/x"), "User-Agent", gptUA)
	if res.StatusCode != http.StatusTemporaryRedirect || res.Header.Get("Location") != "https://example.com/tarpit" {
		t.Errorf("%d to %q, want 307 to https://example.com/tarpit", res.StatusCode, res.Header.Get("Location"))
	}
}

// divertPolicy writes a policy that diverts GPTBot to the target tarpit
// and lets everyone else through.
func divertPolicy(t *testing.T) string {
	return writePolicy(t, "policy.yaml", `bots:
  - {name: ai-to-tarpit, user_agent_regex: GPTBot, action: DIVERT, divert_to: tarpit}
  - {name: everyone, path_regex: ., action: ALLOW}
`)
}

// tricklingTarpit sends a byte every 25ms until its request is cancelled,
// and then says on ended whether it was.
func tricklingTarpit(t *testing.T) (url string, ended <-chan error) {
	t.Helper()
	ch := make(chan error, 1) // the tarpit's request context, when its handler returns
	tp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { ch <- r.Context().Err() }()
		w.Header().Set("Content-Type", "text/plain")
		for r.Context().Err() == nil {
			if _, err := io.WriteString(w, "x"); err != nil {
				return
			}
			http.NewResponseController(w).Flush()
			select {
			case <-r.Context().Done():
			case <-time.After(25 * time.Millisecond):
			}
		}
	}))
	t.Cleanup(tp.Close)
	return tp.URL, ch
}

// divertMaxDurationSite diverts GPTBot to tarpit, with max_duration 500ms
// and max_bytes far beyond what the trickle reaches in that time.
func divertMaxDurationSite(t *testing.T, tarpit string) string {
	t.Helper()
	site := echoUpstream(t, "site")
	return "policy: " + divertPolicy(t) + "\n" +
		"divert: {tarpit: {upstream: " + tarpit + ", max_bytes: 1048576, max_duration: 500ms}}\n" +
		"sites: [{hosts: [localhost], upstream: " + site.URL + ", compress: false}]\n"
}

// checkMaxDurationCut sends one diverted request with c and checks that
// max_duration (500ms) cut it, on the client's side and the tarpit's.
func checkMaxDurationCut(t *testing.T, c *http.Client, u string, ended <-chan error) {
	t.Helper()
	const maxDuration = 500 * time.Millisecond
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
	req.Host = "localhost"
	req.Header.Set("User-Agent", gptUA)
	start := time.Now()
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body) // cut: an error or the end of the body
	res.Body.Close()
	took := time.Since(start)
	if res.StatusCode != 200 || len(b) == 0 || strings.Trim(string(b), "x") != "" {
		t.Errorf("diverted: %d %.40q", res.StatusCode, b)
	}
	// At a byte per 25ms, max_bytes would take hours.
	if took < maxDuration || took > 10*maxDuration || ctx.Err() != nil {
		t.Errorf("the diverted answer ended after %v (%d bytes), want max_duration %v", took, len(b), maxDuration)
	}
	select {
	case err := <-ended:
		if err == nil {
			t.Error("the tarpit's handler ended without its request being cancelled")
		}
	case <-time.After(5 * time.Second):
		t.Error("the tarpit is still sending after max_duration")
	}
}

// TestDivertMaxDuration: a tarpit that trickles a byte at a time never
// reaches max_bytes; max_duration cuts the diverted exchange, on the
// client's side and the tarpit's, and the cut is told to the edge's log
// (at debug), not to the process's. TestDivertMaxDurationThroughEdge cuts
// it over HTTP/2 through a real edge.
func TestDivertMaxDuration(t *testing.T) {
	t.Parallel()
	tarpit, ended := tricklingTarpit(t)
	var logs syncBuffer
	h := newTestHandlerEnv(t, divertMaxDurationSite(t, tarpit),
		Env{Log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	checkMaxDurationCut(t, handlerClient(h, "h1"), handlerURL("/slow/h1"), ended)
	if !strings.Contains(logs.String(), "level=DEBUG msg=\"httputil: ReverseProxy read error during body copy: context deadline exceeded") {
		t.Errorf("the cut is not in the edge's log:\n%s", logs.String())
	}
}

func TestDivertMaxDurationThroughEdge(t *testing.T) {
	t.Parallel()
	tarpit, ended := tricklingTarpit(t)
	e := startEdge(t, divertMaxDurationSite(t, tarpit))
	checkMaxDurationCut(t, e.client(t, "h2"), e.url("/slow/h2"), ended)
}

// TestDivertOwnPool: a diverted request never waits for the site's
// upstream connections: with the site's only connection busy (and the
// tarpit on the same address as the site), the site's next request waits
// and is refused, while a diverted one is answered at once.
func TestDivertOwnPool(t *testing.T) {
	t.Parallel()
	holding, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	both := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.Contains(r.UserAgent(), "GPTBot"):
			_, _ = io.WriteString(w, "tarpit page")
		case r.URL.Path == "/hold":
			holding <- struct{}{}
			<-release
			_, _ = io.WriteString(w, "held")
		default:
			_, _ = io.WriteString(w, "the site")
		}
	}))
	t.Cleanup(both.Close)
	h := newTestHandler(t, "limits: {upstream_conns: 1, upstream_queue: 300ms}\npolicy: "+divertPolicy(t)+"\n"+
		"divert: {tarpit: {upstream: "+both.URL+"}}\n"+
		"sites: [{hosts: [localhost], upstream: "+both.URL+", compress: false}]\n")
	t.Cleanup(free) // before the upstream's Close waits for /hold
	held := make(chan string, 1)
	c := handlerClient(h, "h2")
	go func() {
		req, _ := http.NewRequest("GET", handlerURL("/hold"), nil)
		req.Host = "localhost"
		res, err := c.Do(req)
		if err != nil {
			held <- err.Error()
			return
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		held <- fmt.Sprint(res.StatusCode, " ", string(b))
	}()
	select {
	case <-holding:
	case <-time.After(10 * time.Second):
		t.Fatal("the holding request did not reach the site")
	}
	if res, body := get(t, c, handlerURL("/other"), "User-Agent", "Go-http-client/1.1"); res.StatusCode != 503 {
		t.Errorf("the site's only connection is busy, yet another request got %d %q", res.StatusCode, body)
	}
	for i := range 3 {
		res, body := get(t, c, handlerURL(fmt.Sprint("/article/", i)), "User-Agent", gptUA)
		if res.StatusCode != 200 || body != "tarpit page" {
			t.Errorf("diverted beside a busy site: %d %.80q", res.StatusCode, body)
		}
	}
	free()
	if got := <-held; got != "200 held" {
		t.Errorf("the holding request: %s", got)
	}
}

// TestDivertSilentTarpitDenied: a divert target that has not answered
// within max_duration (hung, or its connections all busy) is a plain
// deny, as a target that is down — not an empty 200.
func TestDivertSilentTarpitDenied(t *testing.T) {
	t.Parallel()
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	t.Cleanup(silent.Close)
	pol := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(pol, []byte("bots:\n  - {name: ai, user_agent_regex: GPTBot, action: DIVERT, divert_to: tarpit}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := newTestHandler(t, "policy: "+pol+"\n"+
		"divert: {tarpit: {upstream: "+silent.URL+", max_duration: 300ms}}\n"+
		"sites: [{hosts: [localhost], upstream: "+silent.URL+"}]\n")
	c := handlerClient(h, "h2")
	res, body := get(t, c, handlerURL("/article"), "User-Agent", gptUA)
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("a silent divert target: %d %.60q, want 403", res.StatusCode, body)
	}
}

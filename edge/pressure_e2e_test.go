package edge

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maatproxy/maat/edge/internal/upstream"
	"github.com/maatproxy/maat/internal/testnet"
)

// steppedUpstream records the paths of the requests it receives, in
// order, and answers each only when the test lets one more through
// (step).
type steppedUpstream struct {
	*httptest.Server
	next chan struct{}

	mu    sync.Mutex
	order []string
}

func newSteppedUpstream(t *testing.T) *steppedUpstream {
	u := &steppedUpstream{next: make(chan struct{})}
	done := make(chan struct{})
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.order = append(u.order, r.URL.Path)
		u.mu.Unlock()
		select {
		case <-u.next:
		case <-done:
		case <-r.Context().Done():
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(func() { close(done); u.Close() })
	return u
}

// arrived is the paths received so far, in order.
func (u *steppedUpstream) arrived() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.order...)
}

// step lets the oldest request held through, and waits for the next to
// arrive when want more have arrived by then.
func (u *steppedUpstream) step(t *testing.T, want int) {
	t.Helper()
	u.next <- struct{}{}
	if !testnet.WaitFor(t, 10*time.Second, func() bool { return len(u.arrived()) >= want }) {
		t.Fatalf("after a step, %d requests arrived, want %d: %v", len(u.arrived()), want, u.arrived())
	}
}

// queueOf is the line of the first site's default route, as the edge's
// metrics see it.
func queueOf(e *testEdge) *upstream.Pool {
	s := e.metrics.sites.Load().list[0]
	return s.routes[len(s.routes)-1].pool
}

// sendAs sends GET path through c as the client from (a trusted proxy's
// X-Forwarded-For), and reports its status on got.
func sendAs(e *testEdge, c *http.Client, path, from string, hdr http.Header, got chan<- [2]string) {
	go func() {
		req, _ := http.NewRequest("GET", e.url(path), nil)
		req.Host = "localhost"
		req.Header.Set("User-Agent", "Go-http-client/1.1")
		for k, v := range hdr {
			req.Header[k] = v
		}
		if from != "" {
			req.Header.Set("X-Forwarded-For", from)
		}
		res, err := c.Do(req)
		if err != nil {
			got <- [2]string{path, err.Error()}
			return
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		got <- [2]string{path, strconv.Itoa(res.StatusCode) + " " + res.Header.Get("Retry-After")}
	}()
}

// stepAll lets the n requests that wait behind the one holding the slot
// through, one at a time, then the last; it returns the order the
// upstream received them in.
func stepAll(t *testing.T, up *steppedUpstream, n int) string {
	t.Helper()
	for k := 2; k <= n+1; k++ {
		up.step(t, k)
	}
	up.next <- struct{}{}
	return strings.Join(up.arrived(), " ")
}

// wantOK takes n answers from got (sendAs) and wants each a 200.
func wantOK(t *testing.T, got <-chan [2]string, n int) {
	t.Helper()
	for range n {
		if r := <-got; r[1] != "200 " {
			t.Errorf("%s: %s, want 200", r[0], r[1])
		}
	}
}

// waitQueue waits until n requests wait in pool's line.
func waitQueue(t *testing.T, pool *upstream.Pool, n int) {
	t.Helper()
	if !testnet.WaitFor(t, 10*time.Second, func() bool { return pool.Stats(time.Now()).Queue == n }) {
		t.Fatalf("%d requests wait in the line, want %d", pool.Stats(time.Now()).Queue, n)
	}
}

// holdTheSlot sends /flood/0 from 192.0.2.1 and waits until it holds the
// upstream's one slot; it returns the site's pool and the channel every
// request's answer arrives on (sendAs).
func holdTheSlot(t *testing.T, e *testEdge, c *http.Client, up *steppedUpstream) (*upstream.Pool, chan [2]string) {
	t.Helper()
	pool := queueOf(e)
	got := make(chan [2]string, 8)
	sendAs(e, c, "/flood/0", "192.0.2.1", nil, got)
	if !testnet.WaitFor(t, 10*time.Second, func() bool { return len(up.arrived()) == 1 }) {
		t.Fatal("the first request did not reach the upstream")
	}
	return pool, got
}

const fairConfig = "trusted_proxies: [127.0.0.1/32]\npolicy: \"\"\nsites: [{hosts: [localhost], upstream: %s}]\n"

// TestFairQueueByCluster: with the upstream's one slot busy and five
// requests of one client cluster waiting, a request of another cluster
// is served next, before all five: its fair share is one turn in two.
// Real clients through the edge; the order is the upstream's.
func TestFairQueueByCluster(t *testing.T) {
	t.Parallel()
	up := newSteppedUpstream(t)
	e := startEdge(t, "limits: {upstream_conns: 1, upstream_queue: 60s}\n"+strings.Replace(fairConfig, "%s", up.URL, 1))
	c := e.client(t, "h2")
	pool, got := holdTheSlot(t, e, c, up)
	for i := 1; i <= 5; i++ {
		sendAs(e, c, "/flood/"+strconv.Itoa(i), "192.0.2.1", nil, got)
		waitQueue(t, pool, i)
	}
	sendAs(e, c, "/other", "198.51.100.1", nil, got)
	waitQueue(t, pool, 6)
	want := "/flood/0 /other /flood/1 /flood/2 /flood/3 /flood/4 /flood/5"
	if order := stepAll(t, up, 6); order != want {
		t.Errorf("the upstream served %s, want %s", order, want)
	}
	wantOK(t, got, 7)
}

// TestQueueShareOverflow: in a full line a cluster holding the most of it
// is refused (503 with Retry-After), and another cluster's request takes
// the place of that cluster's newest, which is answered 503.
func TestQueueShareOverflow(t *testing.T) {
	t.Parallel()
	up := newSteppedUpstream(t)
	e := startEdge(t, "limits: {upstream_conns: 1, upstream_queue: 60s, upstream_queue_len: 2}\n"+strings.Replace(fairConfig, "%s", up.URL, 1))
	c := e.client(t, "h2")
	pool, got := holdTheSlot(t, e, c, up)
	sendAs(e, c, "/flood/1", "192.0.2.1", nil, got)
	waitQueue(t, pool, 1)
	sendAs(e, c, "/flood/2", "192.0.2.1", nil, got)
	waitQueue(t, pool, 2)
	sendAs(e, c, "/flood/3", "192.0.2.1", nil, got)
	if r := <-got; r != [2]string{"/flood/3", "503 5"} {
		t.Errorf("the flood's request past its share: %v, want 503 with Retry-After", r)
	}
	sendAs(e, c, "/other", "198.51.100.1", nil, got)
	if r := <-got; r != [2]string{"/flood/2", "503 5"} {
		t.Errorf("the flood's newest, put out for another cluster: %v, want 503 with Retry-After", r)
	}
	waitQueue(t, pool, 2)
	if order := stepAll(t, up, 2); order != "/flood/0 /other /flood/1" {
		t.Errorf("the upstream served %s", order)
	}
	wantOK(t, got, 3)
}

// startChallengeWhenEdge starts an edge (with extra configuration) whose
// site challenges "human" User-Agents (peoplePolicy) only in a storm
// (challenge.when: storm), which the slow route's one slot, held, brings
// on; it returns the slow upstream and the fingerprint log's path.
func startChallengeWhenEdge(t *testing.T, extra string) (*testEdge, *gatedUpstream, string) {
	t.Helper()
	echo := echoUpstream(t, "echo")
	slow := newGatedUpstream(t)
	fp := filepath.Join(t.TempDir(), "fp.jsonl")
	e := startEdge(t, extra+"limits: {upstream_conns: 1, upstream_queue: 60s}\nstorm: {on: 0.5, off: 0.2, hold: 1h}\n"+
		"challenge: {when: storm, wait: {max_weight: -1}}\npolicy: "+peoplePolicy(t)+"\nlog: {fingerprints: "+fp+"}\n"+
		"sites: [{hosts: [localhost], upstream: "+echo.URL+", routes: [{path: /slow/, upstream: "+slow.URL+"}]}]\n")
	return e, slow, fp
}

// peoplePolicy challenges User-Agents that say "human" at one bit.
func peoplePolicy(t *testing.T) string {
	return writePolicy(t, "policy.yaml", "bots:\n  - name: people\n    user_agent_regex: human\n    action: CHALLENGE\n    challenge: {algorithm: fast, difficulty: 1}\n")
}

// earnPass is the pass cookie ("name=value") c earns on e by solving the
// challenge a "human" request gets.
func earnPass(t *testing.T, e *testEdge, c *http.Client, path string) string {
	t.Helper()
	do := func(path string) *http.Response {
		req, _ := http.NewRequest("GET", e.url(path), nil)
		req.Host = "localhost"
		req.Header.Set("User-Agent", "human/1.0")
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := do(path)
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("a human's first request: %d, want the challenge", res.StatusCode)
	}
	res = do(solvePage(t, string(page)))
	res.Body.Close()
	for _, ck := range res.Cookies() {
		return ck.Name + "=" + ck.Value
	}
	t.Fatalf("redeeming the challenge: %d, no cookie", res.StatusCode)
	return ""
}

// TestPassHoldersFirst: a pass holder's request waiting for the
// upstream's slot is served before an older request of another cluster
// that holds no slot either.
func TestPassHoldersFirst(t *testing.T) {
	t.Parallel()
	up := newSteppedUpstream(t)
	e := startEdge(t, "limits: {upstream_conns: 1, upstream_queue: 60s}\nchallenge: {wait: {max_weight: -1}}\n"+
		strings.Replace(strings.Replace(fairConfig, `policy: ""`, "policy: "+peoplePolicy(t), 1), "%s", up.URL, 1))
	c := e.client(t, "h2")
	cookie := earnPass(t, e, c, "/")
	pool, got := holdTheSlot(t, e, c, up)
	sendAs(e, c, "/other", "198.51.100.1", nil, got)
	waitQueue(t, pool, 1)
	sendAs(e, c, "/mine", "", http.Header{"Cookie": {cookie}, "User-Agent": {"human/1.0"}}, got)
	waitQueue(t, pool, 2)
	if order := stepAll(t, up, 2); order != "/flood/0 /mine /other" {
		t.Errorf("the upstream served %s, want the pass holder's before the older request", order)
	}
	wantOK(t, got, 3)
}

// scrape returns the admin endpoint's maat_ series (comments apart), as
// values by name and labels.
func scrape(t *testing.T, e *testEdge) map[string]string {
	t.Helper()
	res, err := http.Get("http://" + e.Addrs().Admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "maat_") {
			k, v, _ := strings.Cut(line, " ")
			out[k] = v
		}
	}
	return out
}

// TestPressureRises: as a slow upstream's slots fill and a line forms,
// the site's pressure rises through 0.75 (slots full) to 1 (a line as long
// as the slots), storm mode begins, and the metrics say so.
func TestPressureRises(t *testing.T) {
	t.Parallel()
	up := newGatedUpstream(t)
	e := startEdge(t, "limits: {upstream_conns: 2, upstream_queue: 60s}\npolicy: \"\"\n"+
		"sites: [{hosts: [localhost], upstream: "+up.URL+"}]\n")
	c := e.client(t, "h2")
	addr := strings.TrimPrefix(up.URL, "http://")
	labels := `{site="localhost",upstream="` + addr + `"}`
	series := func(name string) string { return name + labels }
	wantSeries := func(want map[string]string) {
		t.Helper()
		var m map[string]string
		ok := testnet.WaitFor(t, 10*time.Second, func() bool {
			m = scrape(t, e)
			for k, v := range want {
				if m[k] != v {
					return false
				}
			}
			return true
		})
		if !ok {
			t.Fatalf("metrics %v, want %v", m, want)
		}
	}
	wantSeries(map[string]string{series("maat_upstream_pressure"): "0", series("maat_upstream_capacity"): "2",
		`maat_storm{site="localhost"}`: "0"})
	got := make(chan [2]string, 4)
	sendAs(e, c, "/a", "", nil, got)
	sendAs(e, c, "/b", "", nil, got)
	wantSeries(map[string]string{series("maat_upstream_pressure"): "0.75", series("maat_upstream_inuse"): "2",
		series("maat_upstream_queue"): "0", `maat_storm{site="localhost"}`: "1"})
	sendAs(e, c, "/c", "", nil, got)
	wantSeries(map[string]string{series("maat_upstream_queue"): "1"})
	sendAs(e, c, "/d", "", nil, got)
	wantSeries(map[string]string{series("maat_upstream_pressure"): "1", series("maat_upstream_queue"): "2"})
	up.open()
	wantOK(t, got, 4)
	wantSeries(map[string]string{series("maat_upstream_pressure"): "0", series("maat_upstream_queue"): "0",
		`maat_storm{site="localhost"}`: "1"}) // storm.hold: 30s
}

// TestChallengeWhen: with challenge.when: storm, a calm site lets a
// client the policy would challenge through (ALLOW, logged with reason
// challenge_off_calm); in a storm (a slow route's slot busy) the same
// client is challenged; a pass holder passes (PASS), and its log line
// carries its cluster and the site's pressure.
func TestChallengeWhen(t *testing.T) {
	t.Parallel()
	e, slow, fp := startChallengeWhenEdge(t, "")
	c := e.client(t, "h2")
	human := func(path, cookie string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", e.url(path), nil)
		req.Host = "localhost"
		req.Header.Set("User-Agent", "human/1.0")
		if cookie != "" {
			req.Header.Set("Cookie", cookie)
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return res.StatusCode, string(b)
	}
	if code, body := human("/calm", ""); code != 200 || !strings.Contains(body, "X-Maat-Action=ALLOW\n") {
		t.Errorf("calm: %d %q, want the page, allowed", code, body)
	}
	if l := waitLine(t, fp, "/calm"); l.str("action") != "ALLOW" || l.str("reason") != "challenge_off_calm" {
		t.Errorf("calm: logged %v, want ALLOW with reason challenge_off_calm", l)
	}

	got := make(chan [2]string, 1)
	sendAs(e, c, "/slow/x", "", nil, got)
	load := e.metrics.sites.Load().list[0].load
	if !testnet.WaitFor(t, 10*time.Second, func() bool { return load.read(time.Now()).storm }) {
		t.Fatalf("no storm with the slow route's slot busy: %+v", load.read(time.Now()))
	}
	if code, _ := human("/storm", ""); code != http.StatusForbidden {
		t.Errorf("in a storm: %d, want the challenge", code)
	}
	cookie := earnPass(t, e, c, "/earn")
	if code, body := human("/pass", cookie); code != 200 || !strings.Contains(body, "X-Maat-Action=PASS\n") {
		t.Errorf("a pass holder in a storm: %d %q, want the page, passed", code, body)
	}
	l := waitLine(t, fp, "/pass")
	if p, _ := l["pressure"].(float64); p != 0.75 || len(l.str("cluster")) != 16 {
		t.Errorf("the pass holder's line: pressure %v, cluster %q; want 0.75 and 16 hex digits", l["pressure"], l.str("cluster"))
	}
	slow.open()
	if r := <-got; r[1] != "200 " {
		t.Errorf("the slow request: %s", r[1])
	}
}

// TestUpstreamSeriesOnce: a route to the site's own upstream shares its
// slots, and its gauges are one series, not two of the same name and
// labels, which the registry refuses on every scrape.
func TestUpstreamSeriesOnce(t *testing.T) {
	t.Parallel()
	up := echoUpstream(t, "a")
	other := echoUpstream(t, "b")
	e := startEdge(t, "sites: [{hosts: [localhost], upstream: "+up.URL+", routes: [{path: /a/, upstream: "+up.URL+"}, {path: /b/, upstream: "+other.URL+"}]}]\n")
	mfs, err := e.metrics.reg.Gather()
	if err != nil {
		t.Fatalf("gathering the metrics: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "maat_upstream_capacity" {
			continue
		}
		var ups []string
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "upstream" {
					ups = append(ups, l.GetValue())
				}
			}
		}
		slices.Sort(ups)
		want := []string{strings.TrimPrefix(up.URL, "http://"), strings.TrimPrefix(other.URL, "http://")}
		slices.Sort(want)
		if !slices.Equal(ups, want) {
			t.Errorf("maat_upstream_capacity series by upstream: %v, want %v", ups, want)
		}
		return
	}
	t.Error("no maat_upstream_capacity")
}

// TestOnePageManyParts: one person's page of 120 parts over HTTP/2, with
// the default limits and an application that serves 8 at a time, waits
// in the edge's line and is served whole: the default line holds more
// than one client may have in flight, so none of the parts is a 503
// (upstream_queue_share), which the line of 8 × 8 gave the last 48.
func TestOnePageManyParts(t *testing.T) {
	t.Parallel()
	up := newGatedUpstream(t)
	e := startEdge(t, "policy: \"\"\nsites: [{hosts: [localhost], upstream: "+up.URL+"}]\n")
	c := e.client(t, "h2")
	const parts = 120
	got := make(chan [2]string, parts)
	for i := range parts {
		sendAs(e, c, "/part/"+strconv.Itoa(i), "", nil, got)
	}
	// Every part waits for one of the 8 slots (or holds one), and none
	// was answered before the application answers.
	waitQueue(t, queueOf(e), parts-8)
	up.open()
	wantOK(t, got, parts)
}

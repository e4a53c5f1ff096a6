package edge

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maatproxy/maat/challenge"
	"github.com/maatproxy/maat/fplog"
	"github.com/maatproxy/maat/internal/testnet"
)

// dryRunPolicy denies /deny, challenges /challenge, limits /rate to a
// burst of one and diverts /divert; the rest is allowed.
const dryRunPolicy = `bots:
  - { name: no-deny, path_regex: ^/deny, action: DENY }
  - name: guard
    path_regex: ^/challenge
    action: CHALLENGE
    challenge: { algorithm: fast, bits: 8 }
  - name: slow
    path_regex: ^/rate
    action: RATE
    rate: { key: ip, per_second: 0.001, burst: 1 }
  - { name: pit, path_regex: ^/divert, action: DIVERT, divert_to: tarpit }
thresholds:
  - { name: rest, expression: "true", action: ALLOW }
`

// countingUpstream answers 200 "up" and counts the requests it saw, by
// path.
type countingUpstream struct {
	*httptest.Server
	seen atomic.Int64
}

func newCountingUpstream(t *testing.T) *countingUpstream {
	t.Helper()
	u := &countingUpstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.seen.Add(1)
		w.Header().Set("X-Seen-Action", r.Header.Get("X-Maat-Action"))
		_, _ = io.WriteString(w, "up")
	}))
	t.Cleanup(u.Close)
	return u
}

// logLines parses what the fingerprint log wrote, by path.
func logLines(t *testing.T, out *syncWriter) map[string][]fplog.Record {
	t.Helper()
	out.mu.Lock()
	defer out.mu.Unlock()
	recs := map[string][]fplog.Record{}
	for line := range bytes.SplitSeq(bytes.TrimSpace(out.b.Bytes()), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		r, err := fplog.ParseLine(line)
		if err != nil {
			t.Fatalf("log line %s: %v", line, err)
		}
		recs[r.Path] = append(recs[r.Path], r)
	}
	return recs
}

// TestDryRunForwardsAndLogs: under dry_run a DENY, CHALLENGE, RATE beyond
// its burst and DIVERT each reach the upstream with a 200, and the log line
// keeps the action the policy decided with dry_run: true, as
// maat_dry_run_total counts it; the same policy enforced answers them
// itself and the upstream sees none.
func TestDryRunForwardsAndLogs(t *testing.T) {
	t.Parallel()
	pol := writePolicy(t, "dry.yaml", dryRunPolicy)
	for _, tt := range []struct {
		name   string
		global string // the global dry_run
		site   string // the site's dry_run line, if any
		dry    bool
	}{
		{"global", "true", "", true},
		{"site overrides global off", "false", "dry_run: true", true},
		{"site overrides global on", "true", "dry_run: false", false},
		{"enforced", "false", "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			up := newCountingUpstream(t)
			tarpit := newCountingUpstream(t)
			var out syncWriter
			w, err := fplog.NewWriter(fplog.Config{Output: &out})
			if err != nil {
				t.Fatal(err)
			}
			h := newTestHandlerEnv(t, "policy: "+pol+"\ndry_run: "+tt.global+"\ndivert: {tarpit: {upstream: "+tarpit.URL+"}}\n"+
				"sites:\n  - hosts: [localhost]\n    upstream: "+up.URL+"\n    "+tt.site+"\n", Env{FPLog: w})
			c := handlerClient(h, "h2")
			paths := []string{"/deny", "/challenge", "/rate", "/rate", "/divert", "/other"}
			for _, p := range paths {
				resp, err := c.Get(handlerURL(p))
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if tt.dry && (resp.StatusCode != http.StatusOK || string(body) != "up") {
					t.Errorf("%s: %d %q, want the upstream's 200", p, resp.StatusCode, body)
				}
				if tt.dry && p == "/deny" && resp.Header.Get("X-Seen-Action") != fplog.ActionDeny {
					t.Errorf("%s: the upstream saw X-Maat-Action %q, want DENY", p, resp.Header.Get("X-Seen-Action"))
				}
			}
			h.Close()
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			wantUp, wantPit := int64(len(paths)), int64(0)
			if !tt.dry {
				wantUp, wantPit = 2, 1 // the first /rate and /other; /divert goes to the tarpit
			}
			if got := up.seen.Load(); got != wantUp {
				t.Errorf("the upstream saw %d requests, want %d", got, wantUp)
			}
			if got := tarpit.seen.Load(); got != wantPit {
				t.Errorf("the tarpit saw %d requests, want %d", got, wantPit)
			}
			recs := logLines(t, &out)
			for _, want := range []struct {
				path, action string
				i            int
			}{
				{"/deny", fplog.ActionDeny, 0}, {"/challenge", fplog.ActionChallenge, 0}, {"/rate", fplog.ActionAllow, 0},
				{"/rate", fplog.ActionRate, 1}, {"/divert", fplog.ActionDivert, 0}, {"/other", fplog.ActionAllow, 0},
			} {
				rs := recs[want.path]
				if len(rs) <= want.i {
					t.Errorf("%s: %d log lines, want %d", want.path, len(rs), want.i+1)
					continue
				}
				r := rs[want.i]
				if r.Action != want.action || r.DryRun != tt.dry {
					t.Errorf("%s #%d: action %s dry_run %v, want %s %v", want.path, want.i, r.Action, r.DryRun, want.action, tt.dry)
				}
				if tt.dry && r.Status != http.StatusOK {
					t.Errorf("%s #%d: logged status %d, want 200", want.path, want.i, r.Status)
				}
			}
			if tt.dry && (recs["/challenge"][0].Challenge == nil || recs["/challenge"][0].Challenge.Bits != 8) {
				t.Errorf("/challenge: logged challenge %+v, want fast 8 bits", recs["/challenge"][0].Challenge)
			}
			m := h.env.metrics.dryRun
			for action, n := range map[string]float64{fplog.ActionDeny: 1, fplog.ActionChallenge: 1, fplog.ActionRate: 1, fplog.ActionDivert: 1, fplog.ActionAllow: 2} {
				if !tt.dry {
					n = 0
				}
				if got := counterValue(m.WithLabelValues("localhost", action)); got != n {
					t.Errorf("maat_dry_run_total{site=localhost,action=%s} = %v, want %v", action, got, n)
				}
			}
			if strings.Contains(out.b.String(), `"dry_run":false`) {
				t.Error("the log writes dry_run: false; it should leave it out")
			}
		})
	}
}

// dryRunDiffPolicy has a rule for each of the policy's actions: DENY,
// DENY_AND_REROUTE, DIVERT, RATE (a burst of one), CHALLENGE at 8 and 12
// bits and a metarefresh CHALLENGE; the rest is allowed.
const dryRunDiffPolicy = `bots:
  - { name: no-deny, path_regex: ^/deny, action: DENY }
  - { name: away, path_regex: ^/reroute, action: DENY_AND_REROUTE, reroute_to: "https://example.com/away" }
  - { name: pit, path_regex: ^/divert, action: DIVERT, divert_to: tarpit }
  - name: slow
    path_regex: ^/rate
    action: RATE
    rate: { key: ip, per_second: 0.001, burst: 1 }
  - name: guard
    path_regex: ^/challenge
    action: CHALLENGE
    challenge: { algorithm: fast, bits: 8 }
  - name: hard
    path_regex: ^/hard
    action: CHALLENGE
    challenge: { algorithm: fast, bits: 12 }
  - name: meta
    path_regex: ^/wait
    action: CHALLENGE
    challenge: { algorithm: metarefresh, difficulty: 1 }
thresholds:
  - { name: rest, expression: "true", action: ALLOW }
`

// dryRunShape is one request of TestDryRunAgreesWithLive: its path (which
// names it in the log), what it carries, and what the enforced edge logs
// for it, by challenge.when.
type dryRunShape struct {
	path   string
	cookie string // "pass": a valid pass for 8 bits; "junk": a cookie that is none
	ua     string // the User-Agent, if not the client's own
	// action (and reason) the live edge logs: always (challenge.when
	// unset or true), and calm (challenge.when false).
	always, calm string
}

// TestDryRunAgreesWithLive: for each request shape and challenge.when
// (unset, true, false), a site that runs dry logs the action, reason,
// rules and challenge the same site logs when it enforces the policy, in
// the same state (the same pass secret, the same requests before it, so
// the same rate buckets), with dry_run: true; maat_dry_run_total counts
// each line's action.
func TestDryRunAgreesWithLive(t *testing.T) {
	t.Parallel()
	pol := writePolicy(t, "diff.yaml", dryRunDiffPolicy)
	secret := randomBytes(32) // the pass secret all three edges share
	const headless = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/131.0.0.0 Safari/537.36"
	const calmAllow = fplog.ActionAllow + " " + reasonChallengeCalm
	shapes := []dryRunShape{
		{"/deny", "", "", fplog.ActionDeny, fplog.ActionDeny},
		{"/deny/pass", "pass", "", fplog.ActionDeny, fplog.ActionDeny},
		{"/reroute", "", "", fplog.ActionDeny, fplog.ActionDeny},
		{"/divert", "", "", fplog.ActionDivert, fplog.ActionDivert},
		{"/rate/1", "", "", fplog.ActionAllow, fplog.ActionAllow},
		{"/rate/2", "", "", fplog.ActionRate, fplog.ActionRate}, // the bucket is empty
		{"/rate/pass", "pass", "", fplog.ActionRate, fplog.ActionRate},
		{"/challenge/none", "", "", fplog.ActionChallenge, calmAllow},
		{"/challenge/pass", "pass", "", fplog.ActionPass, fplog.ActionPass},
		{"/challenge/junk", "junk", "", fplog.ActionChallenge, calmAllow},
		{"/challenge/headless", "", headless, fplog.ActionChallenge, fplog.ActionChallenge}, // a lie: challenged even when calm
		{"/hard/pass", "pass", "", fplog.ActionChallenge, fplog.ActionPass},                 // 8 bits for 12: any pass passes when calm
		{"/wait/none", "", "", fplog.ActionChallenge, calmAllow},
		{"/other/none", "", "", fplog.ActionAllow, fplog.ActionAllow},
		{"/other/pass", "pass", "", fplog.ActionPass, fplog.ActionPass},
	}
	// A pass for 8 bits, earned from an edge that challenges with the
	// same secret: the dry edges hand out none.
	mint := newTestHandlerEnv(t, "policy: "+pol+"\nchallenge: {wait: {max_weight: -1}}\n"+
		"divert: {tarpit: {upstream: http://127.0.0.1:1}}\nsites: [{hosts: [localhost], upstream: 'http://127.0.0.1:1'}]\n", Env{Secret: secret})
	pass := earnHandlerPass(t, mint, "/challenge/earn")

	for _, when := range []string{"", "true", "false"} {
		t.Run("when="+when, func(t *testing.T) {
			t.Parallel()
			run := func(dry bool) (map[string][]fplog.Record, *Handler) {
				up := newCountingUpstream(t)
				tarpit := newCountingUpstream(t)
				var out syncWriter
				w, err := fplog.NewWriter(fplog.Config{Output: &out})
				if err != nil {
					t.Fatal(err)
				}
				h := newTestHandlerEnv(t, fmt.Sprintf("policy: %s\ndry_run: %v\nchallenge: {when: %q, wait: {max_weight: -1}}\n"+
					"divert: {tarpit: {upstream: %s}}\nsites: [{hosts: [localhost], upstream: %s}]\n",
					pol, dry, when, tarpit.URL, up.URL), Env{FPLog: w, Secret: secret})
				c := handlerClient(h, "h2")
				for _, s := range shapes {
					req, _ := http.NewRequest("GET", handlerURL(s.path), nil)
					switch s.cookie {
					case "pass":
						req.Header.Set("Cookie", pass)
					case "junk":
						req.Header.Set("Cookie", challenge.CookieName+"=junk")
					}
					if s.ua != "" {
						req.Header.Set("User-Agent", s.ua)
					}
					resp, err := c.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if dry && resp.StatusCode != http.StatusOK {
						t.Errorf("dry %s: %d, want the upstream's 200", s.path, resp.StatusCode)
					}
				}
				h.Close()
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				return logLines(t, &out), h
			}
			live, _ := run(false)
			dry, h := run(true)
			counts := map[string]float64{}
			for _, s := range shapes {
				if len(live[s.path]) != 1 || len(dry[s.path]) != 1 {
					t.Errorf("%s: %d live and %d dry log lines, want 1 each", s.path, len(live[s.path]), len(dry[s.path]))
					continue
				}
				l, d := live[s.path][0], dry[s.path][0]
				want := s.always
				if when == "false" {
					want = s.calm
				}
				if got := strings.TrimSpace(l.Action + " " + l.Reason); got != want {
					t.Errorf("live %s: %q, want %q", s.path, got, want)
				}
				if d.Action != l.Action || d.Reason != l.Reason || !slices.Equal(d.Rules, l.Rules) || !reflect.DeepEqual(d.Challenge, l.Challenge) {
					t.Errorf("%s: dry run logs action %s reason %q rules %v challenge %+v; live: %s %q %v %+v",
						s.path, d.Action, d.Reason, d.Rules, d.Challenge, l.Action, l.Reason, l.Rules, l.Challenge)
				}
				if !d.DryRun || l.DryRun {
					t.Errorf("%s: dry_run %v dry, %v live", s.path, d.DryRun, l.DryRun)
				}
				counts[d.Action]++
			}
			for _, action := range []string{fplog.ActionAllow, fplog.ActionPass, fplog.ActionDeny, fplog.ActionDivert, fplog.ActionRate, fplog.ActionChallenge} {
				if got := counterValue(h.env.metrics.dryRun.WithLabelValues("localhost", action)); got != counts[action] {
					t.Errorf("maat_dry_run_total{site=localhost,action=%s} = %v, want %v", action, got, counts[action])
				}
			}
		})
	}
}

// earnHandlerPass is the pass cookie ("name=value") a client of h earns
// by solving the challenge h answers path with.
func earnHandlerPass(t *testing.T, h *Handler, path string) string {
	t.Helper()
	c := handlerClient(h, "h2")
	res, err := c.Get(handlerURL(path))
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("%s: %d, want the challenge", path, res.StatusCode)
	}
	if res, err = c.Get(handlerURL(solvePage(t, string(page)))); err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	for _, ck := range res.Cookies() {
		if ck.Name == challenge.CookieName {
			return ck.Name + "=" + ck.Value
		}
	}
	t.Fatalf("redeeming the challenge: %d, no pass cookie", res.StatusCode)
	return ""
}

// TestDryRunChallengeWhen: a site that runs dry with challenge.when:
// storm forwards the human the policy would challenge, and logs what the
// enforced site does (TestChallengeWhen): while calm, ALLOW with reason
// challenge_off_calm; in a storm (a slow route's slot busy), CHALLENGE
// with its challenge; each with dry_run: true, as maat_dry_run_total
// counts them.
func TestDryRunChallengeWhen(t *testing.T) {
	t.Parallel()
	e, slow, fp := startChallengeWhenEdge(t, "dry_run: true\n")
	c := e.client(t, "h2")
	human := func(path, action string) {
		t.Helper()
		req, _ := http.NewRequest("GET", e.url(path), nil)
		req.Host = "localhost"
		req.Header.Set("User-Agent", "human/1.0")
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || !strings.Contains(string(b), "X-Maat-Action="+action+"\n") {
			t.Errorf("%s: %d %q, want the page, with X-Maat-Action %s", path, res.StatusCode, b, action)
		}
	}
	human("/calm", fplog.ActionAllow)
	if l := waitLine(t, fp, "/calm"); l.str("action") != fplog.ActionAllow || l.str("reason") != reasonChallengeCalm || l["dry_run"] != true {
		t.Errorf("calm: logged %v, want ALLOW with reason challenge_off_calm, dry_run", l)
	}

	got := make(chan [2]string, 1)
	sendAs(e, c, "/slow/x", "", nil, got)
	load := e.metrics.sites.Load().list[0].load
	if !testnet.WaitFor(t, 10*time.Second, func() bool { return load.read(time.Now()).storm }) {
		t.Fatalf("no storm with the slow route's slot busy: %+v", load.read(time.Now()))
	}
	human("/storm", fplog.ActionChallenge)
	l := waitLine(t, fp, "/storm")
	if ch, _ := l["challenge"].(map[string]any); l.str("action") != fplog.ActionChallenge || l.str("reason") != "" || l["dry_run"] != true || ch == nil {
		t.Errorf("in a storm: logged %v, want CHALLENGE with its challenge, dry_run", l)
	}
	slow.open()
	if r := <-got; r[1] != "200 " {
		t.Errorf("the slow request: %s", r[1])
	}
	for action, n := range map[string]float64{fplog.ActionChallenge: 1, fplog.ActionPass: 0} {
		if v := counterValue(e.metrics.dryRun.WithLabelValues("localhost", action)); v != n {
			t.Errorf("maat_dry_run_total{site=localhost,action=%s} = %v, want %v", action, v, n)
		}
	}
}

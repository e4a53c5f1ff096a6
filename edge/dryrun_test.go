package edge

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/maatproxy/maat/fplog"
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

func writePolicy(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
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

package main

import (
	"errors"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/maatproxy/maat/edge/config"
	"github.com/maatproxy/maat/internal/testattack"
	"github.com/maatproxy/maat/policy"
	"golang.org/x/crypto/bcrypt"
)

// TestGateConfigReadsAsTheEdgeReads: the gate cases' configuration is one
// the edge accepts, with what the cases expect of it, and their policy
// compiles.
func TestGateConfigReadsAsTheEdgeReads(t *testing.T) {
	t.Parallel()
	hash, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pol := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(pol, []byte(testattack.GatePolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := policy.Load(pol, policy.Options{}); err != nil {
		t.Fatalf("the gate policy: %v", err)
	}
	text := gateConfig(ports{https: 8443, admin: 9100, http: 8080}, dir, pol, "http://127.0.0.1:3000",
		"http://127.0.0.1:3001", string(hash), "")
	cfg, err := config.Parse("edge.yaml", []byte(text))
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	if cfg.Listen.HTTPS != "127.0.0.1:8443" || cfg.Listen.HTTP != "127.0.0.1:8080" || cfg.Listen.Admin != "127.0.0.1:9100" {
		t.Errorf("listen = %+v", cfg.Listen)
	}
	if cfg.Policy != pol || cfg.Log.Fingerprints != fpLogOf(dir) || cfg.Challenge.Wait.Duration.D() != testattack.GateWait {
		t.Errorf("policy %q, fingerprints %q, wait %v", cfg.Policy, cfg.Log.Fingerprints, cfg.Challenge.Wait.Duration.D())
	}
	if len(cfg.TrustedProxies) != 1 || netip.Prefix(cfg.TrustedProxies[0]).String() != testattack.GateTrustedProxies {
		t.Errorf("trusted_proxies = %v", cfg.TrustedProxies)
	}
	if up := cfg.Divert["tarpit"].Upstream; len(up) != 1 || up[0].String() != "http://127.0.0.1:3001" {
		t.Errorf("divert = %+v", cfg.Divert)
	}
	s := cfg.Sites
	if len(s) != 1 || strings.Join(s[0].Hosts, ",") != "localhost,"+testattack.GateAlias || s[0].Canonical != "localhost" ||
		len(s[0].Routes) != 1 || s[0].Routes[0].Path != authPath || s[0].Routes[0].BasicAuth == nil {
		t.Errorf("sites = %+v", s)
	}
}

// TestSelectAttacks: -run picks from both sets by name, -gate leaves the
// resource attacks out.
func TestSelectAttacks(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name      string
		args      []string
		scenarios int
		gates     []string
	}{
		{"all", nil, len(testattack.Scenarios()), names(testattack.GateCases())},
		{"gate", []string{"-gate"}, 0, names(testattack.GateCases())},
		{"one gate case", []string{"-run", "gate/paths"}, 0, []string{"gate/paths"}},
		{"resource attacks", []string{"-run", "idle|quic"}, 3, nil},
		{"gate and -run", []string{"-gate", "-run", "trace|resume"}, 0, []string{"gate/trace", "gate/resume"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o, err := parseFlags(append([]string{"attack"}, tt.args...), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			sc, gates := selectAttacks(o)
			if len(sc) != tt.scenarios || strings.Join(names(gates), " ") != strings.Join(tt.gates, " ") {
				t.Errorf("%d attacks, gate cases %v; want %d, %v", len(sc), names(gates), tt.scenarios, tt.gates)
			}
		})
	}
}

func names(cases []testattack.GateCase) []string {
	var out []string
	for _, c := range cases {
		out = append(out, c.Name)
	}
	return out
}

// TestWriteGateTable: a row per try, the case's title on its first row;
// an attack's figure under "got through", an honest try's under "honest
// refused"; a case that stopped says why; the totals count each kind.
func TestWriteGateTable(t *testing.T) {
	t.Parallel()
	var paths, pass testattack.GateOutcome
	r := paths.Attack("/ADMIN/", "401 or 400")
	r.Add("h1", "200", true)
	r.Add("h2", "200", true)
	r.Add("h3", "401", false)
	r = paths.Attack("/a|b/", "401")
	r.Add("h1", "401", false)
	r.Note("a | note")
	r = paths.Honest("/admin/ with the password", "200")
	r.Add("h1", "200", false)
	r.Add("h2", "401", true)
	pass.Attack("the wait taken", "403").Note("no wait offered")
	var out strings.Builder
	writeGateTable(&out, environment{edge: "./cmd/edge at abc", cpus: 2, goVersion: "go1.26", start: time.Unix(0, 0)}, []gateCase{
		{title: "paths", rows: paths.Rows()},
		{title: "passes", rows: pass.Rows(), err: errors.New("ctx done")},
	})
	want := []string{
		"| paths | /ADMIN/ | h1, h2, h3 | 3 | 2/3 (h1, h2) | — | h1 200 ×1, h2 200 ×1, h3 401 ×1 | 401 or 400 | — |",
		`|  | /a\|b/ | h1 | 1 | 0/1 | — | h1 401 ×1 | 401 | a \| note |`,
		"|  | /admin/ with the password | h1, h2 | 2 | — | 1/2 (h2) | h1 200 ×1, h2 401 ×1 | 200 | — |",
		"| passes | the wait taken | — | 0 | not tried | — | — | 403 | no wait offered |",
		"|  | the case stopped | — | — | — | — | — | — | ctx done |",
		"Got through: 2 of 4 attack tries. Honest tries refused: 1 of 2.",
	}
	got := out.String()
	for _, w := range want {
		if !strings.Contains(got, w+"\n") {
			t.Errorf("missing line %q in:\n%s", w, got)
		}
	}
	if n := len(regexp.MustCompile(`(?m)^\| `).FindAllString(got, -1)); n != 1+5 {
		t.Errorf("%d table lines, want a head and 5 rows:\n%s", n, got)
	}
}

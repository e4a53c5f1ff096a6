package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/maatproxy/maat/internal/testattack"
)

// The gate cases of issue 33 (testattack.GateCases) run one by one, each
// against a fresh edge configured as they expect (gateConfig), with the
// site's upstream and the tarpit in this process: they count bypasses,
// not the edge's resources.

// gateConfig is the gate cases' configuration: the site behind the
// route on authPath with basic auth, a port-80 listener, the fingerprint
// log, testattack.GatePolicy in the file policy, the tarpit and the
// trusted proxies the cases expect, and extra.
func gateConfig(p ports, dir, policy, upstream, tarpit, authHash, extra string) string {
	return fmt.Sprintf(`listen: { https: "127.0.0.1:%d", http: "127.0.0.1:%d", admin: "127.0.0.1:%d" }
tls: { mode: self-signed, cache: %q }
challenge: { secret_file: %q, wait: { duration: %s } }
log: { level: warn, fingerprints: %q }
policy: %q
trusted_proxies: [%q]
divert: { tarpit: { upstream: %s } }
sites:
  - hosts: [localhost, %s]
    canonical: localhost
    upstream: %s
    compress: false
    routes:
      - { path: %s, upstream: %s, basic_auth: { users: { %s: %q } } }
%s
`, p.https, p.http, p.admin, filepath.Join(dir, "cache"), filepath.Join(dir, "secret"), testattack.GateWait,
		fpLogOf(dir), policy, testattack.GateTrustedProxies, tarpit, testattack.GateAlias, upstream, authPath, upstream,
		testattack.AuthUser, authHash, extra)
}

// fpLogOf is the fingerprint log of the edge whose directory is dir.
func fpLogOf(dir string) string { return filepath.Join(dir, "fp.jsonl") }

// gateCase is a case's rows, or why it could not run.
type gateCase struct {
	title string
	rows  []*testattack.GateRow
	err   error
}

// runGate runs the gate cases, each against a fresh edge.
func runGate(ctx context.Context, o options, bin, dir string, cases []testattack.GateCase, stderr io.Writer) []gateCase {
	chromium := o.chromium
	if chromium == "" {
		for _, name := range []string{"chromium", "chromium-browser"} {
			if p, err := exec.LookPath(name); err == nil {
				chromium = p
				break
			}
		}
	} else if chromium == "none" {
		chromium = ""
	}
	var out []gateCase
	for i, gc := range cases {
		fmt.Fprintf(stderr, "[gate %d/%d] %s …\n", i+1, len(cases), gc.Title)
		start := time.Now()
		rows, err := runGateCase(ctx, o, bin, dir, gc, chromium, stderr)
		bad, tries := 0, 0
		for _, r := range rows {
			if c := r.Counts(); !r.Honest {
				bad, tries = bad+c.Bad, tries+c.Tries
			}
		}
		fmt.Fprintf(stderr, "      %d of %d tries got through, in %v\n", bad, tries, time.Since(start).Round(100*time.Millisecond))
		if err != nil {
			fmt.Fprintf(stderr, "      %s: %v\n", gc.Name, err)
		}
		out = append(out, gateCase{title: gc.Title, rows: rows, err: err})
		if ctx.Err() != nil {
			break
		}
	}
	return out
}

// runGateCase runs one case against a fresh edge, within three minutes.
func runGateCase(ctx context.Context, o options, bin, dir string, gc testattack.GateCase, chromium string, stderr io.Writer) ([]*testattack.GateRow, error) {
	site, err := testattack.NewUpstream(1 << 20)
	if err != nil {
		return nil, err
	}
	defer site.Close()
	tarpit, err := testattack.NewUpstream(1 << 20)
	if err != nil {
		return nil, err
	}
	defer tarpit.Close()
	e, err := launchEdge(ctx, o, bin, dir, stderr, func(d string, p ports, hash string) (string, error) {
		policy := filepath.Join(d, "policy.yaml")
		if err := os.WriteFile(policy, []byte(testattack.GatePolicy), 0o600); err != nil {
			return "", err
		}
		return gateConfig(p, d, policy, site.URL, tarpit.URL, hash, o.extra), nil
	})
	if err != nil {
		return nil, err
	}
	defer e.stop()
	t := testattack.GateTarget{
		Target: testattack.Target{HTTPS: e.https, HTTP3: e.https, TLS: e.tls, Host: "localhost", Upstream: site,
			AuthPath: authPath, AuthPassword: authPassword},
		HTTP: e.http, Tarpit: tarpit, FPLog: fpLogOf(e.dir), Chromium: chromium,
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	var out testattack.GateOutcome
	err = gc.Run(ctx, t, &out)
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	return out.Rows(), err
}

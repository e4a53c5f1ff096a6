// Package testaxe runs axe-core, Deque's accessibility checker, on a page
// open in a chromedp tab, for tests.
//
// axe-core is installed from the npm registry into the user's cache on
// first use; without npm the test ends the testenv way (skipped, or failed
// under CI=true).
package testaxe

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/maatproxy/maat/internal/testenv"
)

// Version is the axe-core release used (the challenge pages' scan uses the
// same).
const Version = "4.14.1"

// Source returns axe.min.js.
func Source(t testing.TB) string {
	t.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	prefix := filepath.Join(cache, "maat-test", "axe-core-"+Version)
	file := filepath.Join(prefix, "node_modules", "axe-core", "axe.min.js")
	if b, err := os.ReadFile(file); err == nil {
		return string(b)
	}
	npm := testenv.NeedCommand(t, "npm")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "install", "--prefix", prefix, "--no-audit", "--no-fund", "--silent", "axe-core@"+Version)
	if out, err := cmd.CombinedOutput(); err != nil {
		testenv.Missing(t, "npm install axe-core@%s: %v\n%s", Version, err, out)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Violation is one rule axe found broken.
type Violation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  int    `json:"nodes"`
}

// Run runs axe (src, from Source) on the tab's page with the WCAG 2.0–2.2
// A and AA rules and the best practices, and returns how many rules
// passed and the violations.
func Run(ctx context.Context, src string) (passes int, violations []Violation, err error) {
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](src)); err != nil {
		return 0, nil, err
	}
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](`axe.run(document, {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22aa', 'best-practice']}})
		.then(r => ({passes: r.passes.length, violations: r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.length}))}))`, chromedp.EvalAwaitPromise))
	if err != nil {
		return 0, nil, err
	}
	var res struct {
		Passes     int         `json:"passes"`
		Violations []Violation `json:"violations"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return 0, nil, err
	}
	return res.Passes, res.Violations, nil
}

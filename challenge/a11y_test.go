package challenge

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/maatproxy/maat/internal/testaxe"
)

// screenshotsAndAxe takes screenshots of the pages in several languages and
// scans them with axe-core: the challenge (left-to-right and right-to-left),
// the challenge without a wait as a browser without JavaScript shows it,
// the deny page and a refused pass.
func screenshotsAndAxe(t *testing.T, browser context.Context, base string) {
	dir := artifactDir(t)
	axe := axeSource(t)
	for _, lang := range []string{"en", "de", "ar", "ja"} {
		tab, closeTab := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
		if err := chromedp.Do(tab, chromedp.EmulateViewport(800, 760), chromedp.Navigate(base+"/shot/page?lang="+lang)); err != nil {
			t.Fatal(err)
		}
		if err := waitProgress(tab); err != nil {
			t.Fatalf("%s: %v", lang, err)
		}
		dirAttr, _ := chromedp.Run(tab, chromedp.Evaluate[string](`document.documentElement.lang + ' ' + document.documentElement.dir`))
		want := lang + " ltr"
		if lang == "ar" {
			want = "ar rtl"
		}
		if dirAttr != want {
			t.Errorf("%s: <html> lang and dir %q, want %q", lang, dirAttr, want)
		}
		png, err := chromedp.Run(tab, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(dir, "challenge-"+lang+".png")
		if err := os.WriteFile(file, png, 0o644); err != nil {
			t.Fatal(err)
		}
		if axe != "" && (lang == "en" || lang == "ar") {
			checkAxe(t, tab, axe, lang+" challenge")
		}
		closeTab()
	}
	// Without JavaScript: the page is parsed with scripts off (the
	// <noscript> part shown), then scripts come back on for axe, whose
	// scan needs timers. The page that refreshes itself is only shot.
	for _, pg := range []struct {
		name, path string
		noJS, scan bool
	}{
		{"deny-he", "/deny?lang=he", false, true},
		{"refused-fa", passPath + "?t=AQEQCAIA&r=%2Fwiki&n=0&lang=fa", false, true},
		{"nojs-nowait-en", "/nowait/page?lang=en", true, true},
		{"nojs-wait-de", "/shot/page?lang=de", true, false},
	} {
		tab := newTab(t, browser)
		steps := []chromedp.Action[chromedp.Void]{chromedp.EmulateViewport(800, 760), chromedp.Navigate(base + pg.path)}
		if pg.noJS {
			steps = append([]chromedp.Action[chromedp.Void]{noJS}, steps...)
		}
		if err := chromedp.Do(tab, steps...); err != nil {
			t.Fatal(err)
		}
		png, _ := chromedp.Run(tab, chromedp.CaptureScreenshot())
		os.WriteFile(filepath.Join(dir, pg.name+".png"), png, 0o644)
		if axe == "" || !pg.scan {
			continue
		}
		if pg.noJS {
			jsOn := chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
				_, err := cdp.Call(ctx, tg, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: false})
				return err
			})
			if err := chromedp.Do(tab, jsOn); err != nil {
				t.Fatal(err)
			}
		}
		checkAxe(t, tab, axe, pg.name)
	}
	t.Logf("screenshots in %s", dir)
}

// waitProgress waits until the solver shows its speed.
func waitProgress(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, pageTimeout)
	defer cancel()
	for {
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.getElementById('maat-speed') || {}).textContent || ''`))
		if err == nil && s != "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the solver shows no progress: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// artifactDir is $MAAT_ARTIFACTS/challenge, or a fixed folder under the
// temporary directory, kept after the test for a person to look at.
func artifactDir(t *testing.T) string {
	t.Helper()
	root := os.Getenv("MAAT_ARTIFACTS")
	if root == "" {
		root = filepath.Join(os.TempDir(), "maat-artifacts")
	}
	dir := filepath.Join(root, "challenge")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// axeSource returns axe.min.js (internal/testaxe installs it).
func axeSource(t *testing.T) string { return testaxe.Source(t) }

type axeViolation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  int    `json:"nodes"`
}

// checkAxe runs axe-core on the tab's page and fails on serious or critical
// violations (WCAG 2.0–2.2 A and AA rules and best practices).
func checkAxe(t *testing.T, tab context.Context, src, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, pageTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](src)); err != nil {
		t.Fatalf("%s: load axe: %v", what, err)
	}
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](`axe.run(document, {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22aa', 'best-practice']}})
		.then(r => ({passes: r.passes.length, violations: r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.length}))}))`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("%s: axe: %v", what, err)
	}
	var res struct {
		Passes     int            `json:"passes"`
		Violations []axeViolation `json:"violations"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	if res.Passes < 10 {
		t.Errorf("%s: axe passed only %d rules: did it run?", what, res.Passes)
	}
	t.Logf("%s: axe: %d rules pass, %d violations", what, res.Passes, len(res.Violations))
	for _, v := range res.Violations {
		if v.Impact == "serious" || v.Impact == "critical" {
			t.Errorf("%s: axe %s violation %s: %s (%d nodes)", what, v.Impact, v.ID, v.Help, v.Nodes)
		} else {
			t.Logf("%s: axe %s: %s (%s)", what, v.Impact, v.ID, v.Help)
		}
	}
}

package httpfp_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/maatproxy/maat/httpfp"
	"github.com/maatproxy/maat/internal/testenv"
)

// TestChromium fingerprints headless Chromium: a navigation, then fetch()
// calls with X-A and X-B in both orders, all on one HTTP/2 connection.
// Chromium's h2fp is the published one.
func TestChromium(t *testing.T) {
	t.Parallel()
	path := testenv.NeedCommand(t, "chromium")
	s := startServer(t, httpfp.Config{JA4H: true})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	actx, cancel := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("ignore-certificate-errors", true),
		chromedp.UserDataDir(t.TempDir()))
	defer cancel()
	bctx, cancel := chromedp.NewContext(actx)
	defer cancel()

	if err := chromedp.Do(bctx, chromedp.Navigate("https://"+s.addr+"/page")); err != nil {
		t.Fatal(err)
	}
	page, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.body.innerText`))
	if err != nil {
		t.Fatal(err)
	}
	fetch := func(first, second string) string {
		js := `fetch("/fetch", {headers: [["` + first + `", "1"], ["` + second + `", "2"]]}).then(r => r.text())`
		out, err := chromedp.Run(bctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	ab, ab2, ba := fetch("X-A", "X-B"), fetch("X-A", "X-B"), fetch("X-B", "X-A")
	var res []result
	for _, b := range []string{page, ab, ab2, ba} {
		var r result
		if err := json.Unmarshal([]byte(b), &r); err != nil {
			t.Fatalf("%v: %q", err, b)
		}
		res = append(res, r)
	}
	nav := res[0]
	if nav.Proto != "HTTP/2.0" || !nav.Found || nav.H2FP != chromiumH2FP {
		t.Errorf("navigation: %+v, want h2fp %s", nav, chromiumH2FP)
	}
	if nav.Names[0] != ":method" || nav.Names[1] != ":authority" || nav.JA4H == "" {
		t.Errorf("navigation names %q, JA4H %q", nav.Names, nav.JA4H)
	}
	t.Logf("Chromium: hfp %s %s h2fp %s ja4h %s", nav.HFP, nav.HFPR, nav.H2FP, nav.JA4H)
	// Chromium orders the headers a page sets itself (X-A before X-B in
	// both cases): fetch() gives one hfp, its own, whatever the order.
	for i, r := range res[1:] {
		if !r.Found || !r.Ordered || r.H2FP != chromiumH2FP || r.HFP != res[1].HFP || r.HFP == nav.HFP ||
			!before(r.Names, "x-a", "x-b") || !before(r.Names, ":method", ":authority") {
			t.Errorf("fetch %d: %+v, want hfp %s", i, r, res[1].HFP)
		}
	}
	if err := s.errs(); err != nil {
		t.Error(err)
	}
}

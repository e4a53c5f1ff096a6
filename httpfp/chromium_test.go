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

// TestChromium fingerprints headless Chromium over HTTP/2 and, with
// --disable-http2, HTTP/1.1: a navigation, then fetch() calls with X-A and
// X-B in both orders on the same connection. Chromium's h2fp is the
// published one.
func TestChromium(t *testing.T) {
	t.Parallel()
	path := testenv.NeedCommand(t, "chromium")
	tests := []struct {
		name, proto, h2fp string
		flags             []chromedp.ExecAllocatorOption
	}{
		{"HTTP/2", "HTTP/2.0", chromiumH2FP, nil},
		{"HTTP/1.1", "HTTP/1.1", "", []chromedp.ExecAllocatorOption{chromedp.Flag("disable-http2", true)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := chromium(t, path, tt.flags)
			nav := res[0]
			if nav.Proto != tt.proto || !nav.Found || !nav.TLS || nav.H2FP != tt.h2fp || nav.JA4H == "" {
				t.Errorf("navigation: %+v, want %s and h2fp %q", nav, tt.proto, tt.h2fp)
			}
			if tt.h2fp != "" && (nav.Names[0] != ":method" || nav.Names[1] != ":authority") {
				t.Errorf("navigation names %q", nav.Names)
			}
			t.Logf("Chromium %s: hfp %s %s h2fp %s ja4h %s", tt.proto, nav.HFP, nav.HFPR, nav.H2FP, nav.JA4H)
			// Chromium orders the headers a page sets itself (X-A before
			// X-B in both cases): fetch() gives one hfp, its own, whatever
			// the order.
			for i, r := range res[1:] {
				if !r.Found || !r.Ordered || r.H2FP != tt.h2fp || r.HFP != res[1].HFP || r.HFP == nav.HFP ||
					!before(r.Names, "x-a", "x-b") || r.Proto != tt.proto {
					t.Errorf("fetch %d: %+v, want hfp %s", i, r, res[1].HFP)
				}
			}
		})
	}
}

// chromium runs a fresh headless Chromium against a test server: a
// navigation, then fetch() with X-A, X-B; again; and X-B, X-A.
func chromium(t *testing.T, path string, flags []chromedp.ExecAllocatorOption) []result {
	t.Helper()
	s := startServer(t, httpfp.Config{JA4H: true})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	opts := append([]chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("ignore-certificate-errors", true),
		chromedp.UserDataDir(t.TempDir()),
	}, flags...)
	actx, cancel := chromedp.NewExecAllocator(ctx, opts...)
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
	var res []result
	for _, b := range []string{page, fetch("X-A", "X-B"), fetch("X-A", "X-B"), fetch("X-B", "X-A")} {
		var r result
		if err := json.Unmarshal([]byte(b), &r); err != nil {
			t.Fatalf("%v: %q", err, b)
		}
		res = append(res, r)
	}
	if err := s.errs(); err != nil {
		t.Error(err)
	}
	return res
}

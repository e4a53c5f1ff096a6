package edge

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/maatproxy/maat/internal/testenv"
)

// TestBrowserPassesChallengeThroughEdge: headless Chromium is challenged by
// the default policy, solves the proof of work, lands on the URL it asked
// for, and its next request passes on the cookie.
func TestBrowserPassesChallengeThroughEdge(t *testing.T) {
	t.Parallel()
	path := testenv.NeedCommand(t, "chromium", "chromium-browser")
	up := echoUpstream(t, "a")
	e, fpFile := startLoggingEdge(t, up.URL)
	p := port(e.Addrs().HTTPS)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-quic", true), chromedp.Flag("ignore-certificate-errors", true),
		chromedp.Flag("host-resolver-rules", "MAP localhost 127.0.0.1"),
		chromedp.UserDataDir(t.TempDir()))
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(alloc)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 60*time.Second)
	defer cancelT()

	base := "https://localhost:" + p
	// waitBody polls the page until its text contains want.
	waitBody := func(want string) string {
		t.Helper()
		var body string
		for ctx.Err() == nil {
			body, _ = chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ''`))
			if strings.Contains(body, want) {
				return body
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("the page never showed %q; last:\n%s", want, body)
		return ""
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/browse?x=1")); err != nil {
		t.Fatal(err)
	}
	waitBody("Path=/browse?x=1")
	if l := waitLine(t, fpFile, "/browse"); l.str("action") != "CHALLENGE" {
		t.Errorf("first visit: action %s, want CHALLENGE", l.str("action"))
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/second")); err != nil {
		t.Fatal(err)
	}
	waitBody("Path=/second")
	if l := waitLine(t, fpFile, "/second"); l.str("action") != "PASS" {
		t.Errorf("second visit: action %s, want PASS", l.str("action"))
	}
	res, err := http.Get("http://" + e.Addrs().Admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(m), "maat_challenge_solve_seconds_count 1") || !strings.Contains(string(m), `maat_challenges_total{reason="pow",result="passed"} 1`) {
		t.Errorf("the pass is not in the metrics:\n%s", grepLines(string(m), "maat_challenge"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// newChromium starts headless Chromium for the edge's tests; ua, if set,
// replaces its User-Agent (a real Chrome's, without "Headless"); extra
// adds flags.
func newChromium(t *testing.T, ua string, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	path := testenv.NeedCommand(t, "chromium", "chromium-browser")
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-quic", true), chromedp.Flag("ignore-certificate-errors", true),
		chromedp.Flag("host-resolver-rules", "MAP localhost 127.0.0.1"),
		chromedp.UserDataDir(t.TempDir()),
	}
	if ua != "" {
		opts = append(opts, chromedp.UserAgent(ua))
	}
	opts = append(opts, extra...)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(cancel)
	ctx, cancelT := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(cancelT)
	if err := chromedp.Do(ctx); err != nil { // start the browser
		t.Fatal(err)
	}
	return ctx
}

// pageText polls the page of ctx until its text contains want, and
// returns it; it fails the test when ctx ends first.
func pageText(t *testing.T, ctx context.Context, want string) string {
	t.Helper()
	var body string
	for ctx.Err() == nil {
		body, _ = chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ''`))
		if strings.Contains(body, want) {
			return body
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the page never showed %q; last:\n%s", want, body)
	return ""
}

// chromiumUA is the User-Agent of the installed Chromium without the
// headless tell, as a person's browser sends it.
const chromiumUA = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/156.0.0.0 Safari/537.36"

// TestBrowserWithoutJavaScript: a real Chromium with JavaScript off gets
// through by the wait (meta refresh, then the cookie) when it is an honest
// browser, and is told JavaScript is needed when it is headless (a lie
// signal: no wait).
func TestBrowserWithoutJavaScript(t *testing.T) {
	t.Parallel()
	up := echoUpstream(t, "a")
	fp := t.TempDir() + "/fp.jsonl"
	e := startEdge(t, "log: {fingerprints: "+fp+"}\nchallenge: {wait: {duration: 1s}}\nsites: [{hosts: [localhost], upstream: "+up.URL+"}]\n")
	base := "https://localhost:" + port(e.Addrs().HTTPS)
	t.Run("honest", func(t *testing.T) {
		t.Parallel()
		ctx := newChromium(t, chromiumUA)
		if err := chromedp.Do(ctx, noJS, chromedp.Navigate(base+"/nojs?a=1")); err != nil {
			t.Fatal(err)
		}
		pageText(t, ctx, "Path=/nojs?a=1")
		if err := chromedp.Do(ctx, chromedp.Navigate(base+"/nojs2")); err != nil {
			t.Fatal(err)
		}
		pageText(t, ctx, "Path=/nojs2")
		if l := waitLine(t, fp, "/nojs2"); l.str("action") != "PASS" {
			t.Errorf("after the wait: %s, want PASS", l.str("action"))
		}
	})
	t.Run("headless", func(t *testing.T) {
		t.Parallel()
		ctx := newChromium(t, "")
		if err := chromedp.Do(ctx, noJS, chromedp.Navigate(base+"/headless")); err != nil {
			t.Fatal(err)
		}
		pageText(t, ctx, "needs JavaScript")
	})
}

// TestBrowserTwoTabs: two tabs challenged at once both solve their own
// challenge and reach the site, without a loop.
func TestBrowserTwoTabs(t *testing.T) {
	t.Parallel()
	up := echoUpstream(t, "a")
	e, _ := startLoggingEdge(t, up.URL)
	base := "https://localhost:" + port(e.Addrs().HTTPS)
	ctx := newChromium(t, chromiumUA)
	tab2, cancel := chromedp.NewContext(ctx)
	defer cancel()
	errs := make(chan error, 2)
	go func() { errs <- chromedp.Do(ctx, chromedp.Navigate(base+"/tab1")) }()
	go func() { errs <- chromedp.Do(tab2, chromedp.Navigate(base+"/tab2")) }()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	pageText(t, ctx, "Path=/tab1")
	pageText(t, tab2, "Path=/tab2")
}

// noJS turns script execution off in a tab.
var noJS = chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
	_, err := cdp.Call(ctx, tg, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
	return err
})

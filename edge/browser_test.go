package edge

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

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

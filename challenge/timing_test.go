package challenge

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// timingScript runs in every document of the benchmark's tab before the
// page's own scripts: it reports each User Timing mark (solve.js sets
// maat:start, maat:workers, maat:ready and maat:solved) as it is set, and
// the document's navigation timing at DOMContentLoaded (or as it goes), to
// the Go side through the exposed function maatTiming. Times are
// milliseconds from the document's timeOrigin, which is sent along, so
// that documents can be put on one clock.
const timingScript = `(function () {
  function send(o) {
    o.doc = location.pathname; o.origin = performance.timeOrigin;
    if (window.maatTiming) window.maatTiming(o);
  }
  // Wrapped rather than observed: an observer's callback comes too late
  // for the mark set just before the page navigates away.
  var mark = performance.mark.bind(performance);
  performance.mark = function (name) {
    var e = mark(name);
    send({kind: 'mark', name: name, at: e.startTime});
    return e;
  };
  // The navigation timing at DOMContentLoaded, or when the page goes
  // before it (an easy proof is done while the page still loads).
  var sent = false;
  function nav() {
    if (sent) return;
    sent = true;
    var n = performance.getEntriesByType('navigation')[0] || {};
    send({kind: 'nav', at: performance.now(), redirectStart: n.redirectStart || 0, redirectEnd: n.redirectEnd || 0,
      responseEnd: n.responseEnd || 0, upstream: !!document.getElementById('upstream')});
  }
  document.addEventListener('DOMContentLoaded', nav);
  addEventListener('pagehide', nav);
})();`

// timingEvent is one report of timingScript.
type timingEvent struct {
	Doc           string  `json:"doc"`
	Kind          string  `json:"kind"` // "mark" or "nav"
	Name          string  `json:"name"`
	Origin        float64 `json:"origin"` // Unix ms
	At            float64 `json:"at"`     // ms from Origin
	RedirectStart float64 `json:"redirectStart"`
	RedirectEnd   float64 `json:"redirectEnd"`
	ResponseEnd   float64 `json:"responseEnd"`
	Upstream      bool    `json:"upstream"`
}

// ttcPhases names the phases of one visit, in order; they add up to the
// total.
var ttcPhases = []string{"page", "script", "ready", "hash", "pass", "upstream", "content"}

// ttcVisit is one visit's phases in milliseconds.
type ttcVisit struct {
	phase map[string]float64
	total float64
}

// visitPhases turns one visit's reports into phases:
//   - page: navigation start to the challenge page's last byte;
//   - script: to the solver script's first line;
//   - ready: to the first search ready (search.wasm fetched and compiled
//     on the page, or a worker started);
//   - hash: to the last nonce (cold code and scheduling included);
//   - pass: to the end of the /.maat/pass redirect;
//   - upstream: to the site's page's last byte;
//   - content: to the site's page's DOMContentLoaded.
func visitPhases(evs []timingEvent) (ttcVisit, error) {
	var ch, up *timingEvent
	marks := map[string]float64{}
	for i := range evs {
		e := &evs[i]
		switch {
		case e.Kind == "nav" && e.Upstream:
			up = e
		case e.Kind == "nav" && ch == nil:
			ch = e
		case e.Kind == "mark" && strings.HasPrefix(e.Name, "maat:"):
			if _, seen := marks[e.Name]; !seen {
				marks[e.Name] = e.Origin + e.At
			}
		}
	}
	if ch == nil || up == nil {
		return ttcVisit{}, fmt.Errorf("missing navigation reports (challenge %v, upstream %v)", ch != nil, up != nil)
	}
	for _, m := range []string{"maat:start", "maat:ready", "maat:solved"} {
		if _, ok := marks[m]; !ok {
			return ttcVisit{}, fmt.Errorf("no %s mark", m)
		}
	}
	redirectEnd := up.RedirectEnd
	if redirectEnd == 0 { // not exposed: count the redirect with the upstream
		redirectEnd = up.RedirectStart
	}
	at := []float64{
		ch.Origin,
		ch.Origin + ch.ResponseEnd,
		marks["maat:start"],
		marks["maat:ready"],
		marks["maat:solved"],
		up.Origin + redirectEnd,
		up.Origin + up.ResponseEnd,
		up.Origin + up.At,
	}
	v := ttcVisit{phase: make(map[string]float64), total: at[len(at)-1] - at[0]}
	for i, name := range ttcPhases {
		v.phase[name] = at[i+1] - at[i]
	}
	return v, nil
}

// visit opens a tab with an empty cookie jar and cache, navigates it to
// url, and returns the reports until the site's content is there, and the
// wall time from the navigation to that moment. setup runs outside the
// timer.
func visit(b *testing.B, browser context.Context, url string) ([]timingEvent, time.Duration) {
	b.Helper()
	b.StopTimer()
	tab, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	defer cancel()
	events := make(chan timingEvent, 64)
	report := func(_ context.Context, e timingEvent) (chromedp.Void, error) {
		events <- e
		return chromedp.Void{}, nil
	}
	inject := chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: timingScript})
		return err
	})
	if err := chromedp.Do(tab, chromedp.ExposeFunc("maatTiming", report), inject); err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
	t0 := time.Now()
	// Page.navigate returns once the challenge page's response is in; the
	// visit goes on while the reports arrive.
	nav := chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, page.Navigate, page.NavigateParams{URL: url})
		return err
	})
	if err := chromedp.Do(tab, nav); err != nil {
		b.Fatal(err)
	}
	var got []timingEvent
	deadline := time.After(30 * time.Second)
	for {
		select {
		case e := <-events:
			got = append(got, e)
			if e.Kind == "nav" && e.Upstream {
				wall := time.Since(t0)
				b.StopTimer()
				return got, wall
			}
		case <-deadline:
			b.Fatalf("no content after 30s; reports %+v", got)
		}
	}
}

// BenchmarkTimeToContent drives headless Chromium from navigation to a
// challenged page to the site's content behind it, with an empty cookie
// jar and cache each time, at the default policy's difficulties (12 bits
// for "fast", 16 for mild suspicion). It reports the median and mean total
// (the DESIGN's budget: ≤ 1 s median) and the mean of each phase (see
// visitPhases), from the browser's own clock.
//
//	go test -run '^$' -bench TimeToContent -benchtime 10x ./challenge
func BenchmarkTimeToContent(b *testing.B) {
	s := newSite(b)
	browser := newBrowser(b)
	for _, bits := range []int{12, 16} {
		b.Run(fmt.Sprintf("bits=%d", bits), func(b *testing.B) {
			var totals, walls []float64
			sum := map[string]float64{}
			for i := 0; b.Loop(); i++ {
				evs, wall := visit(b, browser, fmt.Sprintf("%s/bits/%d/wiki/Page_%d", s.srv.URL, bits, i))
				v, err := visitPhases(evs)
				if err != nil {
					b.Fatal(err)
				}
				totals = append(totals, v.total)
				walls = append(walls, float64(wall)/float64(time.Millisecond))
				for k, x := range v.phase {
					sum[k] += x
				}
				b.StartTimer()
			}
			n := float64(len(totals))
			b.ReportMetric(median(totals), "median-ms")
			b.ReportMetric(median(walls), "wall-median-ms")
			for _, k := range ttcPhases {
				b.ReportMetric(sum[k]/n, k+"-ms")
			}
		})
	}
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func TestVisitPhases(t *testing.T) {
	t.Parallel()
	evs := []timingEvent{
		{Kind: "mark", Name: "maat:start", Origin: 1000, At: 50},
		{Kind: "nav", Origin: 1000, At: 60, ResponseEnd: 20},
		{Kind: "mark", Name: "maat:ready", Origin: 1000, At: 90},
		{Kind: "mark", Name: "maat:solved", Origin: 1000, At: 150},
		{Kind: "nav", Upstream: true, Origin: 1151, RedirectStart: 2, RedirectEnd: 9, ResponseEnd: 12, At: 30},
	}
	v, err := visitPhases(evs)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"page": 20, "script": 30, "ready": 40, "hash": 60, "pass": 10, "upstream": 3, "content": 18}
	for k, w := range want {
		if v.phase[k] != w {
			t.Errorf("%s = %v, want %v", k, v.phase[k], w)
		}
	}
	if v.total != 181 {
		t.Errorf("total %v, want 181", v.total)
	}
	if _, err := visitPhases(evs[:4]); err == nil {
		t.Error("a visit without the site's page gave phases")
	}
}

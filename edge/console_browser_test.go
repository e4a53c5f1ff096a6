package edge

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/maatproxy/maat/edge/internal/console"
	"github.com/maatproxy/maat/internal/testaxe"
)

// consoleFacts is what the console shows in the browser.
type consoleFacts struct {
	Bars       int            `json:"bars"`       // bars in the decisions plot
	Lines      int            `json:"lines"`      // polylines in the challenges plot with a point above zero
	Rows       map[string]int `json:"rows"`       // rows with counts, by table id
	Totals     map[string]int `json:"totals"`     // the totals tables, by row name
	Loaded     float64        `json:"loaded"`     // performance.timeOrigin: changes with each reload
	ClientText string         `json:"clientText"` // the clients table's text
}

const consoleFactsJS = `(() => {
	const n = s => parseInt(s.replace(/\D/g, ''), 10);
	const rows = {}, totals = {};
	for (const t of document.querySelectorAll('table[id]'))
		rows[t.id] = [...t.tBodies[0].rows].filter(r => r.cells.length > 1).length;
	for (const tr of document.querySelectorAll('table.totals tbody tr'))
		totals[tr.cells[0].textContent.trim()] = n(tr.cells[1].textContent);
	const base = document.querySelector('svg polyline') ? document.querySelector('svg line.axis').getAttribute('y1') : '';
	const lines = [...document.querySelectorAll('svg polyline')].filter(p => p.getAttribute('points').split(' ').some(xy => xy.split(',')[1] !== base)).length;
	const c = document.getElementById('clients');
	return {bars: document.querySelectorAll('svg rect').length, lines, rows, totals,
		loaded: performance.timeOrigin, clientText: c ? c.textContent : ''};
})()`

func readConsole(t *testing.T, ctx context.Context) consoleFacts {
	t.Helper()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](consoleFactsJS))
	if err != nil {
		t.Fatalf("read the console: %v", err)
	}
	var f consoleFacts
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestConsoleInBrowser: after a burst of allowed, challenged and denied
// requests (and a challenge Chromium solves), the console shows them in
// plots and tables; more traffic changes them on the page's own reload;
// axe finds nothing to fix; client addresses appear as log.client_ip
// (prefix) writes them. With UPDATE_SCREENSHOT=1 it first sends a
// minute of changing traffic and writes docs/console.png.
func TestConsoleInBrowser(t *testing.T) {
	t.Parallel()
	e := startConsoleEdge(t, "", "log: {client_ip: prefix}\n")
	shot := os.Getenv("UPDATE_SCREENSHOT") == "1"
	if shot {
		storm(t, e, time.Minute)
	}
	burst(t, e, 4)
	axe := testaxe.Source(t)

	ctx := newChromium(t, chromiumUA)
	if err := chromedp.Do(ctx, chromedp.Navigate("https://localhost:"+port(e.Addrs().HTTPS)+"/challenge/browser")); err != nil {
		t.Fatal(err)
	}
	pageText(t, ctx, "Path=/challenge/browser") // solved, and through to the upstream

	admin := "http://" + e.Addrs().Admin + "/"
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900), chromedp.Navigate(admin)); err != nil {
		t.Fatal(err)
	}
	f := readConsole(t, ctx)
	if f.Totals["solved"] == 0 { // the pass may reach the recorder after the page
		waitFor(t, 15*time.Second, func() bool { f = readConsole(t, ctx); return f.Totals["solved"] > 0 })
	}
	t.Logf("console: %+v", f)
	if f.Bars < 3 || f.Lines < 2 {
		t.Errorf("the plots show %d bars and %d lines above zero, want the three decisions and issued and solved challenges", f.Bars, f.Lines)
	}
	if f.Totals["allowed"] < 4 || f.Totals["challenged"] < 5 || f.Totals["denied"] < 4 || f.Totals["issued"] < 5 || f.Totals["solved"] < 1 {
		t.Errorf("totals %v, want at least 4 allowed, 5 challenged and issued, 4 denied, 1 solved", f.Totals)
	}
	for _, id := range []string{"sites", "ja4", "families", "rules", "clients", "upstreams"} {
		if f.Rows[id] == 0 {
			t.Errorf("the %s table is empty", id)
		}
	}
	if f.Rows["ja4"] < 2 {
		t.Errorf("the JA4 table has %d rows, want Go's and Chromium's", f.Rows["ja4"])
	}
	if !strings.Contains(f.ClientText, "127.0.0.0/24") || strings.Contains(f.ClientText, "127.0.0.1") {
		t.Errorf("log.client_ip prefix: the clients table says %q", f.ClientText)
	}

	// More traffic: the page, reloading itself, shows it.
	denied := f.Totals["denied"]
	burst(t, e, 3)
	if !waitFor(t, 3*console.DefaultRefresh, func() bool { g := readConsole(t, ctx); f = g; return g.Totals["denied"] == denied+3 }) {
		t.Errorf("the page did not show the new traffic by itself: denied %d, want %d", f.Totals["denied"], denied+3)
	}

	// axe, on the page that does not reload during the scan.
	if err := chromedp.Do(ctx, chromedp.Navigate(admin+"?pause=1")); err != nil {
		t.Fatal(err)
	}
	passes, violations, err := testaxe.Run(ctx, axe)
	if err != nil {
		t.Fatalf("axe: %v", err)
	}
	if passes < 10 {
		t.Errorf("axe passed only %d rules: did it run?", passes)
	}
	for _, v := range violations {
		t.Errorf("axe %s violation %s: %s (%d nodes)", v.Impact, v.ID, v.Help, v.Nodes)
	}

	if err := chromedp.Do(ctx, chromedp.Navigate(admin)); err != nil {
		t.Fatal(err)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "console.png")
	if shot {
		file = filepath.Join("..", "docs", "console.png")
	}
	if err := os.WriteFile(file, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", file, len(png))
}

// storm sends changing traffic for d: a calm start, then a wave of denied
// and challenged requests, then calm again, so the screenshot's plots
// have a shape.
func storm(t *testing.T, e *testEdge, d time.Duration) {
	t.Helper()
	h1, h2 := e.client(t, "h1"), e.client(t, "h2")
	end := time.Now().Add(d)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for i := 0; time.Now().Before(end); i++ {
		phase := float64(time.Until(end)) / float64(d) // 1 → 0
		wave := 1 + int(12*(1-abs(2*phase-1)))         // peaks in the middle
		for j := range wave {
			c := h1
			if j%2 == 1 {
				c = h2
			}
			kind := []string{"deny", "challenge", "deny", "allow"}[j%4]
			get(t, c, e.url("/"+kind+"/storm"+strconv.Itoa(i)))
		}
		get(t, h2, e.url("/allow/calm"+strconv.Itoa(i)))
		<-tick.C // paces the traffic; nothing waits on it
	}
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

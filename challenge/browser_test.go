package challenge

import (
	"context"
	"errors"
	"fmt"
	"html"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/maatproxy/maat/internal/testenv"
)

// site is a miniature edge: /.maat/ to the challenger, a valid pass to the
// "upstream", everything else challenged. Paths choose the challenge:
// /refresh/… metarefresh, /slow/… a PoW too hard to finish (falls back to the
// wait), /shot/… a PoW too hard to finish, which stays on its page while the
// test looks at it, /bits/N/… a PoW of N bits, /nowait/… a PoW without the
// wait, /deny the deny page; anything else a PoW of 16 bits with a wait of a
// second offered.
type site struct {
	c          *Challenger
	slow       *Challenger // gives up solving after a second
	shot       *Challenger // gives up solving after an hour
	srv        *httptest.Server
	challenges atomic.Int32
	upstream   atomic.Int32
}

func newSite(t testing.TB) *site {
	t.Helper()
	s := &site{}
	msgs := loadMessages(t)
	s.c, _ = newTest(t, func(cfg *Config) {
		cfg.Now = nil
		cfg.Wait = time.Second
		cfg.Messages = msgs
	})
	s.slow, _ = newTest(t, func(cfg *Config) {
		cfg.Now = nil
		cfg.Wait = time.Second
		cfg.SolveTimeout = time.Second
		cfg.Messages = msgs
	})
	// At its solve timeout a page that offers a wait leaves for it: with
	// the default, 20 s, a screenshot or a search taken on a loaded machine
	// could find another page than the one it came for.
	s.shot, _ = newTest(t, func(cfg *Config) {
		cfg.Now = nil
		cfg.Wait = time.Second
		cfg.SolveTimeout = time.Hour
		cfg.Messages = msgs
	})
	client := func(r *http.Request) Client {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		ip, _ := netip.ParseAddr(host)
		return Client{IP: ip, JA4: "t13d1516h2_8daaf6152771_d8a2da3f94cd"}
	}
	maat := s.c.Handler(client)
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		spec := Spec{Algorithm: "pow", Bits: 16, Rule: "browsers", Wait: time.Second}
		c := s.c
		switch {
		case strings.HasPrefix(p, PathPrefix):
			maat.ServeHTTP(w, r)
			return
		case p == "/favicon.ico":
			http.NotFound(w, r)
			return
		case p == "/deny":
			s.c.Deny(w, r, "req-deny", "bad_user_agent")
			return
		case strings.HasPrefix(p, "/refresh/"):
			spec.Algorithm, spec.Wait = "metarefresh", 0 // Config.Wait
		case strings.HasPrefix(p, "/nowait/"):
			spec.Wait = 0
		case strings.HasPrefix(p, "/slow/"):
			spec.Bits, c = 34, s.slow
		case strings.HasPrefix(p, "/shot/"):
			spec.Bits, c = 34, s.shot
		case strings.HasPrefix(p, "/bits/"):
			n, _ := strconv.Atoi(strings.SplitN(p, "/", 4)[2])
			spec.Bits = n
		}
		need := Need{Bits: spec.Bits, Wait: spec.Wait > 0 || spec.Algorithm == "metarefresh"}
		if c == s.slow {
			// A device too slow for the proof of work asked of it (34 bits
			// stand in for a phone at the default difficulty): the page
			// falls back to the wait, and the site accepts what a wait
			// proves, as the edge does for a rule of the default
			// difficulty.
			need.Bits = WaitBits
		}
		if s.c.Pass(r, client(r), need) {
			s.upstream.Add(1)
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprintf(w, `<!DOCTYPE html><html lang="en"><title>upstream</title><main><p id="upstream">upstream %s</p></main></html>`, html.EscapeString(r.URL.RequestURI()))
			return
		}
		s.challenges.Add(1)
		c.Challenge(w, r, client(r), spec, "req")
	}))
	s.srv.EnableHTTP2 = true
	s.srv.StartTLS()
	t.Cleanup(s.srv.Close)
	return s
}

// newBrowser starts one headless Chromium for the test.
func newBrowser(t testing.TB) context.Context {
	t.Helper()
	path := testenv.NeedCommand(t, "chromium", "chromium-browser", "google-chrome")
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("ignore-certificate-errors", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(900, 1000),
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	browser, cancelBrowser := chromedp.NewContext(alloc)
	if err := chromedp.Do(browser); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	t.Cleanup(func() { cancelBrowser(); cancelAlloc() })
	return browser
}

// newTab opens a tab in a fresh browser context (its own cookie jar).
func newTab(t *testing.T, browser context.Context) context.Context {
	t.Helper()
	tab, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if err := chromedp.Do(tab); err != nil {
		t.Fatal(err)
	}
	return tab
}

// sameJarTab opens another tab next to tab, sharing its cookies.
func sameJarTab(t *testing.T, tab context.Context) context.Context {
	t.Helper()
	other, cancel := chromedp.NewContext(tab)
	t.Cleanup(cancel)
	if err := chromedp.Do(other); err != nil {
		t.Fatal(err)
	}
	return other
}

// pageTimeout bounds a wait for a page only against a hang: a page that
// takes a second alone can take twenty on a loaded 2-core machine, with
// the race detector and other browsers' tabs.
const pageTimeout = time.Minute

// waitUpstream waits until the tab shows the upstream's page and returns
// its location. It survives the navigations on the way.
func waitUpstream(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, pageTimeout)
	defer cancel()
	for {
		loc, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('upstream') ? location.href : ''`))
		if err == nil && loc != "" {
			return loc, nil
		}
		select {
		case <-ctx.Done():
			body, _ := chromedp.Run(context.WithoutCancel(ctx), chromedp.Evaluate[string](`location.href + ' ' + document.body.innerText.slice(0, 300)`))
			return "", fmt.Errorf("no upstream page: %w (at %s)", ctx.Err(), body)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// noJS turns script execution off in a tab.
var noJS = chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
	_, err := cdp.Call(ctx, tg, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
	return err
})

func navigate(ctx context.Context, url string) error {
	return chromedp.Do(ctx, chromedp.Navigate(url))
}

// TestBrowser drives a real headless Chromium through the challenges.
func TestBrowser(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	browser := newBrowser(t)
	base := s.srv.URL

	t.Run("solve and pass", func(t *testing.T) {
		t.Parallel()
		tab := newTab(t, browser)
		if err := navigate(tab, base+"/wiki/Main_Page?action=view&x=%C3%A9"); err != nil {
			t.Fatal(err)
		}
		loc, err := waitUpstream(tab)
		if err != nil {
			t.Fatal(err)
		}
		if want := base + "/wiki/Main_Page?action=view&x=%C3%A9"; loc != want {
			t.Errorf("landed on %s, want %s", loc, want)
		}
		before := s.challenges.Load()
		for _, p := range []string{"/wiki/Other", "/feed.xml"} {
			if err := navigate(tab, base+p); err != nil {
				t.Fatal(err)
			}
			if _, err := waitUpstream(tab); err != nil {
				t.Fatalf("%s after passing: %v", p, err)
			}
		}
		if after := s.challenges.Load(); after != before {
			t.Errorf("%d new challenges after passing", after-before)
		}
		cookieHttpOnly, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.cookie`))
		if err != nil || strings.Contains(cookieHttpOnly, CookieName) {
			t.Errorf("pass cookie visible to scripts: %q %v", cookieHttpOnly, err)
		}
	})

	// When the work is done the page says Done, and no longer how much
	// time is left. Date.now runs a second ahead at each call, so that
	// the progress display (at most every 250 ms) shows the time left
	// before the end however fast the machine; a recorder notes the
	// speed line when the status turns Done.
	t.Run("done leaves no time left", func(t *testing.T) {
		t.Parallel()
		tab := newTab(t, browser)
		record := chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: `(() => {
				const real = Date.now.bind(Date); let n = 0;
				Date.now = () => real() + 1000 * ++n;
				new MutationObserver(() => {
					const root = document.getElementById('maat'), status = document.getElementById('maat-status'), speed = document.getElementById('maat-speed');
					if (!root || !status || !speed) return;
					if (speed.textContent.includes(root.dataset.tEta.split('%s')[0])) sessionStorage.setItem('eta-seen', '1');
					if (status.textContent === root.dataset.tDone && sessionStorage.getItem('at-done') === null) sessionStorage.setItem('at-done', speed.textContent);
				}).observe(document, {subtree: true, childList: true, characterData: true});
			})()`})
			return err
		})
		if err := chromedp.Do(tab, record, chromedp.Navigate(base+"/nowait/done")); err != nil {
			t.Fatal(err)
		}
		if _, err := waitUpstream(tab); err != nil {
			t.Fatal(err)
		}
		got, err := chromedp.Run(tab, chromedp.Evaluate[[]any](`[sessionStorage.getItem('eta-seen'), sessionStorage.getItem('at-done')]`))
		if err != nil {
			t.Fatal(err)
		}
		if got[0] != "1" {
			t.Fatalf("the page never showed the time left (recorded %q): the test proves nothing", got)
		}
		if got[1] == nil || strings.Contains(got[1].(string), "Time left") {
			t.Errorf("speed line when the status said Done: %q; want no time left", got[1])
		}
	})

	t.Run("no JavaScript passes by meta refresh", func(t *testing.T) {
		t.Parallel()
		tab := newTab(t, browser)
		if err := chromedp.Do(tab, noJS, chromedp.Navigate(base+"/nojs/page")); err != nil {
			t.Fatal(err)
		}
		if loc, err := waitUpstream(tab); err != nil || !strings.HasSuffix(loc, "/nojs/page") {
			t.Fatalf("landed on %q: %v", loc, err)
		}
	})

	// The no-JS Continue button of a second visitor carries their own
	// token: a first visitor passes by the meta refresh, then a second one
	// clicks Continue at once (too early: the wait page again, which then
	// refreshes) and passes too, never refused.
	t.Run("no JavaScript Continue for a second visitor", func(t *testing.T) {
		t.Parallel()
		first := newTab(t, browser)
		if err := chromedp.Do(first, noJS, chromedp.Navigate(base+"/continue/1")); err != nil {
			t.Fatal(err)
		}
		if _, err := waitUpstream(first); err != nil {
			t.Fatal(err)
		}
		second := newTab(t, browser)
		if err := chromedp.Do(second, noJS, chromedp.Navigate(base+"/continue/2")); err != nil {
			t.Fatal(err)
		}
		if err := chromedp.Do(second, chromedp.Click(chromedp.CSS("a.button"))); err != nil {
			t.Fatal(err)
		}
		if loc, err := waitUpstream(second); err != nil || !strings.HasSuffix(loc, "/continue/2") {
			t.Fatalf("landed on %q: %v", loc, err)
		}
	})

	t.Run("no JavaScript and no wait says why", func(t *testing.T) {
		t.Parallel()
		tab := newTab(t, browser)
		if err := chromedp.Do(tab, noJS, chromedp.Navigate(base+"/nowait/page")); err != nil {
			t.Fatal(err)
		}
		got, err := chromedp.Run(tab, chromedp.Evaluate[string](`(document.querySelector('meta[http-equiv=refresh]') ? 'refresh ' : '') +
			(document.querySelector('a.button') ? 'button ' : '') + document.body.innerText`))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(got, "This site needs JavaScript to let you in") || strings.HasPrefix(got, "refresh") || strings.HasPrefix(got, "button") {
			t.Errorf("page without a wait, JavaScript off: %q", got)
		}
	})

	// Without WebAssembly on the page the workers search in JavaScript.
	t.Run("without WebAssembly passes", func(t *testing.T) {
		t.Parallel()
		tab := newTab(t, browser)
		noWasm := chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: `delete window.WebAssembly`})
			return err
		})
		if err := chromedp.Do(tab, noWasm, chromedp.Navigate(base+"/nowasm/page")); err != nil {
			t.Fatal(err)
		}
		if loc, err := waitUpstream(tab); err != nil || !strings.HasSuffix(loc, "/nowasm/page") {
			t.Fatalf("landed on %q: %v", loc, err)
		}
	})

	t.Run("no wait with JavaScript passes", func(t *testing.T) {
		t.Parallel()
		tab := newTab(t, browser)
		if err := navigate(tab, base+"/nowait/page"); err != nil {
			t.Fatal(err)
		}
		if loc, err := waitUpstream(tab); err != nil || !strings.HasSuffix(loc, "/nowait/page") {
			t.Fatalf("landed on %q: %v", loc, err)
		}
	})

	// A refused pass (here: forged) shows the reason and a link back to the
	// page; one click there is a fresh challenge that passes.
	t.Run("refused pass is one click from a fresh challenge", func(t *testing.T) {
		t.Parallel()
		tab := newTab(t, browser)
		if err := navigate(tab, base+passPath+"?t=AQEQCAIA&r=%2Fback%2Fpage&n=0"); err != nil {
			t.Fatal(err)
		}
		text, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.body.innerText`))
		if err != nil || !strings.Contains(text, FailInvalid) {
			t.Fatalf("refusal page: %q %v", text, err)
		}
		if err := chromedp.Do(tab, chromedp.Click(chromedp.CSS("a.button"))); err != nil {
			t.Fatal(err)
		}
		if loc, err := waitUpstream(tab); err != nil || !strings.HasSuffix(loc, "/back/page") {
			t.Fatalf("landed on %q: %v", loc, err)
		}
	})

	t.Run("metarefresh", func(t *testing.T) {
		t.Parallel()
		tab := newTab(t, browser)
		if err := navigate(tab, base+"/refresh/page"); err != nil {
			t.Fatal(err)
		}
		if loc, err := waitUpstream(tab); err != nil || !strings.HasSuffix(loc, "/refresh/page") {
			t.Fatalf("landed on %q: %v", loc, err)
		}
	})

	t.Run("slow device falls back to the wait", func(t *testing.T) {
		t.Parallel()
		tab := newTab(t, browser)
		if err := navigate(tab, base+"/slow/page"); err != nil {
			t.Fatal(err)
		}
		if loc, err := waitUpstream(tab); err != nil || !strings.HasSuffix(loc, "/slow/page") {
			t.Fatalf("landed on %q: %v", loc, err)
		}
	})

	t.Run("two tabs at once", func(t *testing.T) {
		t.Parallel()
		tab1 := newTab(t, browser)
		tab2 := sameJarTab(t, tab1)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, tab := range []context.Context{tab1, tab2} {
			wg.Go(func() {
				p := fmt.Sprintf("/tab/%d", i+1)
				if err := navigate(tab, base+p); err != nil {
					errs[i] = err
					return
				}
				loc, err := waitUpstream(tab)
				if err == nil && !strings.HasSuffix(loc, p) {
					err = fmt.Errorf("landed on %s", loc)
				}
				errs[i] = err
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
	})

	// Every search finds the nonce Go finds: search.wasm on the page's
	// thread (seeded by its own seed function), in a worker that was handed
	// the module, and worker.js's JavaScript.
	t.Run("searches agree with Go's SHA-256", func(t *testing.T) {
		t.Parallel()
		tab := newTab(t, browser)
		if err := navigate(tab, base+"/shot/page"); err != nil {
			t.Fatal(err)
		}
		seed := strings.Repeat("0123456789abcdef", 4)
		for _, mode := range []string{"page", "worker-wasm", "worker-js"} {
			for _, tc := range []struct {
				w0          uint32
				start       int64
				bits, count int
			}{{0, 0, 8, 1 << 22}, {0x03000001, 0, 11, 1 << 22}, {0x07000000, 0, 13, 1 << 22}, {0x01000000, 0xfff00000, 12, 1 << 20}, {0, 5, 0, 10}, {0, 0, 30, 1000}} {
				script := fmt.Sprintf(`(async () => {
					const s = document.querySelector('script[data-worker]').dataset, seed = %q, mode = %q;
					const q = {puzzle: 0, w0: %d, start: %d, count: %d, bits: %d};
					const module = await WebAssembly.compileStreaming(fetch(s.wasm));
					if (mode === 'page') {
						const x = new WebAssembly.Instance(module, {}).exports, words = [];
						for (let i = 0; i < 16; i++) words.push((seed.charCodeAt(4*i) << 24) | (seed.charCodeAt(4*i+1) << 16) | (seed.charCodeAt(4*i+2) << 8) | seed.charCodeAt(4*i+3));
						x.seed(...words);
						const i = x.search(q.w0, q.start, q.count, q.bits);
						return i < 0 ? -1 : q.start + i;
					}
					return await new Promise(resolve => {
						const w = new Worker(s.worker);
						w.onmessage = ev => {
							if (ev.data.seeded) return;
							if (ev.data.wasm !== undefined) { if (!ev.data.wasm) resolve('worker refused the module'); return; }
							w.terminate();
							resolve(ev.data.n);
						};
						w.postMessage({seed});
						if (mode === 'worker-wasm') w.postMessage({module});
						w.postMessage(q);
					});
				})()`, seed, mode, int32(tc.w0), tc.start, tc.count, tc.bits)
				got, err := chromedp.Run(tab, chromedp.Evaluate[any](script, chromedp.EvalAwaitPromise))
				if err != nil {
					t.Fatal(err)
				}
				want := int64(-1)
				if tc.bits <= 0 {
					want = tc.start
				}
				for n := tc.start; want < 0 && n < tc.start+int64(tc.count); n++ {
					if leadingZeroBits(seed, uint64(tc.w0)<<32|uint64(n)&0xffffffff) >= tc.bits {
						want = n
					}
				}
				if n, ok := got.(float64); !ok || int64(n) != want {
					t.Errorf("%s, w0 %#x from %d, %d bits: found %v, Go %d", mode, tc.w0, tc.start, tc.bits, got, want)
				}
			}
		}
	})

	t.Run("screenshots and accessibility", func(t *testing.T) {
		t.Parallel()
		screenshotsAndAxe(t, browser, base)
	})
}

// Command solver measures the browser proof-of-work solver: SHA-256 hashes
// per second per Web Worker in headless Chromium, next to native Go
// SHA-256 on one core in the same run, for the same 72-byte message
// (a 64-byte seed and an 8-byte nonce); for worker.js's JavaScript search
// and for search.wasm, which the challenge page hands its workers; and
// the time a fresh worker takes for its first 4096 nonces (cold code: what
// a low difficulty costs).
//
// Run it from the repository root:
//
//	go run ./bench/solver [-chromium /usr/bin/chromium] [-hashes 2097152] [-rounds 3]
//
// It serves challenge/static/worker.js and search.wasm over TLS on
// 127.0.0.1, runs them in one worker, then in one worker per core at once,
// and prints the rates.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/chromedp/chromedp"
)

const page = `<!DOCTYPE html><html lang="en"><title>solver bench</title><script>
var seed = 'be54a3c1217992f8b95c79a476bb81f927492641fa909a58dc65ab7dbf438fc8';
var module = WebAssembly.compileStreaming(fetch('/search.wasm'));

// worker starts a worker with the seed and, for WebAssembly, the module.
function worker(wasm) {
  var w = new Worker('/worker.js');
  w.postMessage({seed: seed});
  if (wasm) w.postMessage({module: wasm});
  return w;
}

// answer calls f with the worker's next search answer.
function answer(w, f) {
  w.onmessage = function (ev) { if (ev.data.count !== undefined) f(ev.data); };
}

// cold resolves with the milliseconds a fresh worker takes for its first
// 4096 nonces.
async function cold(useWasm) {
  var w = worker(useWasm ? await module : null);
  return new Promise(function (resolve) {
    var t0 = performance.now();
    answer(w, function () { w.terminate(); resolve(performance.now() - t0); });
    w.postMessage({puzzle: 0, w0: 0, start: 0, count: 4096, bits: 32});
  });
}

// run starts n workers, each hashing count nonces that (almost surely) miss
// a 32-bit target, and resolves with the hashes per second of each worker
// and of all together.
async function run(n, count, useWasm) {
  var wasm = useWasm ? await module : null;
  return new Promise(function (resolve) {
    var done = 0, rates = [], t0;
    var ws = [];
    for (var j = 0; j < n; j++) ws.push(worker(wasm));
    // Warm up (JIT) with a short chunk, then time the real one.
    var warm = 0;
    ws.forEach(function (w, j) {
      answer(w, function () {
        if (++warm < n) return;
        t0 = performance.now();
        ws.forEach(function (w, j) {
          var start = performance.now();
          answer(w, function (m) {
            rates[j] = m.count / ((performance.now() - start) / 1000);
            w.terminate();
            if (++done === n) resolve({perWorker: rates, total: n * count / ((performance.now() - t0) / 1000)});
          });
          w.postMessage({puzzle: 0, w0: j, start: 1 << 20, count: count, bits: 32});
        });
      });
      w.postMessage({puzzle: 0, w0: j, start: 0, count: 1 << 18, bits: 32});
    });
  });
}
</script>`

func main() {
	chromium := flag.String("chromium", "/usr/bin/chromium", "the browser")
	worker := flag.String("worker", filepath.Join("challenge", "static", "worker.js"), "the solver worker script")
	hashes := flag.Int("hashes", 1<<21, "hashes per worker per round")
	rounds := flag.Int("rounds", 3, "rounds; the best is kept")
	flag.Parse()
	if err := run(*chromium, *worker, *hashes, *rounds, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "solver:", err)
		os.Exit(1)
	}
}

type result struct {
	PerWorker []float64 `json:"perWorker"`
	Total     float64   `json:"total"`
}

func run(chromium, workerPath string, hashes, rounds int, out io.Writer) error {
	js, err := os.ReadFile(workerPath)
	if err != nil {
		return fmt.Errorf("%w (run from the repository root)", err)
	}
	wasm, err := os.ReadFile(filepath.Join(filepath.Dir(workerPath), "search.wasm"))
	if err != nil {
		return err
	}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/worker.js":
			w.Header().Set("Content-Type", "text/javascript")
			w.Write(js)
		case "/search.wasm":
			w.Header().Set("Content-Type", "application/wasm")
			w.Write(wasm)
		default:
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, page)
		}
	}))
	defer srv.Close()

	profile, err := os.MkdirTemp("", "maat-solver-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(profile)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("ignore-certificate-errors", true), chromedp.UserDataDir(profile))
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(alloc)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL)); err != nil {
		return err
	}
	version, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`navigator.userAgent`))
	cores := runtime.NumCPU()
	fmt.Fprintf(out, "browser: %s\ncores: %d, rounds: %d, hashes per worker per round: %d\n", version, cores, rounds, hashes)
	for _, useWasm := range []bool{false, true} {
		name := "JavaScript"
		if useWasm {
			name = "WebAssembly"
		}
		m, err := measure(ctx, hashes, rounds, cores, useWasm)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		fmt.Fprintf(out, "\n%s search\n", name)
		fmt.Fprintf(out, "native Go SHA-256 (72 bytes), one core: %8.2f MH/s  (the full hash, 2 compressions; the worker needs 1 per nonce)\n", m.native/1e6)
		fmt.Fprintf(out, "Chromium, one worker:                   %8.2f MH/s  (best round: %.0f%% of native measured just before it)\n", m.one.Total/1e6, 100*m.bestRatio)
		fmt.Fprintf(out, "Chromium, %d workers together:           %8.2f MH/s  (per worker", cores, m.all.Total/1e6)
		for _, r := range m.all.PerWorker {
			fmt.Fprintf(out, " %.2f", r/1e6)
		}
		fmt.Fprintf(out, ")\nfresh worker, first 4096 nonces:        %8.1f ms (best round)\n", m.cold)
	}
	return nil
}

type measured struct {
	native, bestRatio, cold float64
	one, all                result
}

// measure runs rounds of: native, one worker, all workers, a cold worker.
// The machine may be busy: native and browser run back to back in each
// round, and the round with the best ratio is reported next to the best
// figures.
func measure(ctx context.Context, hashes, rounds, cores int, useWasm bool) (measured, error) {
	browse := func(n int) (result, error) {
		r, err := chromedp.Run(ctx, chromedp.Evaluate[result](fmt.Sprintf("run(%d, %d, %v)", n, hashes, useWasm), chromedp.EvalAwaitPromise))
		if err == nil && len(r.PerWorker) != n {
			err = errors.New("the page returned no rates")
		}
		return r, err
	}
	var m measured
	for range rounds {
		nat := nativeOnce(time.Second)
		r1, err := browse(1)
		if err != nil {
			return m, err
		}
		m.native = max(m.native, nat)
		m.one.Total = max(m.one.Total, r1.Total)
		m.bestRatio = max(m.bestRatio, r1.Total/nat)
		ra, err := browse(cores)
		if err != nil {
			return m, err
		}
		if ra.Total > m.all.Total {
			m.all = ra
		}
		c, err := chromedp.Run(ctx, chromedp.Evaluate[float64](fmt.Sprintf("cold(%v)", useWasm), chromedp.EvalAwaitPromise))
		if err != nil {
			return m, err
		}
		if m.cold == 0 || c < m.cold {
			m.cold = c
		}
	}
	return m, nil
}

// nativeOnce is Go's SHA-256 of a 72-byte message on one core for d, in
// hashes per second.
func nativeOnce(d time.Duration) float64 {
	var msg [72]byte
	copy(msg[:], "be54a3c1217992f8b95c79a476bb81f927492641fa909a58dc65ab7dbf438fc8")
	var sink byte
	n := 0
	start := time.Now()
	for time.Since(start) < d {
		for range 4096 {
			binary.BigEndian.PutUint64(msg[64:], uint64(n))
			s := sha256.Sum256(msg[:])
			sink ^= s[0]
			n++
		}
	}
	_ = sink
	return float64(n) / time.Since(start).Seconds()
}

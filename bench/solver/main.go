// Command solver measures the browser proof-of-work solver: SHA-256 hashes
// per second per Web Worker in headless Chromium, next to native Go
// SHA-256 on one core in the same run, for the same 72-byte message
// (a 64-byte seed and an 8-byte nonce).
//
// Run it from the repository root:
//
//	go run ./bench/solver [-chromium /usr/bin/chromium] [-hashes 2097152] [-rounds 3]
//
// It serves challenge/static/worker.js over TLS on 127.0.0.1, runs it in
// one worker, then in one worker per core at once, and prints the rates.
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
// run starts n workers, each hashing count nonces that (almost surely) miss
// a 32-bit target, and resolves with the hashes per second of each worker
// and of all together.
function run(n, count) {
  return new Promise(function (resolve) {
    var seed = 'be54a3c1217992f8b95c79a476bb81f927492641fa909a58dc65ab7dbf438fc8';
    var done = 0, rates = [], t0;
    var ws = [];
    for (var j = 0; j < n; j++) {
      var w = new Worker('/worker.js');
      w.postMessage({seed: seed});
      ws.push(w);
    }
    // Warm up (JIT) with a short chunk, then time the real one.
    var warm = 0;
    ws.forEach(function (w, j) {
      w.onmessage = function () {
        if (++warm < n) return;
        t0 = performance.now();
        ws.forEach(function (w, j) {
          var start = performance.now();
          w.onmessage = function (ev) {
            rates[j] = ev.data.count / ((performance.now() - start) / 1000);
            w.terminate();
            if (++done === n) resolve({perWorker: rates, total: n * count / ((performance.now() - t0) / 1000)});
          };
          w.postMessage({puzzle: 0, w0: j, start: 1 << 20, count: count, bits: 32});
        });
      };
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
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/worker.js":
			w.Header().Set("Content-Type", "text/javascript")
			w.Write(js)
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
	cores := runtime.NumCPU()
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
	browse := func(n int) (result, error) {
		r, err := chromedp.Run(ctx, chromedp.Evaluate[result](fmt.Sprintf("run(%d, %d)", n, hashes), chromedp.EvalAwaitPromise))
		if err == nil && len(r.PerWorker) != n {
			err = errors.New("the page returned no rates")
		}
		return r, err
	}
	// The machine may be busy: measure native and browser back to back in
	// each round, and report the round with the best ratio next to the
	// best figures.
	var native, bestRatio float64
	var one, all result
	for range rounds {
		nat := nativeOnce(time.Second)
		r1, err := browse(1)
		if err != nil {
			return err
		}
		native = max(native, nat)
		one.Total = max(one.Total, r1.Total)
		bestRatio = max(bestRatio, r1.Total/nat)
		ra, err := browse(cores)
		if err != nil {
			return err
		}
		if ra.Total > all.Total {
			all = ra
		}
	}
	version, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`navigator.userAgent`))
	fmt.Fprintf(out, "browser: %s\ncores: %d, rounds: %d, hashes per worker per round: %d\n", version, cores, rounds, hashes)
	fmt.Fprintf(out, "native Go SHA-256 (72 bytes), one core: %8.2f MH/s  (the full hash, 2 compressions; the worker needs 1 per nonce)\n", native/1e6)
	fmt.Fprintf(out, "Chromium, one worker:                   %8.2f MH/s  (best round: %.0f%% of native measured just before it)\n", one.Total/1e6, 100*bestRatio)
	fmt.Fprintf(out, "Chromium, %d workers together:           %8.2f MH/s  (per worker", cores, all.Total/1e6)
	for _, r := range all.PerWorker {
		fmt.Fprintf(out, " %.2f", r/1e6)
	}
	fmt.Fprintln(out, ")")
	return nil
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

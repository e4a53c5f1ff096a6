package fplog

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/klauspost/compress/gzip"
)

func TestWriterLines(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	w, err := NewWriter(Config{Output: &buf})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, tt := range protocolRecords {
		r := tt.rec
		r.Rules = slices.Clone(r.Rules)
		if r.Challenge != nil {
			c := *r.Challenge
			r.Challenge = &c
		}
		w.Write(&r)
		// The caller reuses its record, rules and challenge at once.
		for i := range r.Rules {
			r.Rules[i] = "reused"
		}
		if r.Challenge != nil {
			r.Challenge.Bits = 99
		}
		r.Host = "reused"
		want = append(want, tt.want)
	}
	many := Record{Time: testTime, Rules: []string{"a", "b", "c", "d", "e", "f"}, Action: ActionDeny}
	w.Write(&many)
	many.Rules[5] = "reused"
	want = append(want, `{"time":"2026-12-03T10:32:08.123Z","weight":0,"rules":["a","b","c","d","e","f"],"action":"DENY","bytes":0,"duration_ms":0}`)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if !slices.Equal(got, want) {
		t.Fatalf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if w.Written() != uint64(len(want)) || w.Dropped() != 0 {
		t.Fatalf("Written, Dropped = %d, %d; want %d, 0", w.Written(), w.Dropped(), len(want))
	}
}

func TestWriterStampsTime(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	w, err := NewWriter(Config{Output: &buf})
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now().Truncate(time.Millisecond)
	w.Write(&Record{Action: ActionAllow})
	w.Close()
	r, err := ParseLine(bytes.TrimSpace(buf.Bytes()))
	if err != nil || r.Time.Before(before) || r.Time.After(time.Now()) {
		t.Fatalf("time of a record written without one = %v, %v; want about now", r.Time, err)
	}
}

// blockedWriter never returns from Write until released.
type blockedWriter struct {
	entered chan struct{}
	release chan struct{}
}

func (b *blockedWriter) Write(p []byte) (int, error) {
	select {
	case b.entered <- struct{}{}:
	default:
	}
	<-b.release
	return len(p), nil
}

func TestWriterBlockedOutput(t *testing.T) {
	t.Parallel()
	const queue, n = 16, 10000
	out := &blockedWriter{entered: make(chan struct{}, 1), release: make(chan struct{})}
	w, err := NewWriter(Config{Output: out, QueueSize: queue})
	if err != nil {
		t.Fatal(err)
	}
	rec := protocolRecords[1].rec
	w.Write(&rec)
	<-out.entered // the writing goroutine is now stuck in the output
	for range n {
		w.Write(&rec) // must return at once: the test hangs otherwise
	}
	if got := w.Dropped(); got != n-queue {
		t.Errorf("Dropped = %d; want %d (all but the queue)", got, n-queue)
	}
	close(out.release)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := w.Written(); got != 1+queue {
		t.Errorf("Written = %d; want %d", got, 1+queue)
	}
}

func TestWriterSampling(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		sample         float64
		minAll, maxAll int
	}{
		{"all_by_default", 0, 4000, 4000},
		{"all", 1, 4000, 4000},
		{"quarter", 0.25, 700, 1300}, // mean 1000, sd 27
		{"tiny", 1e-9, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			w, err := NewWriter(Config{Output: &buf, SampleAllow: tt.sample, QueueSize: 5000})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 4100 {
				action := ActionAllow
				if i%41 == 0 {
					action = []string{ActionDeny, ActionChallenge, ActionRate, ActionPass}[i/41%4]
				}
				w.Write(&Record{Time: testTime, Action: action})
			}
			w.Close()
			c, _ := NewCounter(TopOptions{By: "action"})
			if err := c.Read(&buf); err != nil {
				t.Fatal(err)
			}
			counts := map[string]int64{}
			for _, r := range c.Rows(-1) {
				counts[r.Value] = r.Count
			}
			if n := counts[ActionAllow]; n < int64(tt.minAll) || n > int64(tt.maxAll) {
				t.Errorf("ALLOW written = %d; want %d to %d", n, tt.minAll, tt.maxAll)
			}
			if other := c.Records() - counts[ActionAllow]; other != 100 {
				t.Errorf("other actions written = %d; want all 100", other)
			}
			if w.Skipped()+uint64(counts[ActionAllow]) != 4000 || w.Dropped() != 0 {
				t.Errorf("Skipped = %d, Dropped = %d; want %d, 0", w.Skipped(), w.Dropped(), 4000-counts[ActionAllow])
			}
		})
	}
}

func TestWriterRotation(t *testing.T) {
	t.Parallel()
	const n, keep = 5000, 2
	dir := t.TempDir()
	path := filepath.Join(dir, "fp.jsonl")
	w, err := NewWriter(Config{Path: path, MaxSizeMB: 1, MaxFiles: keep, QueueSize: n})
	if err != nil {
		t.Fatal(err)
	}
	ua := strings.Repeat("x", 900) // lines of about 1 KiB: 5 MiB in all
	for i := range n {
		w.Write(&Record{Time: testTime, Path: fmt.Sprint("/", i), UserAgent: ua, Action: ActionAllow})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if w.Written() != n || w.Dropped() != 0 || w.Err() != nil {
		t.Fatalf("Written, Dropped, Err = %d, %d, %v; want %d, 0, nil", w.Written(), w.Dropped(), w.Err(), n)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var rotated []string
	for _, e := range entries {
		switch name := e.Name(); {
		case name == "fp.jsonl":
		case strings.HasPrefix(name, "fp-") && strings.HasSuffix(name, ".jsonl.gz"):
			rotated = append(rotated, filepath.Join(dir, name))
		default:
			t.Errorf("unexpected file %s", name)
		}
	}
	if len(rotated) != keep {
		t.Fatalf("%d rotated files kept; want %d", len(rotated), keep)
	}
	slices.Sort(rotated) // oldest first
	var seq []int
	for _, name := range append(rotated, path) {
		lines, size := readLog(t, name)
		if size > 1<<20 {
			t.Errorf("%s holds %d bytes; want at most 1 MiB", name, size)
		}
		for _, r := range lines {
			var i int
			fmt.Sscanf(r.Path, "/%d", &i)
			seq = append(seq, i)
		}
	}
	// The kept lines are the newest ones, in order, without a gap.
	for j, i := range seq {
		if want := n - len(seq) + j; i != want {
			t.Fatalf("line %d of the kept files is record %d; want %d", j, i, want)
		}
	}
	if len(seq) < 2<<10 {
		t.Fatalf("kept %d lines; want at least two full files", len(seq))
	}
}

// readLog reads a log file, gzipped or not, and returns its records and its
// uncompressed size.
func readLog(t *testing.T, name string) ([]Record, int) {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(name, ".gz") {
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	}
	data, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var recs []Record
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, MaxLineBytes)
	for sc.Scan() {
		rec, err := ParseLine(sc.Bytes())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		recs = append(recs, rec)
	}
	return recs, len(data)
}

func TestWriterReopen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "fp.jsonl")
	w, err := NewWriter(Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		w.Write(&Record{Time: testTime, Action: ActionDeny})
	}
	// logrotate moves the file away, then the edge gets SIGHUP.
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if err := w.Reopen(); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		w.Write(&Record{Time: testTime, Action: ActionDeny})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		want int
	}{
		{path + ".1", 10},
		{path, 5},
	}
	for _, tt := range tests {
		if lines, _ := readLog(t, tt.name); len(lines) != tt.want {
			t.Errorf("%s holds %d lines; want %d", tt.name, len(lines), tt.want)
		}
	}
}

func TestWriterClosed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  func(t *testing.T) Config
	}{
		{"file", func(t *testing.T) Config { return Config{Path: filepath.Join(t.TempDir(), "fp.jsonl")} }},
		{"stdout", func(*testing.T) Config { return Config{Path: "-"} }},
		{"output", func(*testing.T) Config { return Config{Output: io.Discard} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w, err := NewWriter(tt.cfg(t))
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); !errors.Is(err, ErrClosed) {
				t.Errorf("second Close error = %v; want ErrClosed", err)
			}
			w.Write(&Record{Action: ActionDeny})
			if w.Dropped() != 1 {
				t.Errorf("Dropped after a Write after Close = %d; want 1", w.Dropped())
			}
			if err := w.Reopen(); tt.name == "file" && !errors.Is(err, ErrClosed) {
				t.Errorf("Reopen after Close error = %v; want ErrClosed", err)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		cfg      Config
		problems int
	}{
		{"minimal", Config{Path: "fp.jsonl"}, 0},
		{"full", Config{Path: "-", MaxSizeMB: 10, MaxFiles: 3, QueueSize: 100, ClientIP: ClientIPHash, HashKey: make([]byte, 32), SampleAllow: 0.1}, 0},
		{"no_path", Config{}, 1},
		{"negatives", Config{Path: "-", MaxSizeMB: -1, MaxFiles: -1, QueueSize: -1}, 3},
		{"bad_mode", Config{Path: "-", ClientIP: "anonymize"}, 1},
		{"hash_without_key", Config{Path: "-", ClientIP: ClientIPHash, HashKey: []byte("short")}, 1},
		{"sample_out_of_range", Config{Path: "-", SampleAllow: 1.5}, 1},
		{"everything_wrong", Config{MaxFiles: -2, ClientIP: ClientIPHash, SampleAllow: -1}, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.cfg.Validate()
			var n int
			if err != nil {
				if !errors.Is(err, ErrConfig) {
					t.Fatalf("Validate error %v does not wrap ErrConfig", err)
				}
				n = len(err.(interface{ Unwrap() []error }).Unwrap())
			}
			if n != tt.problems {
				t.Fatalf("Validate = %v: %d problems; want %d", err, n, tt.problems)
			}
		})
	}
}

func TestNewWriterMissingDirectory(t *testing.T) {
	t.Parallel()
	if _, err := NewWriter(Config{Path: filepath.Join(t.TempDir(), "missing", "fp.jsonl")}); err == nil {
		t.Fatal("NewWriter in a missing directory succeeded")
	}
}

// BenchmarkWrite measures the caller's side of Write, the cost a request
// pays. In "queued" the writing goroutine is held in its output and the
// benchmark empties the queue with the timer stopped, so that every record
// takes the queue path and the figure is the request's own cost. In
// "saturated" the goroutine encodes on the other core and falls behind, and
// most records take the drop path (reported as dropped/op).
func BenchmarkWrite(b *testing.B) {
	challenge := protocolRecords[1].rec
	sixRules := challenge
	sixRules.Rules = []string{"a", "b", "c", "d", "e", "f"}
	benchmarks := []struct {
		name     string
		rec      Record
		parallel bool
		queued   bool
	}{
		{"queued", challenge, false, true},
		{"queued_six_rules", sixRules, false, true},
		{"saturated", challenge, false, false},
		{"saturated_parallel", challenge, true, false},
	}
	b.Run("paced", func(b *testing.B) {
		r := challenge
		r.RemoteIP = netip.MustParseAddr("2001:db8::1")
		w, err := NewWriter(Config{Output: io.Discard})
		if err != nil {
			b.Fatal(err)
		}
		defer w.Close()
		benchPaced(b, func() { w.Write(&r) })
		b.ReportMetric(float64(w.Dropped())/float64(b.N), "dropped/op")
	})
	for _, bm := range benchmarks {
		b.Run(bm.name, func(b *testing.B) {
			r := bm.rec
			r.RemoteIP = netip.MustParseAddr("2001:db8::1")
			benchWrite(b, r, bm.queued, bm.parallel, func(out io.Writer, queue int) (*sink[entry], func(*Record), error) {
				w, err := NewWriter(Config{Output: out, QueueSize: queue})
				if err != nil {
					return nil, nil, err
				}
				return &w.sink, w.Write, nil
			})
		})
	}
}

// benchWrite is the loop of BenchmarkWrite and BenchmarkAccessWrite. open
// builds a writer on out with a queue of the given length and returns its
// sink and its Write. With queued, the writing goroutine is held in its
// output, so that every record takes the queue (emptied now and then,
// untimed); otherwise it encodes on another core and falls behind.
func benchWrite[E, R any](b *testing.B, rec R, queued, parallel bool, open func(out io.Writer, queue int) (*sink[E], func(*R), error)) {
	const queue = 1 << 13
	var out io.Writer = io.Discard
	blocked := &blockedWriter{entered: make(chan struct{}, 1), release: make(chan struct{})}
	if queued {
		out = blocked
	}
	s, write, err := open(out, queue)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	defer close(blocked.release)
	r := rec
	if queued {
		write(&r)
		<-blocked.entered
	}
	b.ReportAllocs()
	if parallel {
		b.RunParallel(func(pb *testing.PB) {
			r := r
			for pb.Next() {
				write(&r)
			}
		})
	} else {
		i := 0
		for b.Loop() {
			write(&r)
			if i++; queued && i%queue == 0 {
				b.StopTimer()
				for len(s.queue) > 0 {
					<-s.queue
				}
				b.StartTimer()
			}
		}
	}
	b.ReportMetric(float64(s.Dropped())/float64(b.N), "dropped/op")
}

func BenchmarkAppendJSON(b *testing.B) {
	r := protocolRecords[1].rec
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	for b.Loop() {
		buf = r.AppendJSON(buf[:0])
	}
}

func TestWriterLeftovers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "fp.jsonl")
	line := append((&Record{Time: testTime, Action: ActionDeny}).AppendJSON(nil), '\n')
	// A process stopped while compressing; older rotated files are there.
	leftover := filepath.Join(dir, "fp-2026-12-01T00-00-00.000.jsonl")
	files := map[string][]byte{
		leftover: line,
		filepath.Join(dir, "fp-2026-11-01T00-00-00.000.jsonl.gz"): nil,
		filepath.Join(dir, "other.jsonl"):                         line,
	}
	for name, data := range files {
		if err := os.WriteFile(name, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	w, err := NewWriter(Config{Path: path, MaxFiles: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		exists bool
	}{
		{leftover, false},
		{leftover + ".gz", true},
		{filepath.Join(dir, "fp-2026-11-01T00-00-00.000.jsonl.gz"), false}, // beyond MaxFiles
		{filepath.Join(dir, "other.jsonl"), true},
	}
	for _, tt := range tests {
		if _, err := os.Stat(tt.name); (err == nil) != tt.exists {
			t.Errorf("%s exists: %v; want %v", tt.name, err == nil, tt.exists)
		}
	}
	if lines, _ := readLog(t, leftover+".gz"); len(lines) != 1 {
		t.Errorf("the compressed leftover holds %d lines; want 1", len(lines))
	}
}

// countingWriter counts the writes it takes and the lines in them.
type countingWriter struct {
	mu            sync.Mutex
	writes, lines int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes++
	c.lines += bytes.Count(p, []byte("\n"))
	return len(p), nil
}

func (c *countingWriter) counts() (writes, lines int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes, c.lines
}

// TestWriterBatchesSteadyStream sends records one at a time, as requests
// arrive, for a while: the output gets a write per flushDelay or so, not
// one per line. A line after a quiet spell is written at once. It runs in a
// synctest bubble: the durations are exact and the fake clock moves only
// when the writing goroutine waits.
func TestWriterBatchesSteadyStream(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		out := &countingWriter{}
		w, err := NewWriter(Config{Output: out})
		if err != nil {
			t.Fatal(err)
		}
		rec := Record{Time: testTime, Action: ActionAllow, Host: "example.org"}
		const n, gap = 1000, 300 * time.Microsecond
		start := time.Now()
		for range n {
			w.Write(&rec)
			time.Sleep(gap) // the next request arrives
		}
		elapsed := time.Since(start)
		// After the stream, a quiet spell, then one line: written at once,
		// before Close and before the clock moves.
		time.Sleep(2 * flushDelay)
		if got := w.Written(); got != n {
			t.Fatalf("Written = %d after a quiet spell, want %d", got, n)
		}
		before, _ := out.counts()
		quiet := time.Now()
		w.Write(&rec)
		synctest.Wait() // the writing goroutine is idle again
		if got := w.Written(); got != n+1 || time.Since(quiet) != 0 {
			t.Fatalf("Written = %d after %v, want %d at once", got, time.Since(quiet), n+1)
		}
		if after, _ := out.counts(); after != before+1 {
			t.Errorf("the line after a quiet spell took %d writes, want 1", after-before)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		writes, lines := out.counts()
		if lines != n+1 {
			t.Fatalf("%d lines written, want %d", lines, n+1)
		}
		// One write for the first line, one per flushDelay of the stream,
		// one for the line after the quiet spell.
		if bound := 2 + int(elapsed/flushDelay) + 1; writes > bound {
			t.Errorf("%d writes for %d lines over %v, want at most %d", writes, n+1, elapsed, bound)
		}
		t.Logf("%d lines over %v: %d writes", n+1, elapsed, writes)
	})
}

// BenchmarkEncode measures the writing goroutine's cost per line, the CPU
// a request costs off its path: encoding a queued record, with its client
// address as each mode writes it, into the batch (flushed to io.Discard).
func BenchmarkEncode(b *testing.B) {
	for _, mode := range []string{ClientIPFull, ClientIPPrefix, ClientIPHash} {
		b.Run(mode, func(b *testing.B) {
			w, err := NewWriter(Config{Output: io.Discard, ClientIP: mode, HashKey: make([]byte, 32)})
			if err != nil {
				b.Fatal(err)
			}
			w.Close()
			// A sink of its own, not started: the benchmark is its writing
			// goroutine.
			s := &sink[entry]{encode: w.encode, out: io.Discard, batch: make([]byte, 0, bufferBytes)}
			r := protocolRecords[1].rec
			r.RemoteIP = netip.MustParseAddr("2001:db8::1")
			e := newEntry(&r)
			b.ReportAllocs()
			for b.Loop() {
				s.cur = e // as run receives it
				s.write(&s.cur)
			}
		})
	}
}

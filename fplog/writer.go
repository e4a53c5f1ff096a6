package fplog

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults for the zero fields of a Config.
const (
	DefaultMaxSizeMB = 100
	DefaultMaxFiles  = 10
	DefaultQueueSize = 8192
)

// bufferBytes is the size of the batch of lines written to the output at
// once; a smaller batch is written whenever the queue is empty.
const bufferBytes = 64 << 10

// inlineRules is how many rules a queued record holds without allocating.
const inlineRules = 4

// Config configures a Writer. Only Path (or Output) is required.
type Config struct {
	// Path is the log file, or "-" for the standard output. The file is
	// opened for appending and created with mode 0640; its directory must
	// exist. Ignored if Output is set.
	Path string
	// Output, if set, receives the lines instead of Path, without rotation.
	// The Writer does not close it.
	Output io.Writer
	// MaxSizeMB is the size in MiB at which the file is rotated: renamed to
	// <name>-<UTC time><ext>, then compressed with gzip in the background.
	// If zero, DefaultMaxSizeMB is used.
	MaxSizeMB int
	// MaxFiles is the number of rotated files kept; older ones are removed.
	// If zero, DefaultMaxFiles is used.
	MaxFiles int
	// QueueSize is the number of records waiting to be written; when it is
	// full, records are dropped and counted, never waited for. If zero,
	// DefaultQueueSize is used.
	QueueSize int
	// ClientIP is how remote_ip is written: ClientIPFull, ClientIPPrefix,
	// ClientIPHash or ClientIPNone. If empty, ClientIPFull is used.
	ClientIP string
	// HashKey is the secret of ClientIPHash, at least MinHashKeyBytes long,
	// so that hashed addresses cannot be recovered by hashing every address.
	HashKey []byte
	// SampleAllow is the fraction of ALLOW records written, between 0 and 1;
	// records of every other action are all written. If zero, every ALLOW
	// record is written.
	SampleAllow float64
}

// ErrConfig is wrapped by the errors of Config.Validate.
var ErrConfig = errors.New("fplog: invalid config")

// ErrClosed is returned by a Writer used after Close.
var ErrClosed = errors.New("fplog: writer closed")

// Validate reports every problem of the configuration at once.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...))
	}
	if c.Path == "" && c.Output == nil {
		bad("no path")
	}
	if c.MaxSizeMB < 0 {
		bad("max_size_mb %d is negative", c.MaxSizeMB)
	}
	if c.MaxFiles < 0 {
		bad("max_files %d is negative", c.MaxFiles)
	}
	if c.QueueSize < 0 {
		bad("queue size %d is negative", c.QueueSize)
	}
	switch c.ClientIP {
	case "", ClientIPFull, ClientIPPrefix, ClientIPNone:
	case ClientIPHash:
		if len(c.HashKey) < MinHashKeyBytes {
			bad("client_ip hash needs a key of at least %d bytes, not %d", MinHashKeyBytes, len(c.HashKey))
		}
	default:
		bad("client_ip %q is not full, prefix, hash or none", c.ClientIP)
	}
	if math.IsNaN(c.SampleAllow) || c.SampleAllow < 0 || c.SampleAllow > 1 {
		bad("sample_allow %v is not between 0 and 1", c.SampleAllow)
	}
	return errors.Join(errs...)
}

// Writer writes records to the log from a goroutine of its own, so that the
// request that calls Write never waits for the disk. Its methods are safe for
// concurrent use.
type Writer struct {
	mode    string
	key     []byte
	sample  float64 // fraction of ALLOW kept; 1 = all
	path    string  // "" when writing to an io.Writer
	maxSize int64
	keep    int

	queue   chan entry
	control chan control
	done    chan struct{}
	closed  atomic.Bool

	written atomic.Uint64
	dropped atomic.Uint64
	skipped atomic.Uint64

	errMu sync.Mutex
	err   error

	// Owned by the writing goroutine.
	out      io.Writer
	file     *os.File
	batch    []byte // lines not yet written to out
	pending  uint64 // lines in batch
	size     int64  // of the file, batch included
	line     []byte
	rotated  chan string // to the compressor
	compDone chan struct{}
}

// entry is a queued copy of a record: the caller may reuse its Record, its
// Rules and its Challenge as soon as Write returns.
type entry struct {
	rec          Record
	challenge    Challenge
	hasChallenge bool
	nRules       int
	rules        [inlineRules]string
}

type control struct {
	close bool // else reopen
	reply chan error
}

// NewWriter opens the log and starts its writing goroutine. Close stops it.
func NewWriter(cfg Config) (*Writer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	w := &Writer{
		mode:    orDefault(cfg.ClientIP, ClientIPFull),
		key:     slices.Clone(cfg.HashKey),
		sample:  cfg.SampleAllow,
		maxSize: int64(orDefault(cfg.MaxSizeMB, DefaultMaxSizeMB)) << 20,
		keep:    orDefault(cfg.MaxFiles, DefaultMaxFiles),
		queue:   make(chan entry, orDefault(cfg.QueueSize, DefaultQueueSize)),
		control: make(chan control),
		done:    make(chan struct{}),
	}
	if w.sample == 0 {
		w.sample = 1
	}
	switch {
	case cfg.Output != nil:
		w.out = cfg.Output
	case cfg.Path == "-":
		w.out = os.Stdout
	default:
		w.path = cfg.Path
		if err := w.open(); err != nil {
			return nil, err
		}
		w.rotated = make(chan string, 64)
		w.compDone = make(chan struct{})
		go w.compressor()
	}
	w.batch = make([]byte, 0, bufferBytes)
	go w.run()
	return w, nil
}

// orDefault returns v, or def if v is the zero value.
func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Write queues a copy of r, or drops it (and counts it) if the queue is full
// or the Writer closed. A zero r.Time is set to the current time. ALLOW
// records are sampled as Config.SampleAllow says. Write never blocks; it
// allocates only to copy more than four rules.
func (w *Writer) Write(r *Record) {
	if w.closed.Load() {
		w.dropped.Add(1)
		return
	}
	if w.sample < 1 && r.Action == ActionAllow && rand.Float64() >= w.sample {
		w.skipped.Add(1)
		return
	}
	e := entry{rec: *r, nRules: len(r.Rules)}
	if r.Challenge != nil {
		e.challenge, e.hasChallenge = *r.Challenge, true
		e.rec.Challenge = nil
	}
	if len(r.Rules) <= inlineRules {
		copy(e.rules[:], r.Rules)
		e.rec.Rules = nil
	} else {
		e.rec.Rules = slices.Clone(r.Rules)
	}
	if e.rec.Time.IsZero() {
		e.rec.Time = time.Now()
	}
	select {
	case w.queue <- e:
	default:
		w.dropped.Add(1)
	}
}

// Written returns the number of lines the file or output has taken.
func (w *Writer) Written() uint64 { return w.written.Load() }

// Dropped returns the number of records lost: the queue was full, the
// Writer closed, or the output failed.
func (w *Writer) Dropped() uint64 { return w.dropped.Load() }

// Skipped returns the number of ALLOW records left out by sampling.
func (w *Writer) Skipped() uint64 { return w.skipped.Load() }

// Err returns the most recent error of writing, rotating or compressing, or
// nil. Such errors drop lines; they do not stop the Writer.
func (w *Writer) Err() error {
	w.errMu.Lock()
	defer w.errMu.Unlock()
	return w.err
}

func (w *Writer) setErr(err error) {
	w.errMu.Lock()
	w.err = err
	w.errMu.Unlock()
}

// Reopen closes and reopens the log file, after an external tool (logrotate)
// has moved it away; queued records go to the old file first. It does
// nothing for the standard output or an io.Writer.
func (w *Writer) Reopen() error {
	if w.path == "" {
		return nil
	}
	return w.send(control{})
}

// Close writes the queued records, flushes them, closes the file and waits
// for the compression of rotated files. Records written after Close are
// dropped.
func (w *Writer) Close() error {
	if w.closed.Swap(true) {
		return ErrClosed
	}
	return w.send(control{close: true})
}

func (w *Writer) send(c control) error {
	c.reply = make(chan error, 1)
	select {
	case w.control <- c:
		return <-c.reply
	case <-w.done:
		return ErrClosed
	}
}

// run is the writing goroutine.
func (w *Writer) run() {
	defer close(w.done)
	for {
		select {
		case e := <-w.queue:
			w.write(&e)
			w.drain(len(w.queue))
			if len(w.queue) == 0 {
				w.flush()
			}
		case c := <-w.control:
			w.drain(len(w.queue))
			err := w.flush()
			if !c.close {
				if w.file != nil {
					err = errors.Join(err, w.file.Close())
				}
				c.reply <- errors.Join(err, w.open())
				continue
			}
			if w.file != nil {
				err = errors.Join(err, w.file.Close())
				close(w.rotated)
				<-w.compDone
			}
			c.reply <- err
			return
		}
	}
}

// drain writes up to n queued records.
func (w *Writer) drain(n int) {
	for range n {
		select {
		case e := <-w.queue:
			w.write(&e)
		default:
			return
		}
	}
}

// flush writes the batch to the output. Lines count as written once the
// output took them, and as dropped if it failed.
func (w *Writer) flush() error {
	if len(w.batch) == 0 {
		return nil
	}
	_, err := w.out.Write(w.batch)
	if err != nil {
		err = fmt.Errorf("fplog: write: %w", err)
		w.setErr(err)
		w.dropped.Add(w.pending)
	} else {
		w.written.Add(w.pending)
	}
	w.batch, w.pending = w.batch[:0], 0
	return err
}

// write encodes one record and writes it, rotating the file first if the
// line would make it larger than the limit.
func (w *Writer) write(e *entry) {
	r := &e.rec
	if r.Rules == nil && e.nRules > 0 {
		r.Rules = e.rules[:e.nRules]
	}
	if e.hasChallenge {
		r.Challenge = &e.challenge
	}
	r.ClientIP = clientIP(w.mode, w.key, r.RemoteIP)
	r.RemoteIP = netip.Addr{}
	w.line = append(r.AppendJSON(w.line[:0]), '\n')
	if w.file != nil && w.size > 0 && w.size+int64(len(w.line)) > w.maxSize {
		if err := w.rotate(); err != nil {
			w.setErr(err)
		}
	}
	w.batch = append(w.batch, w.line...)
	w.pending++
	w.size += int64(len(w.line))
	if len(w.batch) >= bufferBytes {
		w.flush()
	}
}

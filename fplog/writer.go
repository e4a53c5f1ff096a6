package fplog

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
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
// once; a smaller batch is written when the queue is empty, at most every
// flushDelay.
const bufferBytes = 64 << 10

// flushDelay is the longest a line waits in the batch: under a steady
// stream of requests the output gets a write per flushDelay, not per line.
const flushDelay = 100 * time.Millisecond

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
	errs := c.settings().problems()
	if math.IsNaN(c.SampleAllow) || c.SampleAllow < 0 || c.SampleAllow > 1 {
		errs = append(errs, fmt.Errorf("%w: sample_allow %v is not between 0 and 1", ErrConfig, c.SampleAllow))
	}
	return errors.Join(errs...)
}

func (c *Config) settings() settings {
	return settings{
		path: c.Path, output: c.Output, maxSizeMB: c.MaxSizeMB, maxFiles: c.MaxFiles,
		queueSize: c.QueueSize, clientIP: c.ClientIP, hashKey: c.HashKey,
	}
}

// Writer writes records to the log from a goroutine of its own, so that the
// request that calls Write never waits for the disk. Its methods are safe for
// concurrent use.
type Writer struct {
	sink[entry]

	sample  float64 // fraction of ALLOW kept; 1 = all
	skipped atomic.Uint64

	// Owned by the writing goroutine.
	addr *addrEncoder
	ip   []byte // remote_ip of the line being encoded
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

// NewWriter opens the log and starts its writing goroutine. Close stops it.
func NewWriter(cfg Config) (*Writer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	w := &Writer{
		sample: cfg.SampleAllow,
		addr:   newAddrEncoder(cfg.ClientIP, cfg.HashKey),
	}
	if w.sample == 0 {
		w.sample = 1
	}
	if err := w.start(cfg.settings(), w.encode); err != nil {
		return nil, err
	}
	return w, nil
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
	e := newEntry(r)
	if e.rec.Time.IsZero() {
		e.rec.Time = time.Now()
	}
	w.put(&e)
}

// newEntry copies r into an entry that shares nothing with it.
func newEntry(r *Record) entry {
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
	return e
}

// Skipped returns the number of ALLOW records left out by sampling.
func (w *Writer) Skipped() uint64 { return w.skipped.Load() }

// encode appends the JSON line of a queued record, with its client address
// as the configuration says.
func (w *Writer) encode(b []byte, e *entry) []byte {
	r := &e.rec
	if r.Rules == nil && e.nRules > 0 {
		r.Rules = e.rules[:e.nRules]
	}
	if e.hasChallenge {
		r.Challenge = &e.challenge
	}
	r.ClientIP = ""
	w.ip = w.addr.appendJSON(w.ip[:0], r.RemoteIP)
	return r.appendJSON(b, w.ip)
}

package fplog

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// settings are the fields that Config and AccessConfig share: where the
// lines go, how the file rotates, how long the queue is and how the client
// address is written. See Config for each.
type settings struct {
	path      string
	output    io.Writer
	maxSizeMB int
	maxFiles  int
	queueSize int
	clientIP  string
	hashKey   []byte
}

// problems returns every problem of the shared settings, each wrapping
// ErrConfig.
func (c settings) problems() []error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...))
	}
	if c.path == "" && c.output == nil {
		bad("no path")
	}
	if c.maxSizeMB < 0 {
		bad("max_size_mb %d is negative", c.maxSizeMB)
	}
	if c.maxFiles < 0 {
		bad("max_files %d is negative", c.maxFiles)
	}
	if c.queueSize < 0 {
		bad("queue size %d is negative", c.queueSize)
	}
	switch c.clientIP {
	case "", ClientIPFull, ClientIPPrefix, ClientIPNone:
	case ClientIPHash:
		if len(c.hashKey) < MinHashKeyBytes {
			bad("client_ip hash needs a key of at least %d bytes, not %d", MinHashKeyBytes, len(c.hashKey))
		}
	default:
		bad("client_ip %q is not full, prefix, hash or none", c.clientIP)
	}
	return errs
}

// sink is the machinery every log of the package shares: a bounded queue of
// entries of type E that callers fill without waiting, and a goroutine that
// encodes them into lines, batches the lines and writes them to a file that
// it rotates, compresses and prunes (rotate.go), or to an io.Writer.
type sink[E any] struct {
	// encode appends the line of an entry, without its newline. It runs in
	// the writing goroutine and may change the entry.
	encode func(b []byte, e *E) []byte

	path    string // "" when writing to an io.Writer
	maxSize int64
	keep    int

	queue    chan E
	wake     chan struct{} // the writing goroutine's signal, of capacity 1
	wakeAt   int           // the queue length at which a put wakes it
	sleeping atomic.Bool   // it waits for wake, with no timer armed
	control  chan control
	done     chan struct{}
	closed   atomic.Bool

	written atomic.Uint64
	dropped atomic.Uint64

	errMu sync.Mutex
	err   error

	// Owned by the writing goroutine.
	out      io.Writer
	file     *os.File
	cur      E         // the entry being written: a field, so that it does not escape anew each time
	batch    []byte    // lines not yet written to out
	flushed  time.Time // when batch was last written
	pending  uint64    // lines in batch
	size     int64     // of the file, batch included
	line     []byte
	rotated  chan string // to the compressor
	compDone chan struct{}
}

type control struct {
	close bool // else reopen
	reply chan error
}

// start opens the output of validated settings and starts the writing
// goroutine (and the compressor, for a file).
func (w *sink[E]) start(c settings, encode func(b []byte, e *E) []byte) error {
	w.encode = encode
	w.maxSize = int64(orDefault(c.maxSizeMB, DefaultMaxSizeMB)) << 20
	w.keep = orDefault(c.maxFiles, DefaultMaxFiles)
	w.queue = make(chan E, orDefault(c.queueSize, DefaultQueueSize))
	w.wake = make(chan struct{}, 1)
	w.wakeAt = max(1, cap(w.queue)/2)
	w.sleeping.Store(true)
	w.control = make(chan control)
	w.done = make(chan struct{})
	switch {
	case c.output != nil:
		w.out = c.output
	case c.path == "-":
		w.out = os.Stdout
	default:
		w.path = c.path
		if err := w.open(); err != nil {
			return err
		}
		w.rotated = make(chan string, 64)
		w.compDone = make(chan struct{})
		go w.compressor()
	}
	w.batch = make([]byte, 0, bufferBytes)
	go w.run()
	return nil
}

// orDefault returns v, or def if v is the zero value.
func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// put queues a copy of *e, or drops it (and counts it) if the queue is full
// or the log closed. It never blocks.
func (w *sink[E]) put(e *E) {
	if w.closed.Load() {
		w.dropped.Add(1)
		return
	}
	select {
	case w.queue <- *e:
	default:
		w.dropped.Add(1)
		return
	}
	// The writing goroutine is woken by the first entry after a quiet
	// spell, and by a queue half full; otherwise its timer collects the
	// entries every flushDelay, so that a steady stream of requests does
	// not switch to it once per line.
	if w.sleeping.Load() && w.sleeping.CompareAndSwap(true, false) || len(w.queue) >= w.wakeAt {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// Written returns the number of lines the file or output has taken.
func (w *sink[E]) Written() uint64 { return w.written.Load() }

// Dropped returns the number of records lost: the queue was full, the
// Writer closed, or the output failed.
func (w *sink[E]) Dropped() uint64 { return w.dropped.Load() }

// Err returns the most recent error of writing, rotating or compressing, or
// nil. Such errors drop lines; they do not stop the Writer.
func (w *sink[E]) Err() error {
	w.errMu.Lock()
	defer w.errMu.Unlock()
	return w.err
}

func (w *sink[E]) setErr(err error) {
	w.errMu.Lock()
	w.err = err
	w.errMu.Unlock()
}

// Reopen closes and reopens the log file, after an external tool (logrotate)
// has moved it away; queued records go to the old file first. It does
// nothing for the standard output or an io.Writer.
func (w *sink[E]) Reopen() error {
	if w.path == "" {
		return nil
	}
	return w.send(control{})
}

// Close writes the queued records, flushes them, closes the file and waits
// for the compression of rotated files. Records written after Close are
// dropped.
func (w *sink[E]) Close() error {
	if w.closed.Swap(true) {
		return ErrClosed
	}
	return w.send(control{close: true})
}

func (w *sink[E]) send(c control) error {
	c.reply = make(chan error, 1)
	select {
	case w.control <- c:
		return <-c.reply
	case <-w.done:
		return ErrClosed
	}
}

// run is the writing goroutine. It sleeps until a put wakes it (the first
// entry after a quiet spell, or a queue half full), writes what is queued
// and the batch at once, unless it wrote less than flushDelay ago: then its
// timer collects the entries that come in the meantime, so that a steady
// stream of requests costs a wake-up and a write per flushDelay instead of
// one per line. Once a round of the timer finds the queue empty, it sleeps
// again.
func (w *sink[E]) run() {
	defer close(w.done)
	timer := time.NewTimer(0)
	<-timer.C
	armed := false
	for {
		select {
		case <-w.wake:
			w.drain(len(w.queue))
			if armed {
				continue // a queue half full: the timer still runs
			}
			if wait := flushDelay - time.Since(w.flushed); wait > 0 {
				timer.Reset(wait)
			} else {
				w.flush()
				timer.Reset(flushDelay)
			}
			armed = true
		case <-timer.C:
			armed = false
			n := len(w.queue)
			w.drain(n)
			w.flush()
			if n == 0 {
				// Asleep from here, unless an entry came in before the
				// flag was set (its put saw it clear and woke nobody).
				w.sleeping.Store(true)
				if len(w.queue) == 0 || !w.sleeping.CompareAndSwap(true, false) {
					continue
				}
			}
			timer.Reset(flushDelay)
			armed = true
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

// drain writes up to n queued entries.
func (w *sink[E]) drain(n int) {
	for range n {
		select {
		case w.cur = <-w.queue:
			w.write(&w.cur)
		default:
			return
		}
	}
}

// flush writes the batch to the output. Lines count as written once the
// output took them, and as dropped if it failed.
func (w *sink[E]) flush() error {
	if len(w.batch) == 0 {
		return nil
	}
	w.flushed = time.Now()
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

// write encodes one entry and writes its line, rotating the file first if
// the line would make it larger than the limit.
func (w *sink[E]) write(e *E) {
	w.line = append(w.encode(w.line[:0], e), '\n')
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

package fplog

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
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

	queue   chan E
	control chan control
	done    chan struct{}
	closed  atomic.Bool

	written atomic.Uint64
	dropped atomic.Uint64

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

type control struct {
	close bool // else reopen
	reply chan error
}

// start opens the output of validated settings and starts the writing
// goroutine (and the compressor, for a file).
func (s *sink[E]) start(c settings, encode func(b []byte, e *E) []byte) error {
	s.encode = encode
	s.maxSize = int64(orDefault(c.maxSizeMB, DefaultMaxSizeMB)) << 20
	s.keep = orDefault(c.maxFiles, DefaultMaxFiles)
	s.queue = make(chan E, orDefault(c.queueSize, DefaultQueueSize))
	s.control = make(chan control)
	s.done = make(chan struct{})
	switch {
	case c.output != nil:
		s.out = c.output
	case c.path == "-":
		s.out = os.Stdout
	default:
		s.path = c.path
		if err := s.open(); err != nil {
			return err
		}
		s.rotated = make(chan string, 64)
		s.compDone = make(chan struct{})
		go s.compressor()
	}
	s.batch = make([]byte, 0, bufferBytes)
	go s.run()
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
func (s *sink[E]) put(e *E) {
	if s.closed.Load() {
		s.dropped.Add(1)
		return
	}
	select {
	case s.queue <- *e:
	default:
		s.dropped.Add(1)
	}
}

// Written returns the number of lines the file or output has taken.
func (s *sink[E]) Written() uint64 { return s.written.Load() }

// Dropped returns the number of records lost: the queue was full, the
// Writer closed, or the output failed.
func (s *sink[E]) Dropped() uint64 { return s.dropped.Load() }

// Err returns the most recent error of writing, rotating or compressing, or
// nil. Such errors drop lines; they do not stop the Writer.
func (s *sink[E]) Err() error {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	return s.err
}

func (s *sink[E]) setErr(err error) {
	s.errMu.Lock()
	s.err = err
	s.errMu.Unlock()
}

// Reopen closes and reopens the log file, after an external tool (logrotate)
// has moved it away; queued records go to the old file first. It does
// nothing for the standard output or an io.Writer.
func (s *sink[E]) Reopen() error {
	if s.path == "" {
		return nil
	}
	return s.send(control{})
}

// Close writes the queued records, flushes them, closes the file and waits
// for the compression of rotated files. Records written after Close are
// dropped.
func (s *sink[E]) Close() error {
	if s.closed.Swap(true) {
		return ErrClosed
	}
	return s.send(control{close: true})
}

func (s *sink[E]) send(c control) error {
	c.reply = make(chan error, 1)
	select {
	case s.control <- c:
		return <-c.reply
	case <-s.done:
		return ErrClosed
	}
}

// run is the writing goroutine.
func (s *sink[E]) run() {
	defer close(s.done)
	for {
		select {
		case e := <-s.queue:
			s.write(&e)
			s.drain(len(s.queue))
			if len(s.queue) == 0 {
				s.flush()
			}
		case c := <-s.control:
			s.drain(len(s.queue))
			err := s.flush()
			if !c.close {
				if s.file != nil {
					err = errors.Join(err, s.file.Close())
				}
				c.reply <- errors.Join(err, s.open())
				continue
			}
			if s.file != nil {
				err = errors.Join(err, s.file.Close())
				close(s.rotated)
				<-s.compDone
			}
			c.reply <- err
			return
		}
	}
}

// drain writes up to n queued entries.
func (s *sink[E]) drain(n int) {
	for range n {
		select {
		case e := <-s.queue:
			s.write(&e)
		default:
			return
		}
	}
}

// flush writes the batch to the output. Lines count as written once the
// output took them, and as dropped if it failed.
func (s *sink[E]) flush() error {
	if len(s.batch) == 0 {
		return nil
	}
	_, err := s.out.Write(s.batch)
	if err != nil {
		err = fmt.Errorf("fplog: write: %w", err)
		s.setErr(err)
		s.dropped.Add(s.pending)
	} else {
		s.written.Add(s.pending)
	}
	s.batch, s.pending = s.batch[:0], 0
	return err
}

// write encodes one entry and writes its line, rotating the file first if
// the line would make it larger than the limit.
func (s *sink[E]) write(e *E) {
	s.line = append(s.encode(s.line[:0], e), '\n')
	if s.file != nil && s.size > 0 && s.size+int64(len(s.line)) > s.maxSize {
		if err := s.rotate(); err != nil {
			s.setErr(err)
		}
	}
	s.batch = append(s.batch, s.line...)
	s.pending++
	s.size += int64(len(s.line))
	if len(s.batch) >= bufferBytes {
		s.flush()
	}
}

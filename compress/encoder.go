package compress

import (
	"bufio"
	"errors"
	"io"
	"sync"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// window is the back-reference window of zstd and brotli (log2 for brotli):
// small, so that many concurrent streams stay cheap, and decoders need no
// more than this per response.
const (
	zstdWindow  = 128 << 10
	brotliLGWin = 17
	// brotliBuffer gathers small writes: the brotli encoder does a block's
	// work on every Write, which makes a handler that writes a few bytes at
	// a time a hundred times slower.
	brotliBuffer = 16 << 10
)

// errReleased is returned by a sink whose encoder went back to its pool.
var errReleased = errors.New("compress: write after the response ended")

// streamWriter is what the three encoders have in common.
type streamWriter interface {
	io.WriteCloser
	Flush() error
	Reset(io.Writer)
}

// sink forwards an encoder's output to the current response. The encoder
// always writes to the same sink, so it never holds on to a response once
// it is back in its pool.
type sink struct{ w io.Writer }

func (s *sink) Write(p []byte) (int, error) {
	if s.w == nil {
		return 0, errReleased
	}
	return s.w.Write(p)
}

// encoder is a pooled streamWriter and its sink.
type encoder struct {
	sink  sink
	w     streamWriter
	fresh bool // just made: no Reset needed
}

// codec makes and pools the encoders of one content coding.
type codec struct {
	name string
	make func(io.Writer) (streamWriter, error)
	pool sync.Pool // of *encoder
}

func newCodec(name string, level Level) *codec {
	c := &codec{name: name}
	switch name {
	case Zstd:
		speed := [...]zstd.EncoderLevel{
			LevelDefault: zstd.SpeedDefault, LevelFastest: zstd.SpeedFastest,
			LevelBetter: zstd.SpeedBetterCompression, LevelBest: zstd.SpeedBestCompression,
		}[level]
		c.make = func(w io.Writer) (streamWriter, error) {
			return zstd.NewWriter(w, zstd.WithEncoderLevel(speed), zstd.WithEncoderConcurrency(1),
				zstd.WithWindowSize(zstdWindow), zstd.WithZeroFrames(true), zstd.WithLowerEncoderMem(true))
		}
	case Brotli:
		quality := [...]int{LevelDefault: 3, LevelFastest: 1, LevelBetter: 5, LevelBest: 9}[level]
		c.make = func(w io.Writer) (streamWriter, error) {
			bw := brotli.NewWriterOptions(w, brotli.WriterOptions{Quality: quality, LGWin: brotliLGWin})
			return &bufferedWriter{buf: bufio.NewWriterSize(bw, brotliBuffer), w: bw}, nil
		}
	case Gzip:
		gz := [...]int{LevelDefault: 5, LevelFastest: 1, LevelBetter: 7, LevelBest: 9}[level]
		c.make = func(w io.Writer) (streamWriter, error) { return gzip.NewWriterLevel(w, gz) }
	}
	return c
}

// get returns an encoder that starts a new stream to w.
func (c *codec) get(w io.Writer) (*encoder, error) {
	e, _ := c.pool.Get().(*encoder)
	if e == nil {
		e = &encoder{fresh: true}
		sw, err := c.make(&e.sink)
		if err != nil {
			return nil, err
		}
		e.w = sw
	}
	e.sink.w = w
	if !e.fresh {
		e.w.Reset(&e.sink)
	}
	e.fresh = false
	return e, nil
}

// put returns a closed encoder to the pool.
func (c *codec) put(e *encoder) {
	e.sink.w = nil
	c.pool.Put(e)
}

// bufferedWriter puts a buffer in front of a streamWriter.
type bufferedWriter struct {
	buf *bufio.Writer
	w   streamWriter
}

func (b *bufferedWriter) Write(p []byte) (int, error) { return b.buf.Write(p) }

func (b *bufferedWriter) Flush() error {
	if err := b.buf.Flush(); err != nil {
		return err
	}
	return b.w.Flush()
}

func (b *bufferedWriter) Close() error {
	if err := b.buf.Flush(); err != nil {
		return err
	}
	return b.w.Close()
}

func (b *bufferedWriter) Reset(dst io.Writer) {
	b.w.Reset(dst)
	b.buf.Reset(b.w)
}

package compress

import (
	"net/http"
	"sync"

	"github.com/maatproxy/maat/accept"
)

// Compressor compresses the responses of the handlers it wraps. It is safe
// for concurrent use.
type Compressor struct {
	minSize int
	types   []string // lowercase
	names   []string // offered encodings, in order of preference
	codecs  []*codec // same order as names
	writers sync.Pool
}

// New returns a Compressor for cfg, or the errors of cfg.Validate.
func New(cfg Config) (*Compressor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Compressor{minSize: cfg.minSize(), types: cfg.types(), names: cfg.encodings()}
	for _, name := range c.names {
		cd := newCodec(name, cfg.Level)
		// Make one encoder now: options that the library refuses show here,
		// not in the middle of a response.
		e, err := cd.get(nil)
		if err != nil {
			return nil, err
		}
		cd.put(e)
		c.codecs = append(c.codecs, cd)
	}
	return c, nil
}

// Wrap returns a handler that serves h's responses compressed, when the
// request accepts an encoding and the response qualifies (see the package
// documentation). HEAD requests go to h untouched.
func (c *Compressor) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead {
			h.ServeHTTP(w, r)
			return
		}
		rw := c.getWriter(w, r)
		h.ServeHTTP(rw, r)
		rw.finish()
		c.putWriter(rw)
	})
}

func (c *Compressor) getWriter(w http.ResponseWriter, r *http.Request) *responseWriter {
	rw, _ := c.writers.Get().(*responseWriter)
	if rw == nil {
		rw = &responseWriter{c: c}
	}
	rw.ResponseWriter = w
	rw.codec = nil
	if name := accept.Encoding(r.Header["Accept-Encoding"], c.names); name != "" {
		for i, n := range c.names {
			if n == name {
				rw.codec = c.codecs[i]
			}
		}
	}
	return rw
}

func (c *Compressor) putWriter(rw *responseWriter) {
	if cap(rw.buf) > 2*c.minSize {
		rw.buf = nil // grown by a large sniff; don't keep it
	}
	*rw = responseWriter{c: c, buf: rw.buf[:0]}
	c.writers.Put(rw)
}

package upstream

import "sync"

// BufferPool recycles the 32 KiB copy buffers of a reverse proxy, which
// otherwise allocates one per request (httputil.BufferPool). It pools the
// arrays themselves, so that neither Get nor Put allocates.
type BufferPool struct{ p sync.Pool }

const copyBufferSize = 32 << 10

// NewBufferPool returns an empty pool.
func NewBufferPool() *BufferPool {
	return &BufferPool{p: sync.Pool{New: func() any { return new([copyBufferSize]byte) }}}
}

// Get returns a buffer of 32 KiB.
func (b *BufferPool) Get() []byte { return b.p.Get().(*[copyBufferSize]byte)[:] }

// Put gives back a buffer Get returned.
func (b *BufferPool) Put(buf []byte) {
	if cap(buf) < copyBufferSize {
		return
	}
	b.p.Put((*[copyBufferSize]byte)(buf[:copyBufferSize]))
}

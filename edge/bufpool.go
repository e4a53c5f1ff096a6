package edge

import "sync"

// bufferPool recycles the 32 KiB copy buffers of the reverse proxy, which
// otherwise allocates one per request. It pools the arrays themselves, so
// that neither Get nor Put allocates.
type bufferPool struct{ p sync.Pool }

const copyBufferSize = 32 << 10

func newBufferPool() *bufferPool {
	return &bufferPool{p: sync.Pool{New: func() any { return new([copyBufferSize]byte) }}}
}

func (b *bufferPool) Get() []byte { return b.p.Get().(*[copyBufferSize]byte)[:] }

func (b *bufferPool) Put(buf []byte) {
	if cap(buf) < copyBufferSize {
		return
	}
	b.p.Put((*[copyBufferSize]byte)(buf[:copyBufferSize]))
}

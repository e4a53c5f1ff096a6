package edge

import "sync"

// bufferPool recycles the 32 KiB copy buffers of the reverse proxy, which
// otherwise allocates one per request.
type bufferPool struct{ p sync.Pool }

func newBufferPool() *bufferPool {
	return &bufferPool{p: sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}}
}

func (b *bufferPool) Get() []byte { return *(b.p.Get().(*[]byte)) }

func (b *bufferPool) Put(buf []byte) {
	if cap(buf) < 32<<10 {
		return
	}
	buf = buf[:32<<10]
	b.p.Put(&buf)
}

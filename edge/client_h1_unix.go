//go:build unix

package edge

import "syscall"

// quiet reports whether an idle connection can carry a request: the
// upstream has neither closed it nor sent anything since its last answer.
// Bytes an upstream sends unasked (a body longer than it announced, a
// second answer) would otherwise be read as the answer to the next
// request — another client's. One non-blocking peek at the socket.
func (pc *h1Conn) quiet() bool {
	if pc.raw == nil {
		return true // no socket to peek at (tests' pipes); the retry covers a closed one
	}
	if pc.peekFn == nil { // made once per connection: a closure per peek would allocate
		pc.peekFn = func(fd uintptr) bool {
			_, _, pc.peekErr = syscall.Recvfrom(int(fd), pc.peek[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			return true
		}
	}
	if err := pc.raw.Read(pc.peekFn); err != nil {
		return false
	}
	// Nothing to read yet. A byte (err nil, n 1), the end of the stream
	// (err nil, n 0) or an error all mean the connection is done.
	return pc.peekErr == syscall.EAGAIN || pc.peekErr == syscall.EWOULDBLOCK
}

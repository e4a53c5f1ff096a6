//go:build unix

package upstream

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
			_, pc.peekEmpty, _ = peekSocket(fd, pc.peek[:])
			return true
		}
	}
	if err := pc.raw.Read(pc.peekFn); err != nil {
		return false
	}
	// Nothing to read yet. A byte, the end of the stream or an error all
	// mean the connection is done.
	return pc.peekEmpty
}

// peekSocket looks at what waits on socket fd, without taking it or
// waiting: n bytes copied into buf, or empty when nothing has come yet
// (n 0 and not empty is the end of the stream).
func peekSocket(fd uintptr, buf []byte) (n int, empty bool, err error) {
	n, _, err = syscall.Recvfrom(int(fd), buf, syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	switch {
	case err == syscall.EAGAIN || err == syscall.EWOULDBLOCK:
		return 0, true, nil
	case err != nil:
		return 0, false, err
	}
	return n, false, nil
}

//go:build unix

package park

import "syscall"

// parkable says whether idle connections can be parked here: a parked
// connection's wait needs readable.
const parkable = true

// readable reports whether the socket fd has bytes to read, has been
// closed by its peer, or failed: a non-blocking peek, which takes nothing.
func readable(fd uintptr) bool {
	var b [1]byte
	_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return err != syscall.EAGAIN && err != syscall.EWOULDBLOCK
}

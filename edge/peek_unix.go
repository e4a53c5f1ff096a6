//go:build unix

package edge

import "syscall"

// peekSocket looks at what waits on socket fd, without taking it or
// waiting: n bytes copied into buf, or empty when nothing has come yet
// (n 0 and not empty is the end of the stream). Parking's readable uses it;
// the upstream client has its own (edge/internal/upstream).
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

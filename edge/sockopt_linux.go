package edge

import (
	"net"
	"syscall"
)

// tcpNotSentLowat is TCP_NOTSENT_LOWAT (linux/tcp.h); package syscall
// predates it.
const tcpNotSentLowat = 25

// unsentLimit is the most a client's socket holds that the kernel has not
// sent yet (TCP_NOTSENT_LOWAT). Bytes in flight are not counted, so a
// fast, distant client still gets the whole window it can take; a client
// that stops reading holds no more than this (and its receive window),
// where the kernel would otherwise let a socket's buffer grow to 4 MiB —
// the edge encrypted 400 MB into the sockets of a hundred clients that
// never read, before it noticed they were slow.
const unsentLimit = 128 << 10

// limitUnsent sets unsentLimit on c's socket, if it has one.
func limitUnsent(c net.Conn) {
	sc := socketOf(c)
	if sc == nil {
		return
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpNotSentLowat, unsentLimit)
	})
}

// socketOf is the connection under c's wrappers that has a socket, or nil.
func socketOf(c net.Conn) syscall.Conn {
	for range 8 {
		if sc, ok := c.(syscall.Conn); ok {
			return sc
		}
		nc, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		c = nc.NetConn()
	}
	return nil
}

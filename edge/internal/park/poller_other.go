//go:build !linux

package park

// poller is epoll's (poller_linux.go); elsewhere each parked connection
// waits on a goroutine of its own.
type poller struct{}

func startPoller() *poller { return nil }

func (*poller) add(*parkedConn) bool { return false }
func (*poller) remove(*parkedConn)   {}
func (*poller) close()               {}

package park

import (
	"sync"
	"syscall"
)

// poller waits for every parked connection of a Parker at once: one epoll
// instance read by one goroutine, where a goroutine for each would keep a
// stack of 2–4 KiB for as long as the connection is parked.
type poller struct {
	epfd int
	wake [2]int // a pipe whose read end, id 0, wakes the goroutine to end it
	done chan struct{}

	mu    sync.Mutex
	next  uint64
	conns map[uint64]*parkedConn
}

// startPoller starts the poller, or returns nil when epoll is refused (the
// parked connections then wait on goroutines).
func startPoller() *poller {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil
	}
	pl := &poller{epfd: epfd, done: make(chan struct{}), conns: map[uint64]*parkedConn{}}
	if err := syscall.Pipe2(pl.wake[:], syscall.O_CLOEXEC|syscall.O_NONBLOCK); err != nil {
		syscall.Close(epfd)
		return nil
	}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN}
	if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, pl.wake[0], &ev); err != nil {
		pl.closeFDs()
		return nil
	}
	go pl.run()
	return pl
}

func (pl *poller) run() {
	defer close(pl.done)
	events := make([]syscall.EpollEvent, 64)
	for {
		n, err := syscall.EpollWait(pl.epfd, events, -1)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			// Not expected; the parked connections still end when their
			// idle timeout passes or the Parker shuts down.
			return
		}
		for _, ev := range events[:n] {
			id := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
			if id == 0 {
				return
			}
			pl.mu.Lock()
			p := pl.conns[id]
			pl.mu.Unlock()
			if p != nil {
				go p.done(nil) // wakes it: reads, hands it over, may wait for net/http
			}
		}
	}
}

// add waits for p's socket to become readable (or its peer to close it),
// once, or reports false.
func (pl *poller) add(p *parkedConn) bool {
	if pl == nil {
		return false
	}
	pl.mu.Lock()
	pl.next++
	p.id = pl.next
	pl.conns[p.id] = p
	pl.mu.Unlock()
	var err error
	cerr := p.rc.Control(func(fd uintptr) {
		ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP | syscall.EPOLLONESHOT,
			Fd: int32(uint32(p.id)), Pad: int32(uint32(p.id >> 32))}
		err = syscall.EpollCtl(pl.epfd, syscall.EPOLL_CTL_ADD, int(fd), &ev)
	})
	if cerr == nil && err == nil {
		return true
	}
	pl.mu.Lock()
	delete(pl.conns, p.id)
	pl.mu.Unlock()
	return false
}

// remove forgets p, which is done. Its socket leaves the epoll set here,
// or, when it was closed already, left it then.
func (pl *poller) remove(p *parkedConn) {
	if pl == nil || p.id == 0 {
		return
	}
	pl.mu.Lock()
	delete(pl.conns, p.id)
	pl.mu.Unlock()
	_ = p.rc.Control(func(fd uintptr) {
		_ = syscall.EpollCtl(pl.epfd, syscall.EPOLL_CTL_DEL, int(fd), nil)
	})
}

// close ends the goroutine and releases the epoll instance, once every
// parked connection is done.
func (pl *poller) close() {
	if pl == nil {
		return
	}
	_, _ = syscall.Write(pl.wake[1], []byte{1})
	<-pl.done
	pl.closeFDs()
}

func (pl *poller) closeFDs() {
	syscall.Close(pl.wake[0])
	syscall.Close(pl.wake[1])
	syscall.Close(pl.epfd)
}

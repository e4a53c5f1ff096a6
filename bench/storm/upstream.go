package main

import (
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// upstream is the slow site behind the front: it serves at most slots
// requests at a time, each for service (so slots/service requests a second
// in all), and the others wait in its queue, as a small forge's
// application does. It counts what reaches it by the first segment of the
// path, which the harness's clients set to who they are: /p/… people,
// /b/KIND/… bots of KIND.
type upstream struct {
	url     string
	srv     *http.Server
	slots   chan struct{}
	service time.Duration

	queue, peakQueue atomic.Int64
	people           atomic.Int64
	bots             [numKinds]atomic.Int64
	other            atomic.Int64
	// perSecond counts the bots' requests that reached it by the second of
	// the storm they were sent in (their path's last segment, milliseconds
	// into the storm), for the time to the defence in force.
	perSecond [maxSeconds]atomic.Int64
}

// maxSeconds bounds the per-second series (and so the storm's length).
const maxSeconds = 3600

func newUpstream(slots int, rate float64) (*upstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	u := &upstream{url: "http://" + ln.Addr().String(), slots: make(chan struct{}, slots),
		service: time.Duration(float64(slots) / rate * float64(time.Second))}
	u.srv = &http.Server{Handler: u, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = u.srv.Serve(ln) }()
	return u, nil
}

func (u *upstream) close() { _ = u.srv.Close() }

// reset zeroes the counters between fronts.
func (u *upstream) reset() {
	u.peakQueue.Store(u.queue.Load())
	u.people.Store(0)
	u.other.Store(0)
	for i := range u.bots {
		u.bots[i].Store(0)
	}
	for i := range u.perSecond {
		u.perSecond[i].Store(0)
	}
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	switch {
	case strings.HasPrefix(p, "/p/"):
		u.people.Add(1)
	case strings.HasPrefix(p, "/b/"):
		k := kindOf(p[len("/b/"):])
		if k < 0 {
			u.other.Add(1)
			break
		}
		u.bots[k].Add(1)
		// Counted in the second it was sent in: the last segment.
		if ms, err := strconv.ParseInt(p[strings.LastIndexByte(p, '/')+1:], 10, 64); err == nil && ms >= 0 && ms/1000 < maxSeconds {
			u.perSecond[ms/1000].Add(1)
		}
	default:
		u.other.Add(1)
	}
	raise(&u.peakQueue, u.queue.Add(1))
	select {
	case u.slots <- struct{}{}:
	case <-r.Context().Done():
		u.queue.Add(-1)
		return
	}
	u.queue.Add(-1)
	t := time.NewTimer(u.service)
	select {
	case <-t.C:
	case <-r.Context().Done():
		t.Stop()
	}
	<-u.slots
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(page)
}

// page is what the site answers: a small HTML page.
var page = []byte("<!DOCTYPE html><title>forge</title><p>ok</p>\n")

// raise sets max to v if v is larger.
func raise(max *atomic.Int64, v int64) {
	for {
		m := max.Load()
		if v <= m || max.CompareAndSwap(m, v) {
			return
		}
	}
}

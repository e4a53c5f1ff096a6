package testattack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Upstream is the site's application: it reads every request body, then
// answers "ok"; under /big/ it answers BigSize bytes. It counts what
// reaches it: connections (at once and at most), requests (the honest
// client's, whose paths hold /honest/, apart), /big/ responses in
// progress, and the largest request head. Once Record is called, it also
// keeps what the next requests were (method, target, header fields), for
// the gate attacks to see which got through.
type Upstream struct {
	URL     string
	BigSize int64

	srv   *http.Server
	done  chan error
	chunk []byte // what /big/ is made of
	// statsURL is, for an Upstream in another process (RemoteUpstream),
	// where its StatsHandler serves; the counters below are then unused.
	statsURL string

	conns, maxConns  atomic.Int64
	requests, honest atomic.Int64
	bigInFlight      atomic.Int64
	maxHead          atomic.Int64

	seenMu  sync.Mutex // guards what Record keeps
	seenMax int        // how many requests to keep; 0 = none
	seen    []Seen
}

// Seen is one request as the upstream received it.
type Seen struct {
	Method string
	Target string // the request target as received (path and query)
	Header http.Header
}

// UpstreamStats are the Upstream's counters at one time.
type UpstreamStats struct {
	Conns, MaxConns int64 // connections open now, and at most since ResetMax
	Requests        int64 // attack requests (not /honest/) received
	Honest          int64 // honest requests received
	BigInFlight     int64 // /big/ responses being written
	MaxHeadBytes    int64 // the largest request head (request line and header fields)
}

// NewUpstream starts an Upstream on a loopback port.
func NewUpstream(bigSize int64) (*Upstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	u := &Upstream{URL: "http://" + ln.Addr().String(), BigSize: bigSize, done: make(chan error, 1),
		chunk: bytes.Repeat([]byte("x"), 64<<10)}
	u.srv = &http.Server{
		Handler:           http.HandlerFunc(u.serve),
		MaxHeaderBytes:    4 << 20, // see what an edge forwards, whatever its size
		ReadHeaderTimeout: time.Minute,
		ConnState: func(_ net.Conn, s http.ConnState) {
			switch s {
			case http.StateNew:
				raise(&u.maxConns, u.conns.Add(1))
			case http.StateClosed, http.StateHijacked:
				u.conns.Add(-1)
			}
		},
	}
	go func() { u.done <- u.srv.Serve(ln) }()
	return u, nil
}

// RemoteUpstream is an Upstream that runs in another process, serving at
// url with the BigSize bigSize, whose StatsHandler serves at statsURL.
// Its Close does nothing: the other process owns it.
func RemoteUpstream(url, statsURL string, bigSize int64) *Upstream {
	return &Upstream{URL: url, BigSize: bigSize, statsURL: statsURL}
}

// StatsHandler serves Stats as JSON on GET, and ResetMax on POST, for a
// RemoteUpstream in another process; under /seen, Seen on GET and
// Record(max) on POST.
func (u *Upstream) StatsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/seen" {
			if r.Method == http.MethodPost {
				n, _ := strconv.Atoi(r.URL.Query().Get("max"))
				u.Record(n)
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(u.Seen())
			return
		}
		if r.Method == http.MethodPost {
			u.ResetMax()
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(u.Stats())
	})
}

// Close stops the upstream and its connections.
func (u *Upstream) Close() error {
	if u.statsURL != "" {
		return nil
	}
	err := u.srv.Close()
	if serr := <-u.done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// Stats returns the counters; those of a RemoteUpstream are zero when its
// process does not answer.
func (u *Upstream) Stats() UpstreamStats {
	if u.statsURL != "" {
		return u.remote(http.MethodGet)
	}
	return UpstreamStats{
		Conns: u.conns.Load(), MaxConns: u.maxConns.Load(),
		Requests: u.requests.Load(), Honest: u.honest.Load(),
		BigInFlight: u.bigInFlight.Load(), MaxHeadBytes: u.maxHead.Load(),
	}
}

// ResetMax starts the count of connections at most afresh.
func (u *Upstream) ResetMax() {
	if u.statsURL != "" {
		u.remote(http.MethodPost)
		return
	}
	u.maxConns.Store(u.conns.Load())
}

// remote asks a RemoteUpstream's StatsHandler for its counters.
func (u *Upstream) remote(method string) UpstreamStats {
	var st UpstreamStats
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u.statsURL, nil)
	if err != nil {
		return st
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return st
	}
	defer res.Body.Close()
	_ = json.NewDecoder(io.LimitReader(res.Body, 1<<16)).Decode(&st)
	return st
}

// Record starts keeping the next max requests for Seen; what came before
// is forgotten. The heads kept are bounded by the server's MaxHeaderBytes
// (4 MiB), so max stays small: the gate attacks keep a few hundred.
func (u *Upstream) Record(max int) {
	if u.statsURL != "" {
		u.remoteSeen(http.MethodPost, max)
		return
	}
	u.seenMu.Lock()
	defer u.seenMu.Unlock()
	u.seenMax, u.seen = max, nil
}

// Seen returns the requests kept since Record, oldest first; those of a
// RemoteUpstream are nil when its process does not answer.
func (u *Upstream) Seen() []Seen {
	if u.statsURL != "" {
		return u.remoteSeen(http.MethodGet, 0)
	}
	u.seenMu.Lock()
	defer u.seenMu.Unlock()
	return slices.Clone(u.seen)
}

// remoteSeen asks a RemoteUpstream's StatsHandler for what it kept (GET),
// or to keep max requests (POST).
func (u *Upstream) remoteSeen(method string, max int) []Seen {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(u.statsURL, "/")+"/seen?max="+strconv.Itoa(max), nil)
	if err != nil {
		return nil
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer res.Body.Close()
	var seen []Seen
	_ = json.NewDecoder(io.LimitReader(res.Body, 64<<20)).Decode(&seen)
	return seen
}

// record keeps r, if Record asked for it and there is room.
func (u *Upstream) record(r *http.Request) {
	u.seenMu.Lock()
	defer u.seenMu.Unlock()
	if len(u.seen) < u.seenMax {
		u.seen = append(u.seen, Seen{Method: r.Method, Target: r.RequestURI, Header: r.Header.Clone()})
	}
}

func (u *Upstream) serve(w http.ResponseWriter, r *http.Request) {
	u.record(r)
	if strings.Contains(r.URL.Path, "/honest/") {
		u.honest.Add(1)
	} else {
		u.requests.Add(1)
	}
	head := int64(len(r.Method) + len(r.URL.RequestURI()) + len("  HTTP/1.1\r\n\r\n") + len(r.Host) + len("Host: \r\n"))
	for k, vs := range r.Header {
		for _, v := range vs {
			head += int64(len(k) + len(v) + len(": \r\n"))
		}
	}
	raise(&u.maxHead, head)
	if _, err := io.Copy(io.Discard, r.Body); err != nil {
		return
	}
	if !strings.HasPrefix(r.URL.Path, "/big/") {
		_, _ = io.WriteString(w, "ok")
		return
	}
	u.bigInFlight.Add(1)
	defer u.bigInFlight.Add(-1)
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(u.BigSize, 10))
	ctx := r.Context()
	for left := u.BigSize; left > 0 && ctx.Err() == nil; left -= int64(len(u.chunk)) {
		if _, err := w.Write(u.chunk[:min(left, int64(len(u.chunk)))]); err != nil {
			return
		}
	}
}

// raise sets max to v if v is larger, with compare-and-swap.
func raise(max *atomic.Int64, v int64) {
	for {
		m := max.Load()
		if v <= m || max.CompareAndSwap(m, v) {
			return
		}
	}
}

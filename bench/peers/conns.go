package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/maatproxy/maat/internal/testproc"
)

// sources are the client addresses connections come from: 127.0.0.2 and
// on, perClient connections each, below the edge's default cap of 256
// connections per client address.
const perClient = 200

func source(i int) *net.TCPAddr {
	n := 2 + i/perClient
	return &net.TCPAddr{IP: net.IPv4(127, byte(n>>16), byte(n>>8), byte(n))}
}

// dial opens a TLS connection from source i with protos as ALPN.
func dial(ctx context.Context, addr string, i int, conf *tls.Config) (*tls.Conn, error) {
	d := net.Dialer{LocalAddr: source(i), Timeout: 10 * time.Second}
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := tls.Client(raw, conf)
	if err := c.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, err
	}
	return c, nil
}

const request = "GET / HTTP/1.1\r\nHost: localhost\r\nUser-Agent: " + goUserAgent + "\r\n"

// getH1 sends one request on c and reads the whole answer.
func getH1(c net.Conn, br *bufio.Reader, close bool) error {
	req := request + "\r\n"
	if close {
		req = request + "Connection: close\r\n\r\n"
	}
	if _, err := io.WriteString(c, req); err != nil {
		return err
	}
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		return err
	}
	n, err := io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if err != nil {
		return err
	}
	if res.StatusCode != 200 || n != bodySize {
		return fmt.Errorf("status %d, %d bytes", res.StatusCode, n)
	}
	return nil
}

// handshakes opens new connections, each carrying one request, from
// workers goroutines for d: full handshakes, or resumed ones with a
// session cache primed beforehand. It reports the connections made and
// how many of them resumed.
func handshakes(ctx context.Context, addr string, d time.Duration, workers int, resume bool) (sample, int64, error) {
	var cache tls.ClientSessionCache
	if resume {
		cache = tls.NewLRUClientSessionCache(4 * workers)
	}
	conf := clientTLS(cache)
	one := func(i int) (bool, error) {
		c, err := dial(ctx, addr, i, conf)
		if err != nil {
			return false, err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		// Reading the answer also reads the TLS 1.3 session tickets.
		err = getH1(c, bufio.NewReaderSize(c, 4096), true)
		return c.ConnectionState().DidResume, err
	}
	if resume {
		for i := range workers {
			if _, err := one(i); err != nil {
				return sample{}, 0, err
			}
		}
	}
	var made, resumed, failed atomic.Int64
	var firstErr error
	var once sync.Once
	// Each worker finishes the connection it has begun: a deadline passed
	// to the dial would fail connections that were never slow (timers fire
	// late on a loaded machine) and count them as the front's failures.
	start := time.Now()
	end := start.Add(d)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; time.Now().Before(end) && ctx.Err() == nil; i += workers {
				r, err := one(i % (perClient * workers))
				if err != nil {
					failed.Add(1)
					once.Do(func() { firstErr = err })
					continue
				}
				made.Add(1)
				if r {
					resumed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	s := sample{requests: made.Load(), failed: failed.Load(), firstErr: firstErr, elapsed: time.Since(start)}
	if s.requests == 0 && firstErr != nil {
		return s, 0, firstErr
	}
	return s, resumed.Load(), nil
}

// idle holds n connections open after one request each and reports the
// front's resident memory before and after, settled.
type idleResult struct {
	conns       int
	before, rss int64 // bytes
}

func (r idleResult) perConn() float64 { return float64(r.rss-r.before) / float64(r.conns) }

// holdIdle opens n connections to f (HTTP/2 when h2), one request each,
// measures, and closes them.
func holdIdle(ctx context.Context, f *front, n int, h2 bool) (idleResult, error) {
	before, err := settledRSS(ctx, f)
	if err != nil {
		return idleResult{}, err
	}
	var closers []io.Closer
	defer func() {
		for _, c := range closers {
			c.Close()
		}
	}()
	conf := clientTLS(nil)
	if h2 {
		conf.NextProtos = []string{"h2"}
	}
	for i := range n {
		if h2 {
			cc, err := dialH2(ctx, f.addr, i, conf)
			if err != nil {
				return idleResult{}, fmt.Errorf("connection %d: %w", i, err)
			}
			closers = append(closers, cc)
			if err := getH2(ctx, cc); err != nil {
				return idleResult{}, fmt.Errorf("connection %d: %w", i, err)
			}
			continue
		}
		c, err := dial(ctx, f.addr, i, conf)
		if err != nil {
			return idleResult{}, fmt.Errorf("connection %d: %w", i, err)
		}
		closers = append(closers, c)
		if err := getH1(c, bufio.NewReaderSize(c, 4096), false); err != nil {
			return idleResult{}, fmt.Errorf("connection %d: %w", i, err)
		}
	}
	after, err := settledRSS(ctx, f)
	if err != nil {
		return idleResult{}, err
	}
	return idleResult{conns: n, before: before, rss: after}, nil
}

// dialH2 opens connection i to addr as dial does and speaks HTTP/2 on it,
// with net/http's own client connection (one Transport per connection:
// its DialTLSContext hands over this one socket).
func dialH2(ctx context.Context, addr string, i int, conf *tls.Config) (*http.ClientConn, error) {
	tr := &http.Transport{Protocols: new(http.Protocols),
		DialTLSContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			c, err := dial(ctx, addr, i, conf)
			if err != nil {
				return nil, err
			}
			if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
				c.Close()
				return nil, fmt.Errorf("ALPN %q, not h2", p)
			}
			return c, nil
		}}
	tr.Protocols.SetHTTP2(true)
	return tr.NewClientConn(ctx, "https", addr)
}

func getH2(ctx context.Context, cc *http.ClientConn) error {
	req, _ := http.NewRequestWithContext(ctx, "GET", "https://localhost/", nil)
	req.Header.Set("User-Agent", goUserAgent)
	res, err := cc.RoundTrip(req)
	if err != nil {
		return err
	}
	n, err := io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if err == nil && (res.StatusCode != 200 || n != bodySize) {
		err = fmt.Errorf("status %d, %d bytes", res.StatusCode, n)
	}
	return err
}

// settledRSS reads the front's resident memory until two readings a
// second apart differ by less than 1%, or 10 seconds pass.
func settledRSS(ctx context.Context, f *front) (int64, error) {
	last, err := testproc.RSSTotal(f.pids())
	if err != nil {
		return 0, err
	}
	for range 10 {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(time.Second):
		}
		now, err := testproc.RSSTotal(f.pids())
		if err != nil {
			return 0, err
		}
		if diff := now - last; diff*100 < now && -diff*100 < now {
			return now, nil
		}
		last = now
	}
	return last, errors.New("peers: resident memory did not settle")
}

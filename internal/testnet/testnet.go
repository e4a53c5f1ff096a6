// Package testnet holds test-only network helpers that the tests of several
// packages share: an upstream that answers exactly as a test's script says
// (so that it can misbehave on purpose), the reading of a request head byte
// for byte, and waiting for a condition without a fixed sleep. Only tests
// import it.
package testnet

import (
	"bufio"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Scripted is an upstream that answers each request with the bytes its
// script gives, written as they are: the upstream misbehaves exactly as a
// test says.
type Scripted struct {
	URL   string // http://127.0.0.1:port
	conns atomic.Int64
	mu    sync.Mutex
	heads []string
}

// Answer is what a Scripted upstream sends for one request: Raw, then Late
// once the test's late channel closes (none if empty), then it closes the
// connection if HangUp.
type Answer struct {
	Raw    string
	Late   string
	HangUp bool
}

// NewScripted starts a Scripted upstream on loopback until t ends. script
// gives the answer to request n (from 0, over all connections), whose head
// is head.
func NewScripted(t testing.TB, script func(n int, head string) Answer, late <-chan struct{}) *Scripted {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &Scripted{URL: "http://" + ln.Addr().String()}
	var wg sync.WaitGroup
	var open sync.Map
	t.Cleanup(func() {
		ln.Close()
		open.Range(func(k, _ any) bool { k.(net.Conn).Close(); return true })
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.conns.Add(1)
			open.Store(c, true)
			wg.Go(func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					_ = c.SetDeadline(time.Now().Add(20 * time.Second))
					head, err := ReadHead(br)
					if err != nil {
						return
					}
					u.mu.Lock()
					n := len(u.heads)
					u.heads = append(u.heads, head)
					u.mu.Unlock()
					a := script(n, head)
					if _, err := io.WriteString(c, a.Raw); err != nil {
						return
					}
					if a.Late != "" {
						<-late
						if _, err := io.WriteString(c, a.Late); err != nil {
							return
						}
					}
					if a.HangUp {
						return
					}
				}
			})
		}
	})
	return u
}

// Conns is the number of connections the upstream accepted.
func (u *Scripted) Conns() int64 { return u.conns.Load() }

// Requests returns the request heads received so far, in order.
func (u *Scripted) Requests() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.heads...)
}

// ReadHead reads a request head, byte for byte, up to its empty line.
func ReadHead(br *bufio.Reader) (string, error) {
	var head strings.Builder
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return "", err
		}
		head.WriteString(line)
		if line == "\r\n" {
			return head.String(), nil
		}
	}
}

// WaitFor polls cond until it holds or d has passed, and reports whether
// it held; the caller asserts what it needs.
func WaitFor(t testing.TB, d time.Duration, cond func() bool) bool {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

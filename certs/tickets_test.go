package certs_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/maatproxy/maat/certs"
)

const ticketHost = "tickets.maat.test"

// chanConn is one end of an in-memory connection whose writes do not wait
// for the reader (net.Pipe's do), so that both ends of a TLS handshake may
// write before they read, as over TCP; it blocks on channels only, which
// testing/synctest sees as durably blocked.
type chanConn struct {
	in, out chan []byte
	buf     []byte
	once    sync.Once
}

func chanPipe() (net.Conn, net.Conn) {
	ab, ba := make(chan []byte, 64), make(chan []byte, 64)
	return &chanConn{in: ba, out: ab}, &chanConn{in: ab, out: ba}
}

func (c *chanConn) Read(p []byte) (int, error) {
	if len(c.buf) == 0 {
		b, ok := <-c.in
		if !ok {
			return 0, io.EOF
		}
		c.buf = b
	}
	n := copy(p, c.buf)
	c.buf = c.buf[n:]
	return n, nil
}

func (c *chanConn) Write(p []byte) (n int, err error) {
	defer func() {
		if recover() != nil { // written after Close
			n, err = 0, net.ErrClosed
		}
	}()
	c.out <- bytes.Clone(p)
	return len(p), nil
}

func (c *chanConn) Close() error {
	c.once.Do(func() { close(c.out) })
	return nil
}

// pipeAddr is the address of both ends of a chanConn.
type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

func (c *chanConn) LocalAddr() net.Addr                { return pipeAddr{} }
func (c *chanConn) RemoteAddr() net.Addr               { return pipeAddr{} }
func (c *chanConn) SetDeadline(t time.Time) error      { return nil }
func (c *chanConn) SetReadDeadline(t time.Time) error  { return nil }
func (c *chanConn) SetWriteDeadline(t time.Time) error { return nil }

// tcpPair returns the server and client ends of a loopback TCP connection.
func tcpPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server := <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	return server, client
}

// handshake connects a client with sessions to m over the connection pair
// and reports whether the session was resumed. The client reads one byte
// after the handshake, so that a TLS 1.3 ticket sent after it is received.
func handshake(t *testing.T, pair func() (net.Conn, net.Conn), m *certs.Manager, roots *x509.CertPool, sessions tls.ClientSessionCache, version uint16) bool {
	t.Helper()
	server, client := pair()
	served := make(chan error, 1)
	go func() {
		s := tls.Server(server, m.TLSConfig())
		err := s.Handshake()
		if err == nil {
			_, err = s.Write([]byte("x"))
		}
		s.Close()
		served <- err
	}()
	c := tls.Client(client, &tls.Config{RootCAs: roots, ServerName: ticketHost, ClientSessionCache: sessions,
		MinVersion: version, MaxVersion: version})
	defer c.Close()
	if err := c.Handshake(); err != nil {
		t.Fatalf("handshake: %v", err)
	}
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		t.Fatalf("read: %v", err)
	}
	if err := <-served; err != nil {
		t.Fatalf("server: %v", err)
	}
	return c.ConnectionState().DidResume
}

func selfSigned(t testing.TB, cache certs.Cache, onEvent func(certs.Event)) *certs.Manager {
	t.Helper()
	m, err := certs.New(certs.Config{Mode: certs.ModeSelfSigned, Cache: cache, Hosts: []string{ticketHost}, OnEvent: onEvent})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func rootsOf(t testing.TB, m *certs.Manager) *x509.CertPool {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(m.RootPEM()) {
		t.Fatal("no root")
	}
	return roots
}

// TestSessionResumptionAcrossNodes: over loopback TCP, a session begun on
// node A resumes on node B when they share a cache, with TLS 1.2 and 1.3;
// a node that shares the certificates but not the cache's lock (so not the
// ticket keys) makes a full handshake, and succeeds.
func TestSessionResumptionAcrossNodes(t *testing.T) {
	t.Parallel()
	shared := newClusterCache(time.Minute)
	a := selfSigned(t, shared.node(0), nil)
	runManager(t, a)
	waitFor(t, "node A's ticket keys in the cache", func() bool {
		_, err := shared.node(9).Get(t.Context(), "maat_session_ticket_keys")
		return err == nil
	})
	b := selfSigned(t, shared.node(1), nil)
	runManager(t, b)
	alone := selfSigned(t, plainCache{shared.node(2)}, nil) // same CA, keys of its own
	runManager(t, alone)
	roots := rootsOf(t, a)
	pair := func() (net.Conn, net.Conn) { return tcpPair(t) }
	for _, v := range []struct {
		name    string
		version uint16
	}{{"TLS 1.2", tls.VersionTLS12}, {"TLS 1.3", tls.VersionTLS13}} {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			sessions := tls.NewLRUClientSessionCache(4)
			steps := []struct {
				node *certs.Manager
				want bool
			}{{a, false}, {b, true}, {a, true}, {alone, false}}
			for i, s := range steps {
				if got := handshake(t, pair, s.node, roots, sessions, v.version); got != s.want {
					t.Errorf("step %d: DidResume = %v, want %v", i, got, s.want)
				}
			}
		})
	}
}

// TestSessionTicketRotation: two nodes rotate their shared keys every
// TicketKeyRotation (exact, under testing/synctest); a ticket resumes on
// either node while its key is current, next or one of the two previous
// ones, and after that the handshake is a full one.
func TestSessionTicketRotation(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		shared := newClusterCache(time.Minute)
		a := selfSigned(t, shared.node(0), nil)
		runManager(t, a)
		synctest.Wait() // A has written its keys
		b := selfSigned(t, shared.node(1), nil)
		runManager(t, b)
		roots := rootsOf(t, a)
		nodes := map[string]*certs.Manager{"A": a, "B": b}
		ticket := func(node string) tls.ClientSessionCache {
			sessions := tls.NewLRUClientSessionCache(1)
			if handshake(t, chanPipe, nodes[node], roots, sessions, tls.VersionTLS13) {
				t.Fatal("a first handshake resumed")
			}
			return sessions
		}
		start := time.Now()
		issued := map[string]tls.ClientSessionCache{} // at start
		for _, k := range []string{"rotations_0", "rotations_1", "rotations_2", "rotations_3"} {
			issued[k] = ticket("A")
		}
		steps := []struct {
			after   time.Duration // since start
			tickets string        // issued at start
			node    string
			want    bool
		}{
			{0, "rotations_0", "B", true},
			{afterRotations(1), "rotations_1", "B", true},
			{afterRotations(2), "rotations_2", "A", true},
			{afterRotations(3), "rotations_3", "B", false},
		}
		for _, s := range steps {
			time.Sleep(time.Until(start.Add(s.after)))
			synctest.Wait() // both nodes have rotated
			if got := handshake(t, chanPipe, nodes[s.node], roots, issued[s.tickets], tls.VersionTLS13); got != s.want {
				t.Errorf("%v after the ticket: DidResume on %s = %v, want %v", s.after, s.node, got, s.want)
			}
			// A ticket issued now by one node resumes on the other: they
			// rotated alike.
			fresh := ticket("B")
			if !handshake(t, chanPipe, a, roots, fresh, tls.VersionTLS13) {
				t.Errorf("%v after start: a fresh ticket of B does not resume on A", s.after)
			}
		}
	})
}

// afterRotations returns n rotations and a second: just after the nth
// rotation.
func afterRotations(n int) time.Duration {
	return time.Duration(n)*certs.TicketKeyRotation + time.Second
}

// TestTicketKeysCacheDown: while the shared cache fails, a node keeps keys
// of its own (its sessions resume on it), reports the failure once per
// retry, and shares its keys once the cache is back.
func TestTicketKeysCacheDown(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		cache := newMapCache(nil)
		var events eventLog
		m, err := certs.New(certs.Config{Mode: certs.ModeSelfSigned, Hosts: []string{ticketHost}, Cache: cache, OnEvent: events.add})
		if err != nil {
			t.Fatal(err)
		}
		cache.setDown(true) // after New stored the local CA
		start := time.Now()
		runManager(t, m)
		synctest.Wait()
		failed := events.ofKind(certs.EventTicketKeysFailed)
		if len(failed) != 1 || !errors.Is(failed[0].Err, errDown) || !failed[0].NextRetry.Equal(start.Add(time.Minute)) || failed[0].Name != "" {
			t.Fatalf("events with the cache down: %+v; want one ticket_keys_failed, errDown, retry in 1m", failed)
		}
		roots := rootsOf(t, m)
		sessions := tls.NewLRUClientSessionCache(1)
		for i, want := range []bool{false, true} {
			if got := handshake(t, chanPipe, m, roots, sessions, tls.VersionTLS13); got != want {
				t.Errorf("handshake %d with the cache down: DidResume = %v, want %v", i, got, want)
			}
		}

		cache.setDown(false)
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := len(events.ofKind(certs.EventTicketKeysFailed)); n != 1 {
			t.Errorf("%d failures after the cache came back, want still 1", n)
		}
		// The node's keys went to the cache: a node that starts now
		// resumes the sessions of the first.
		other := selfSigned(t, cache, nil)
		if !handshake(t, chanPipe, other, roots, sessions, tls.VersionTLS13) {
			t.Error("a session of the first node does not resume on a node started from the cache")
		}
	})
}

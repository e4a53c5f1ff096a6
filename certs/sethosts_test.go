package certs_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/maatproxy/maat/certs"
	"github.com/maatproxy/maat/internal/testacme"
)

// statusNames lists the names of m's Status.
func statusNames(m *certs.Manager) []string {
	var names []string
	for _, s := range m.Status() {
		names = append(names, s.Name)
	}
	return names
}

// TestSetHostsSelfSigned: a name added by SetHosts is served at once and
// listed, ready, in Status; a name removed is refused and no longer
// listed; an invalid name changes nothing.
func TestSetHostsSelfSigned(t *testing.T) {
	t.Parallel()
	m, err := certs.New(certs.Config{Hosts: []string{"old.test"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := statusNames(m); !slices.Equal(got, []string{"old.test"}) {
		t.Errorf("Status before any handshake lists %v, want the configured name", got)
	}
	if _, err := m.GetCertificate(&tls.ClientHelloInfo{ServerName: "new.test"}); !errors.Is(err, certs.ErrUnknownHost) {
		t.Fatalf("an unconfigured name: %v", err)
	}
	if err := m.SetHosts([]string{"old.test", "new.test"}); err != nil {
		t.Fatal(err)
	}
	c, err := m.GetCertificate(&tls.ClientHelloInfo{ServerName: "new.test"})
	if err != nil {
		t.Fatalf("a name added: %v", err)
	}
	if err := c.Leaf.VerifyHostname("new.test"); err != nil {
		t.Error(err)
	}
	for _, s := range m.Status() {
		if !s.Ready(time.Now()) {
			t.Errorf("%s not ready: %+v", s.Name, s)
		}
	}
	if got := statusNames(m); !slices.Equal(got, []string{"new.test", "old.test"}) {
		t.Errorf("Status lists %v", got)
	}
	if err := m.SetHosts([]string{"new.test"}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.GetCertificate(&tls.ClientHelloInfo{ServerName: "old.test"}); !errors.Is(err, certs.ErrUnknownHost) {
		t.Errorf("a name removed: %v, want ErrUnknownHost", err)
	}
	if got := statusNames(m); !slices.Equal(got, []string{"new.test"}) {
		t.Errorf("Status after the removal lists %v", got)
	}
	if err := m.SetHosts([]string{"new.test", "Bad Name"}); !errors.Is(err, certs.ErrInvalidConfig) {
		t.Errorf("an invalid name: %v, want ErrInvalidConfig", err)
	}
	if _, err := m.GetCertificate(&tls.ClientHelloInfo{ServerName: "new.test"}); err != nil {
		t.Errorf("after a refused SetHosts: %v", err)
	}
}

// TestSetHostsACME: with Run running, a name added by SetHosts is ordered
// from Pebble without any handshake asking for it, and Status lists it from
// the start; a name removed is refused and leaves Status.
func TestSetHostsACME(t *testing.T) {
	t.Parallel()
	const oldName, newName = "old.maat.test", "new.maat.test"
	edge, tcp, udp, plain := newTestEdge(t)
	pebble := testacme.Start(t, edge.httpPort, edge.tlsPort, testacme.Options{})
	m, err := certs.New(certs.Config{
		Mode:         certs.ModeACME,
		CacheDir:     filepath.Join(t.TempDir(), "edge"),
		Hosts:        []string{oldName},
		Email:        "ops@maat.test",
		DirectoryURL: pebble.DirURL,
		CARootsFile:  pebble.RootsFile,
		RetryMin:     50 * time.Millisecond,
		RetryMax:     time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	edge.serve(t, m, tcp, udp, plain)
	ctx, stop := context.WithCancel(t.Context())
	runDone := make(chan error, 1)
	go func() { runDone <- m.Run(ctx) }()
	defer func() {
		stop()
		if err := <-runDone; err != nil {
			t.Error(err)
		}
	}()
	waitFor(t, "the first certificate", func() bool { return ready(m, oldName) })

	if err := m.SetHosts([]string{oldName, newName}); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(statusNames(m), newName) {
		t.Fatalf("Status right after SetHosts lists %v, not the name added", statusNames(m))
	}
	waitFor(t, "the added name's certificate", func() bool { return ready(m, newName) })
	if n := pebble.OrdersFor(newName); n != 1 {
		t.Errorf("orders for the added name: %d, want 1", n)
	}
	if _, err := m.GetCertificate(&tls.ClientHelloInfo{ServerName: newName}); err != nil {
		t.Errorf("the added name: %v", err)
	}

	if err := m.SetHosts([]string{newName}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.GetCertificate(&tls.ClientHelloInfo{ServerName: oldName}); !errors.Is(err, certs.ErrUnknownHost) {
		t.Errorf("a name removed: %v, want ErrUnknownHost", err)
	}
	if got := statusNames(m); !slices.Equal(got, []string{newName}) {
		t.Errorf("Status after the removal lists %v", got)
	}
	if err := m.SetHosts(nil); !errors.Is(err, certs.ErrInvalidConfig) {
		t.Errorf("no name in ModeACME: %v, want ErrInvalidConfig", err)
	}
}

// stallCache stalls reads of one key until their context ends, and says
// when the last such read returned.
type stallCache struct {
	key      string
	stalled  chan struct{} // a read of key has begun (buffered)
	returned chan struct{} // closed when a stalled read returned
	once     sync.Once
}

func (c *stallCache) Get(ctx context.Context, key string) ([]byte, error) {
	if key != c.key {
		return nil, certs.ErrCacheMiss
	}
	select {
	case c.stalled <- struct{}{}:
	default:
	}
	<-ctx.Done()
	c.once.Do(func() { close(c.returned) })
	return nil, ctx.Err()
}

func (c *stallCache) Put(context.Context, string, []byte) error { return nil }
func (c *stallCache) Delete(context.Context, string) error      { return nil }

// TestRunEndsHandshakeOrders: an order a handshake started outlives the
// handshake, but not Run: when Run's context ends, Run ends that order and
// returns only after it.
func TestRunEndsHandshakeOrders(t *testing.T) {
	t.Parallel()
	const name = "stall.maat.test"
	cache := &stallCache{key: "none yet", stalled: make(chan struct{}, 1), returned: make(chan struct{})}
	m, err := certs.New(certs.Config{Mode: certs.ModeACME, Hosts: []string{name}, Cache: cache,
		DirectoryURL: "http://127.0.0.1:1/directory"})
	if err != nil {
		t.Fatal(err)
	}
	cache.key = name // New has read the cache: from now on the name's reads stall
	hctx, cancel := context.WithCancel(context.Background())
	go func() { <-cache.stalled; cancel() }() // the handshake gives up once the order runs
	server, client := net.Pipe()
	defer client.Close()
	go func() { _ = tls.Client(client, &tls.Config{ServerName: name, InsecureSkipVerify: true}).Handshake() }()
	if err := tls.Server(server, &tls.Config{GetCertificate: m.GetCertificate}).HandshakeContext(hctx); err == nil {
		t.Fatal("a handshake without a certificate succeeded")
	}
	ctx, stop := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- m.Run(ctx) }()
	stop()
	if err := <-runDone; err != nil {
		t.Fatal(err)
	}
	select {
	case <-cache.returned:
	default:
		t.Fatal("Run returned while the order a handshake started still ran")
	}
}

package certs_test

import (
	"context"
	"crypto/tls"
	"errors"
	"math/big"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maatproxy/maat/certs"
	"github.com/maatproxy/maat/internal/testacme"
)

// clusterCache is the cache and the lock that nodes share, as they share a
// Redis through the edge's store, with the store's lock contract: a lock is
// held until unlock or until its holder's context ends, and then expires
// ttl later. A node can be killed: from then on it writes nothing, its
// unlocks are lost, and its locks expire ttl after its death, as a crashed
// node's Redis locks do.
type clusterCache struct {
	ttl time.Duration

	mu       sync.Mutex
	data     map[string][]byte
	locks    map[string]*clusterLock
	dead     map[int]bool
	changed  chan struct{} // closed at each change of a lock, then replaced
	acquired []lockEvent   // each acquisition, in order
}

type clusterLock struct {
	node    int
	expires time.Time // zero while the holder lives
}

type lockEvent struct {
	key  string
	node int
	at   time.Time
}

func newClusterCache(ttl time.Duration) *clusterCache {
	return &clusterCache{ttl: ttl, data: map[string][]byte{}, locks: map[string]*clusterLock{},
		dead: map[int]bool{}, changed: make(chan struct{})}
}

// node returns node id's view of the cache, a certs.Cache and certs.Locker.
func (c *clusterCache) node(id int) clusterNode { return clusterNode{c, id} }

func (c *clusterCache) broadcast() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// kill makes node id dead.
func (c *clusterCache) kill(id int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dead[id] = true
	for _, l := range c.locks {
		if l.node == id && l.expires.IsZero() {
			l.expires = time.Now().Add(c.ttl)
		}
	}
	c.broadcast()
}

// holder returns the node holding key's lock.
func (c *clusterCache) holder(key string) (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.locks[key]
	if l == nil || !l.expires.IsZero() && !time.Now().Before(l.expires) {
		return 0, false
	}
	return l.node, true
}

func (c *clusterCache) acquisitions(key string) []lockEvent {
	c.mu.Lock()
	defer c.mu.Unlock()
	var evs []lockEvent
	for _, e := range c.acquired {
		if e.key == key {
			evs = append(evs, e)
		}
	}
	return evs
}

// release ends node id's hold on key: at once on unlock, ttl later when
// the holder's context ended (abandoned). A dead node's unlock is lost.
func (c *clusterCache) release(key string, id int, abandoned bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.locks[key]
	if l == nil || l.node != id {
		return
	}
	if abandoned || c.dead[id] {
		if l.expires.IsZero() {
			l.expires = time.Now().Add(c.ttl)
		}
	} else {
		delete(c.locks, key)
	}
	c.broadcast()
}

type clusterNode struct {
	c  *clusterCache
	id int
}

func (n clusterNode) Get(_ context.Context, key string) ([]byte, error) {
	n.c.mu.Lock()
	defer n.c.mu.Unlock()
	b, ok := n.c.data[key]
	if !ok {
		return nil, certs.ErrCacheMiss
	}
	return b, nil
}

func (n clusterNode) Put(_ context.Context, key string, data []byte) error {
	n.c.mu.Lock()
	defer n.c.mu.Unlock()
	if !n.c.dead[n.id] {
		n.c.data[key] = data
	}
	return nil
}

func (n clusterNode) Delete(_ context.Context, key string) error {
	n.c.mu.Lock()
	defer n.c.mu.Unlock()
	if !n.c.dead[n.id] {
		delete(n.c.data, key)
	}
	return nil
}

func (n clusterNode) Lock(ctx context.Context, key string) (func(), error) {
	c := n.c
	for {
		c.mu.Lock()
		now := time.Now()
		l := c.locks[key]
		if l == nil || !l.expires.IsZero() && !now.Before(l.expires) {
			c.locks[key] = &clusterLock{node: n.id}
			c.acquired = append(c.acquired, lockEvent{key, n.id, now})
			c.broadcast()
			c.mu.Unlock()
			stop := context.AfterFunc(ctx, func() { c.release(key, n.id, true) })
			return func() {
				stop()
				c.release(key, n.id, false)
			}, nil
		}
		changed := c.changed
		var expiry <-chan time.Time
		var timer *time.Timer
		if !l.expires.IsZero() {
			timer = time.NewTimer(l.expires.Sub(now))
			expiry = timer.C
		}
		c.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-changed:
		case <-expiry:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
}

// runManager runs m until the test ends, and then checks that Run returned
// nil. It returns the function that stops it early (a node dying).
func runManager(t *testing.T, m *certs.Manager) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run() = %v after its context ended, want nil", err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("Run() did not return within 30s of its context's end")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// serial returns the serial number of the certificate m serves for name.
func serial(t *testing.T, m *certs.Manager, name string) *big.Int {
	t.Helper()
	c, err := m.GetCertificate(&tls.ClientHelloInfo{ServerName: name})
	if err != nil {
		t.Fatalf("GetCertificate(%s): %v", name, err)
	}
	return c.Leaf.SerialNumber
}

// clusterNodeConfig is the configuration of a node of the cluster.
func clusterNodeConfig(pebble *testacme.CA, cache certs.Cache, names []string, events *eventLog) certs.Config {
	cfg := certs.Config{
		Mode:            certs.ModeACME,
		Cache:           cache,
		Hosts:           names,
		DirectoryURL:    pebble.DirURL,
		CARootsFile:     pebble.RootsFile,
		RetryMin:        50 * time.Millisecond,
		RetryMax:        time.Second,
		RecheckInterval: 100 * time.Millisecond,
	}
	if events != nil {
		cfg.OnEvent = events.add
	}
	return cfg
}

// TestACMECluster: three nodes sharing one cache and lock, all configured
// for the same two names: the CA sees one order per name, and all three
// serve the same certificate. Two nodes asked to renew at once make one
// order between them, and the third serves its result too.
func TestACMECluster(t *testing.T) {
	t.Parallel()
	names := []string{"one.maat.test", "two.maat.test"}
	edge, tcp, udp, plain := newTestEdge(t)
	pebble := testacme.Start(t, edge.httpPort, edge.tlsPort, testacme.Options{})
	cluster := newClusterCache(time.Minute)
	// The CA reaches a fourth node, which orders nothing: it answers the
	// others' challenges from the cache, as any node behind the balancer
	// would.
	front, err := certs.New(clusterNodeConfig(pebble, cluster.node(3), names, nil))
	if err != nil {
		t.Fatal(err)
	}
	edge.serve(t, front, tcp, udp, plain)
	events := make([]eventLog, 3)
	nodes := make([]*certs.Manager, 3)
	for i := range nodes {
		if nodes[i], err = certs.New(clusterNodeConfig(pebble, cluster.node(i), names, &events[i])); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range nodes {
		runManager(t, m)
	}
	waitFor(t, "every node's certificates", func() bool {
		for _, m := range nodes {
			for _, name := range names {
				if !ready(m, name) {
					return false
				}
			}
		}
		return true
	})
	count := func(kind certs.EventKind, name string, of ...int) int {
		n := 0
		for _, i := range of {
			n += events[i].count(kind, name)
		}
		return n
	}
	for _, name := range names {
		if n := pebble.OrdersFor(name); n != 1 {
			t.Errorf("%s: %d orders from three nodes, want 1", name, n)
		}
		first := serial(t, nodes[0], name)
		for i, m := range nodes[1:] {
			if s := serial(t, m, name); s.Cmp(first) != 0 {
				t.Errorf("%s: node %d serves serial %x, node 0 %x", name, i+1, s, first)
			}
		}
		if o, ob, l := count(certs.EventOrdering, name, 0, 1, 2), count(certs.EventObtained, name, 0, 1, 2), count(certs.EventLoaded, name, 0, 1, 2); o != 1 || ob != 1 || l != 2 {
			t.Errorf("%s: %d ordering, %d obtained, %d loaded events; want 1, 1, 2", name, o, ob, l)
		}
	}

	name := names[0]
	before := serial(t, nodes[0], name)
	var wg sync.WaitGroup
	for _, m := range nodes[:2] {
		wg.Go(func() {
			if err := m.Renew(bounded(t), name); err != nil {
				t.Errorf("Renew(%s): %v", name, err)
			}
		})
	}
	wg.Wait()
	if n := pebble.OrdersFor(name); n != 2 {
		t.Errorf("%s: %d orders after two nodes renewed at once, want 2", name, n)
	}
	renewed := serial(t, nodes[0], name)
	if renewed.Cmp(before) == 0 {
		t.Fatalf("%s: node 0 serves the certificate it renewed", name)
	}
	if s := serial(t, nodes[1], name); s.Cmp(renewed) != 0 {
		t.Errorf("%s: the nodes that renewed serve serials %x and %x", name, renewed, s)
	}
	if n := count(certs.EventRenewed, name, 0, 1); n != 1 {
		t.Errorf("%s: %d renewed events from the two nodes, want 1 (the other loads it)", name, n)
	}
	waitFor(t, "the third node to serve the renewed certificate", func() bool {
		return serial(t, nodes[2], name).Cmp(renewed) == 0
	})
	if n := pebble.OrdersFor(names[1]); n != 1 {
		t.Errorf("%s: %d orders, want still 1", names[1], n)
	}
}

// TestACMEClusterNodeDies: the node holding a name's lock dies in the
// middle of its order (its context ends before it stores anything, and it
// never unlocks). No other node orders while it lives; once its lock has
// expired, one survivor orders (one more order in all), and both survivors
// serve the result.
func TestACMEClusterNodeDies(t *testing.T) {
	t.Parallel()
	const name, lockTTL = "dies.maat.test", time.Second
	edge, tcp, udp, plain := newTestEdge(t)
	pebble := testacme.Start(t, edge.httpPort, edge.tlsPort, testacme.Options{})
	cluster := newClusterCache(lockTTL)
	front, err := certs.New(clusterNodeConfig(pebble, cluster.node(3), []string{name}, nil))
	if err != nil {
		t.Fatal(err)
	}
	edge.serve(t, front, tcp, udp, plain)
	events := make([]eventLog, 3)
	nodes := make([]*certs.Manager, 3)
	for i := range nodes {
		if nodes[i], err = certs.New(clusterNodeConfig(pebble, cluster.node(i), []string{name}, &events[i])); err != nil {
			t.Fatal(err)
		}
	}
	var stopsMu sync.Mutex // the hook may run before every node started
	stops := make([]func(), 3)
	killed := make(chan int, 1)
	var validations atomic.Int32
	var killedAt atomic.Pointer[time.Time]
	hook := func(n string) error {
		if n != name || validations.Add(1) > 1 {
			return nil // a later order's validation: answered
		}
		holder, ok := cluster.holder(name + "+lock")
		if !ok {
			t.Error("a validation while no node holds the lock")
			return nil
		}
		if n := pebble.OrdersFor(name); n != 1 {
			t.Errorf("%d orders while the first node's order runs, want 1", n)
		}
		now := time.Now()
		killedAt.Store(&now)
		cluster.kill(holder)
		stopsMu.Lock()
		stop := stops[holder]
		stopsMu.Unlock()
		go stop() // its context ends; Run returns once the order gives up
		killed <- holder
		return errors.New("test: the node died")
	}
	edge.onALPN.Store(&hook)
	stopsMu.Lock()
	for i, m := range nodes {
		stops[i] = runManager(t, m)
	}
	stopsMu.Unlock()

	var dead int
	select {
	case dead = <-killed:
	case <-time.After(45 * time.Second):
		t.Fatal("no validation for the first order")
	}
	var survivors []int
	for i := range nodes {
		if i != dead {
			survivors = append(survivors, i)
		}
	}
	waitFor(t, "the survivors' certificates", func() bool {
		return ready(nodes[survivors[0]], name) && ready(nodes[survivors[1]], name)
	})
	if n := pebble.OrdersFor(name); n != 2 {
		t.Errorf("%d orders, want 2 (the dead node's and one survivor's)", n)
	}
	if a, b := serial(t, nodes[survivors[0]], name), serial(t, nodes[survivors[1]], name); a.Cmp(b) != 0 {
		t.Errorf("survivors serve serials %x and %x, want one certificate", a, b)
	}
	if ready(nodes[dead], name) {
		t.Error("the dead node has a certificate")
	}
	acq := cluster.acquisitions(name + "+lock")
	if len(acq) < 2 || acq[0].node != dead {
		t.Fatalf("lock acquisitions %+v; want the dead node's first, then a survivor's", acq)
	}
	if waited := acq[1].at.Sub(*killedAt.Load()); waited < lockTTL {
		t.Errorf("a survivor took the lock %v after the holder died, before it expired (%v)", waited, lockTTL)
	}
	var ordering, obtained, loaded int
	for _, i := range survivors {
		ordering += events[i].count(certs.EventOrdering, name)
		obtained += events[i].count(certs.EventObtained, name)
		loaded += events[i].count(certs.EventLoaded, name)
	}
	if ordering != 1 || obtained != 1 || loaded != 1 {
		t.Errorf("survivors' events: %d ordering, %d obtained, %d loaded; want 1 each", ordering, obtained, loaded)
	}
	if o, ob := events[dead].count(certs.EventOrdering, name), events[dead].count(certs.EventObtained, name); o != 1 || ob != 0 {
		t.Errorf("dead node's events: %d ordering, %d obtained; want 1, 0", o, ob)
	}
}

// TestACMELayeredCacheSharedDown: a node over a LayeredCache starts, serves
// and renews from its local copy while the shared cache is down, and its
// renewal reaches the shared cache once it is back and the node renews
// again.
func TestACMELayeredCacheSharedDown(t *testing.T) {
	t.Parallel()
	const name = "layered.maat.test"
	edge, tcp, udp, plain := newTestEdge(t)
	pebble := testacme.Start(t, edge.httpPort, edge.tlsPort, testacme.Options{})
	shared := newMapCache(nil)
	var sharedErrors atomic.Int32
	cache := certs.LayeredCache{Shared: shared, Local: certs.DirCache(t.TempDir()),
		OnError: func(error) { sharedErrors.Add(1) }}
	cfg := clusterNodeConfig(pebble, cache, []string{name}, nil)
	first, err := certs.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	edge.serve(t, first, tcp, udp, plain)
	if _, _, err := edge.get(t, pebble.Roots, name, "2"); err != nil {
		t.Fatalf("first certificate: %v", err)
	}
	if _, ok := shared.entries()[name]; !ok {
		t.Fatal("the certificate did not reach the shared cache")
	}

	shared.setDown(true)
	m, err := certs.New(cfg) // a restart while Redis is away
	if err != nil {
		t.Fatal(err)
	}
	edge.use(m)
	runManager(t, m)
	_, before, err := edge.get(t, pebble.Roots, name, "2")
	if err != nil {
		t.Fatalf("serving from the local copy with the shared cache down: %v", err)
	}
	if err := m.Renew(bounded(t), name); err != nil {
		t.Fatalf("Renew with the shared cache down: %v", err)
	}
	_, renewed, err := edge.get(t, pebble.Roots, name, "1.1")
	if err != nil || renewed.Equal(before) {
		t.Fatalf("after Renew with the shared cache down: %v, renewed %v", err, err == nil && !renewed.Equal(before))
	}
	if sharedErrors.Load() == 0 {
		t.Error("no failure of the shared cache reported")
	}
	// A restart still down reads the renewed certificate locally.
	m2, err := certs.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := m2.GetCertificate(&tls.ClientHelloInfo{ServerName: name}); err != nil || !c.Leaf.Equal(renewed) {
		t.Errorf("restart with the shared cache down: %v; want the renewed certificate", err)
	}

	shared.setDown(false)
	if err := m.Renew(bounded(t), name); err != nil {
		t.Fatalf("Renew with the shared cache back: %v", err)
	}
	c, err := m.GetCertificate(&tls.ClientHelloInfo{ServerName: name})
	if err != nil {
		t.Fatal(err)
	}
	other, err := certs.New(clusterNodeConfig(pebble, shared, []string{name}, nil)) // a node that reads Shared alone
	if err != nil {
		t.Fatal(err)
	}
	if oc, err := other.GetCertificate(&tls.ClientHelloInfo{ServerName: name}); err != nil || !oc.Leaf.Equal(c.Leaf) {
		t.Errorf("another node reading the shared cache: %v; want the last renewal", err)
	}
}

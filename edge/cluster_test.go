package edge

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/maatproxy/maat/certs"
	"github.com/maatproxy/maat/challenge"
)

// TestCluster runs three edges with one real redis-server and Pebble on
// loopback, as DESIGN.md's "One machine, then many" describes them. The
// phases share the cluster and run in order: each starts from what the one
// before left.
//
//   - certificates: each name is ordered once; the node holding a name's
//     lock dies in the middle of its order, without unlocking, and the
//     others finish it; nodes started later, even one far from Redis, read
//     the certificates instead of ordering;
//   - sealed: what the nodes keep in Redis (the ACME account key, the
//     certificates and their keys, the session ticket keys) is sealed;
//   - pass: a pass cookie earned on one node holds on the others, and a
//     solved challenge redeemed on one node is refused on another;
//   - rate: a RATE rule counts a client's requests across the nodes;
//   - redis paused, redis killed: no request fails while Redis is away,
//     /readyz says degraded, and after Redis is back every node recovers
//     and what was marked meanwhile is shared again.
func TestCluster(t *testing.T) {
	t.Parallel()
	start := time.Now()
	c := newCluster(t, "a.cluster.test", "b.cluster.test")
	var nodes []*clusterNode
	phases := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"certificates", func(t *testing.T) { nodes = c.certificates(t) }},
		{"sealed", func(t *testing.T) { checkRedisSealed(t, c.rdb, nil) }},
		{"pass", func(t *testing.T) { c.pass(t, nodes) }},
		{"rate", func(t *testing.T) { c.rate(t, nodes) }},
		{"redis paused", func(t *testing.T) {
			c.outage(t, nodes, func() { c.redis.Signal(syscall.SIGSTOP) }, func() { c.redis.Signal(syscall.SIGCONT) }, true)
		}},
		{"redis killed", func(t *testing.T) {
			c.outage(t, nodes, c.redis.Kill, func() {
				if err := c.redis.Restart(); err != nil {
					t.Fatalf("restarting redis-server on its port: %v", err)
				}
			}, false)
		}},
	}
	for _, p := range phases {
		// Not parallel: the phases are steps of one story.
		if !t.Run(p.name, p.run) {
			t.Fatalf("phase %q failed; the later ones need it", p.name)
		}
	}
	t.Logf("cluster test: %v", time.Since(start).Round(time.Millisecond))
}

// certificates starts the nodes and checks that each name gets one
// certificate, which every node serves, although the first node dies while
// it holds a name's lock in the middle of the order. It returns the three
// nodes that live at the end.
func (c *cluster) certificates(t *testing.T) []*clusterNode {
	a, b := c.names[0], c.names[1]
	n1, n2 := c.lockHolderDies(t)
	n3 := c.startNode("node3", c.redis.URL()) // a node started later reads both
	if !waitFor(t, 30*time.Second, func() bool { return n3.certReady(a) && n3.certReady(b) }) {
		t.Fatal("node3 did not read the certificates from Redis")
	}
	if o := n3.certEvents("ordering", a) + n3.certEvents("ordering", b); o != 0 {
		t.Errorf("node3 ordered %d times; want none", o)
	}
	live := []*clusterNode{n1, n2, n3}
	c.farFromRedis(t)

	for _, tt := range []struct {
		name             string
		orders, finalize int
	}{
		// a: the dead node's order, abandoned, and one survivor's.
		{a, 2, 1},
		{b, 1, 1},
	} {
		if got := c.ca.OrdersFor(tt.name); got != tt.orders {
			t.Errorf("%s: the CA counts %d orders, want %d", tt.name, got, tt.orders)
		}
		if got := c.ca.FinalizedFor(tt.name); got != tt.finalize {
			t.Errorf("%s: the CA was asked for %d certificates, want %d", tt.name, got, tt.finalize)
		}
		var serials []string
		for _, n := range live {
			s, err := c.serial(n, tt.name)
			if err != nil {
				t.Fatalf("%s: handshake with %s: %v", tt.name, n.name, err)
			}
			serials = append(serials, s)
		}
		if serials[0] != serials[1] || serials[1] != serials[2] {
			t.Errorf("%s: nodes 1, 2, 3 serve serials %v; want one certificate", tt.name, serials)
		}
	}
	t.Logf("orders: %s %d, %s %d; certificates: %s %d, %s %d", a, c.ca.OrdersFor(a), b, c.ca.OrdersFor(b),
		a, c.ca.FinalizedFor(a), b, c.ca.FinalizedFor(b))
	return live
}

// lockHolderDies: node 0 starts alone, so it takes both names' locks. The
// front relays the CA's validation of b, and parks that of a. Nodes 1 and
// 2 start, read b from Redis and wait for a's lock. Then node 0 dies: its
// path to Redis is cut (it never unlocks, and its lock is no longer
// renewed), its order fails, and it is shut down. The lock lives on until
// it expires: certs.DefaultLockTTL, a minute, which the test does not wait
// for but makes Redis's clock reach by moving the lock's expiry (PEXPIRE),
// once it has checked that the lock is the dead node's and that no other
// node ordered meanwhile. Then one survivor orders a and the other reads
// it. It returns the survivors.
func (c *cluster) lockHolderDies(t *testing.T) (*clusterNode, *clusterNode) {
	a, b := c.names[0], c.names[1]
	path0 := newRedisPath(t, c.redis.Addr(), 0)
	c.front.parkNext(a)
	n0 := c.startNode("node0", path0.url())
	var parked net.Conn
	select {
	case parked = <-c.front.parked:
	case <-time.After(30 * time.Second):
		t.Fatal("no validation of a's order within 30s")
	}
	defer parked.Close()
	if !waitFor(t, 30*time.Second, func() bool { return n0.certEvents("obtained", b) == 1 }) {
		t.Fatalf("node0 did not obtain %s", b)
	}
	if n0.certEvents("ordering", a) != 1 || c.ca.OrdersFor(a) != 1 {
		t.Fatalf("while a's validation is parked: node0 logged %d orders of %s, the CA counts %d; want 1, 1",
			n0.certEvents("ordering", a), a, c.ca.OrdersFor(a))
	}
	n1 := c.startNode("node1", c.redis.URL())
	n2 := c.startNode("node2", c.redis.URL())
	if !waitFor(t, 30*time.Second, func() bool { return n1.certEvents("loaded", b) == 1 && n2.certEvents("loaded", b) == 1 }) {
		t.Fatalf("nodes 1 and 2 did not read %s from Redis", b)
	}

	path0.cutOff()
	c.front.remove(n0.Addrs().HTTPS)
	parked.Close() // the CA's validation fails: node0's order ends
	if !waitFor(t, 30*time.Second, func() bool { return n0.certEvents("failed", a) == 1 }) {
		t.Fatalf("node0's order of %s did not end", a)
	}
	dead, cancel := context.WithCancel(context.Background())
	cancel()
	_ = n0.Shutdown(dead)

	lockKey := "maat:lock:certs:" + a + "+lock"
	ctx := t.Context()
	token, err := c.rdb.Get(ctx, lockKey).Result()
	if err != nil {
		t.Fatalf("a's lock after node0 died: %v; want it held by the dead node until it expires", err)
	}
	if !bytes.Contains(path0.sentBytes(), []byte(token)) {
		t.Fatal("a's lock is not the one node0 took")
	}
	if ttl, err := c.rdb.PTTL(ctx, lockKey).Result(); err != nil || ttl <= 0 || ttl > certs.DefaultLockTTL {
		t.Fatalf("PTTL of the dead node's lock = %v, %v; want it to expire within %v", ttl, err, certs.DefaultLockTTL)
	}
	if n, o := c.ca.OrdersFor(a), n1.certEvents("ordering", a)+n2.certEvents("ordering", a); n != 1 || o != 0 {
		t.Fatalf("%d orders of %s (%d by the survivors) while the dead node's lock lives; want 1 (0)", n, a, o)
	}
	if err := c.rdb.PExpire(ctx, lockKey, time.Millisecond).Err(); err != nil { // the minute has passed
		t.Fatal(err)
	}
	if !waitFor(t, 30*time.Second, func() bool { return n1.certReady(a) && n2.certReady(a) }) {
		t.Fatalf("the survivors have no certificate for %s after the dead node's lock expired", a)
	}
	var ordering, obtained, loaded int
	for _, n := range []*clusterNode{n1, n2} {
		ordering += n.certEvents("ordering", a)
		obtained += n.certEvents("obtained", a)
		loaded += n.certEvents("loaded", a)
	}
	if ordering != 1 || obtained != 1 || loaded != 1 {
		t.Errorf("survivors' events for %s: %d ordering, %d obtained, %d loaded; want 1 each", a, ordering, obtained, loaded)
	}
	return n1, n2
}

// farFromRedis: a node 200 ms from Redis (each command) is too far for
// requests, which wait 50 ms (store.DefaultTimeout, as in production), so
// its store says degraded; but its certificates wait, and it reads both
// names from Redis instead of ordering them again.
func (c *cluster) farFromRedis(t *testing.T) {
	a, b := c.names[0], c.names[1]
	slow := c.startNodeWith("node4", newRedisPath(t, c.redis.Addr(), 200*time.Millisecond).url(), 0)
	defer func() {
		_ = slow.Shutdown(t.Context())
		c.front.remove(slow.Addrs().HTTPS)
	}()
	if !waitFor(t, 30*time.Second, func() bool { return slow.certReady(a) && slow.certReady(b) }) {
		t.Error("node4, far from Redis, has no certificates")
	}
	if !waitFor(t, 10*time.Second, func() bool { return slow.storeState() == "degraded" }) {
		t.Errorf("node4, far from Redis: store %s, want degraded", slow.storeState())
	}
	if o := slow.certEvents("ordering", a) + slow.certEvents("ordering", b); o != 0 {
		t.Errorf("node4, far from Redis, ordered %d times; want none", o)
	}
}

// earn asks node n for path without a cookie, solves the challenge page
// and returns the pass URL with its nonces.
func (c *cluster) earn(t *testing.T, n *clusterNode, path string) string {
	t.Helper()
	res, page, err := c.fetch(c.client(n), path)
	if err != nil {
		t.Fatalf("%s %s: %v", n.name, path, err)
	}
	if res.StatusCode != http.StatusForbidden || res.Header.Get(challenge.MitigatedHeader) != "challenge" {
		t.Fatalf("%s %s: %d %s=%q; want a challenge", n.name, path, res.StatusCode, challenge.MitigatedHeader, res.Header.Get(challenge.MitigatedHeader))
	}
	p := parsePage(t, page)
	if p.seed == "" || p.pass == "" || p.k < 1 || p.bits > 24 {
		t.Fatalf("%s %s: a challenge page without a proof of work to solve: %+v", n.name, path, p)
	}
	return p.pass + "&n=" + p.solve()
}

// redeem redeems a solved challenge on node n and returns the response's
// pass cookie, or nil with the status and body when it is refused.
func (c *cluster) redeem(t *testing.T, n *clusterNode, pass string) (*http.Cookie, int, string) {
	t.Helper()
	res, body, err := c.fetch(c.client(n), pass)
	if err != nil {
		t.Fatalf("%s %s: %v", n.name, pass, err)
	}
	for _, ck := range res.Cookies() {
		if ck.Name == challenge.CookieName && res.StatusCode == http.StatusSeeOther {
			return ck, res.StatusCode, body
		}
	}
	return nil, res.StatusCode, body
}

// reused counts the node's refusals of a pass as reused.
func reused(t *testing.T, n *clusterNode) int {
	return countFP(t, n.fp, func(l fpLine) bool {
		return l.str("path") == challenge.PathPrefix+"pass" && slices.Contains(l.rules(), challenge.FailReused)
	})
}

// storeChanges counts the store state changes each node logged.
func storeChanges(nodes []*clusterNode) []int {
	out := make([]int, len(nodes))
	for i, n := range nodes {
		out[i] = n.logged("store_degraded") + n.logged("store_recovered")
	}
	return out
}

// storesAre reports whether every node's /readyz says the store is in
// state.
func storesAre(nodes []*clusterNode, state string) bool {
	for _, n := range nodes {
		if n.storeState() != state {
			return false
		}
	}
	return true
}

// attempts runs try until it reports a result that counts: one during which
// no node's store changed state. The request store gives Redis a second a
// call here (clusterStoreTimeout; 50 ms in production); on this shared
// 2-core machine under the race detector a call can still wait longer for
// a CPU, and the node then serves from its own memory for a moment, as it
// must: a mark or a count made in that moment is not
// shared, so what try checks of sharing does not hold then. Such an attempt
// is repeated, with fresh tokens and clients; three in a row fail the test.
func (c *cluster) attempts(t *testing.T, nodes []*clusterNode, try func(attempt int) (check func())) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		c.waitStores(t, nodes, "ok")
		before := storeChanges(nodes)
		check := try(attempt)
		if slices.Equal(before, storeChanges(nodes)) && storesAre(nodes, "ok") {
			check()
			return
		}
		if attempt == 3 {
			t.Fatalf("a node's store changed state during each of %d attempts", attempt)
		}
		t.Logf("attempt %d: a node's store changed state meanwhile; again", attempt)
	}
}

// pass: a cookie earned on node A passes on B and C; the solved challenge
// redeemed on A is refused on B as reused.
func (c *cluster) pass(t *testing.T, nodes []*clusterNode) {
	a, b := nodes[0], nodes[1]
	c.attempts(t, nodes, func(attempt int) func() {
		solved := c.earn(t, a, fmt.Sprintf("/guarded/pass/%d", attempt))
		cookie, status, body := c.redeem(t, a, solved)
		if cookie == nil {
			t.Fatalf("redeeming on %s: %d %s", a.name, status, body)
		}
		for i, n := range nodes {
			path := fmt.Sprintf("/guarded/pass/%d/%d", attempt, i)
			res, body, err := c.fetch(c.client(n), path, cookie)
			if err != nil || res.StatusCode != http.StatusOK || !strings.Contains(body, "Path="+path) {
				t.Errorf("%s with the pass from %s: %v %v %q", n.name, a.name, res, err, body)
				continue
			}
			if l := waitLine(t, n.fp, path); l.str("action") != "PASS" {
				t.Errorf("%s logged %s as %s, want PASS", n.name, path, l.str("action"))
			}
		}
		before := reused(t, b)
		ck, status, body := c.redeem(t, b, solved)
		return func() {
			if ck != nil || status != http.StatusForbidden || !strings.Contains(body, challenge.FailReused) {
				t.Errorf("the challenge solved on %s, again on %s: %d, cookie %v; want 403 %s", a.name, b.name, status, ck != nil, challenge.FailReused)
			}
			if !waitFor(t, 10*time.Second, func() bool { return reused(t, b) == before+1 }) {
				t.Errorf("%s did not log the replay as %s", b.name, challenge.FailReused)
			}
		}
	})
}

// rate: requests to a RATE rule's paths, spread over the nodes, are
// allowed the rule's burst in all, not a burst per node. Each attempt is
// another client (another /24, the rule's key).
func (c *cluster) rate(t *testing.T, nodes []*clusterNode) {
	c.attempts(t, nodes, func(attempt int) func() {
		from := fmt.Sprintf("127.0.%d.1", 10+attempt)
		allowed := map[string]int{}
		for i := range 3 * rateBurst {
			n := nodes[i%len(nodes)]
			res, body, err := c.fetch(c.clientFrom(n, from), fmt.Sprintf("/limited/%d/%d", attempt, i))
			switch {
			case err != nil:
				t.Fatalf("%s: %v", n.name, err)
			case res.StatusCode == http.StatusOK:
				allowed[n.name]++
			case res.StatusCode != http.StatusTooManyRequests:
				t.Fatalf("%s: %d %q", n.name, res.StatusCode, body)
			}
		}
		return func() {
			total := 0
			for _, a := range allowed {
				total += a
			}
			if total != rateBurst || len(allowed) != len(nodes) {
				t.Errorf("allowed %v (%d in all) of %d requests; want %d in all, some on every node", allowed, total, 3*rateBurst, rateBurst)
			}
			for _, n := range nodes {
				// A line lands in the file within fplog's flush delay.
				if !waitFor(t, 5*time.Second, func() bool {
					return countFP(t, n.fp, func(l fpLine) bool {
						return strings.HasPrefix(l.str("path"), fmt.Sprintf("/limited/%d/", attempt)) && l.str("action") == "RATE" && l.str("remote_ip") == from
					}) > 0
				}) {
					t.Errorf("%s logged no RATE line for %s", n.name, from)
				}
			}
		}
	})
}

// waitStores waits until every node's /readyz says the store is in state.
func (c *cluster) waitStores(t *testing.T, nodes []*clusterNode, state string) {
	t.Helper()
	if !waitFor(t, 15*time.Second, func() bool { return storesAre(nodes, state) }) {
		var got []string
		for _, n := range nodes {
			got = append(got, n.name+": "+n.storeState())
		}
		t.Fatalf("store state %v; want %s on every node", got, state)
	}
}

// waitLogged waits until the last store state change each node logged is
// msg.
func (c *cluster) waitLogged(t *testing.T, nodes []*clusterNode, msg string) {
	t.Helper()
	for _, n := range nodes {
		if !waitFor(t, 5*time.Second, func() bool { return n.lastStoreChange() == msg }) {
			t.Errorf("%s's last store state change in its log is %q, want %s", n.name, n.lastStoreChange(), msg)
		}
	}
}

// traffic sends requests to every node until stopped, and records each that
// fails: an error or a status other than 200. Each node's client sends, in
// turn, a request the policy allows, one a RATE rule counts in the store,
// and one that needs the pass cookie.
// trafficEvery is how often each node's client sends a request.
const trafficEvery = 10 * time.Millisecond

type traffic struct {
	stop chan struct{}
	wg   sync.WaitGroup
	done atomic.Int64

	mu     sync.Mutex
	failed []string
}

func (c *cluster) startTraffic(nodes []*clusterNode, cookie *http.Cookie) *traffic {
	tr := &traffic{stop: make(chan struct{})}
	for _, n := range nodes {
		hc := c.client(n)
		tr.wg.Go(func() {
			// Paced, as visitors are: a loop as fast as it can go would
			// starve the nodes of this 2-core machine's CPU, and a Redis
			// call that waits past the store's wait for a CPU counts as
			// Redis gone.
			tick := time.NewTicker(trafficEvery)
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-tr.stop:
					return
				case <-tick.C:
				}
				path := [...]string{"/plain/", "/counted/", "/guarded/"}[i%3] + strconv.Itoa(i)
				res, _, err := c.fetch(hc, path, cookie)
				if err != nil || res.StatusCode != http.StatusOK {
					status := 0
					if res != nil {
						status = res.StatusCode
					}
					tr.mu.Lock()
					tr.failed = append(tr.failed, fmt.Sprintf("%s %s: %d %v", n.name, path, status, err))
					tr.mu.Unlock()
				}
				tr.done.Add(1)
			}
		})
	}
	return tr
}

// more waits until n more requests are done.
func (tr *traffic) more(t *testing.T, n int64) {
	t.Helper()
	want := tr.done.Load() + n
	if !waitFor(t, 20*time.Second, func() bool { return tr.done.Load() >= want }) {
		t.Fatalf("traffic stalled at %d requests, want %d", tr.done.Load(), want)
	}
}

// end stops the traffic and fails the test for every failed request.
func (tr *traffic) end(t *testing.T) {
	t.Helper()
	close(tr.stop)
	tr.wg.Wait()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, f := range tr.failed {
		t.Errorf("failed request: %s", f)
	}
}

// outage takes Redis away (stop) during traffic and brings it back
// (restore): no request fails; every node says degraded in /readyz and
// logs it once, and then ok again; a challenge solved and redeemed on node
// A during the outage is refused on node B afterwards, because A wrote its
// mark back.
func (c *cluster) outage(t *testing.T, nodes []*clusterNode, stop, restore func(), keepsData bool) {
	a := nodes[0]
	cookie, status, body := c.redeem(t, a, c.earn(t, a, "/guarded/"+t.Name()))
	if cookie == nil {
		t.Fatalf("a pass before the outage: %d %s", status, body)
	}
	c.waitStores(t, nodes, "ok")
	ctx := t.Context()
	marks := func() int {
		keys, err := c.rdb.Keys(ctx, "maat:mark:*").Result()
		if err != nil {
			return -1
		}
		return len(keys)
	}
	marksBefore := 0 // a killed Redis comes back empty
	if keepsData {
		marksBefore = marks()
	}
	tr := c.startTraffic(nodes, cookie)
	tr.more(t, 30)
	before := tr.done.Load()
	stop()
	began := time.Now()
	c.waitStores(t, nodes, "degraded")
	t.Logf("every node degraded %v after Redis left", time.Since(began).Round(time.Millisecond))
	// The log follows /readyz, from the store's own goroutine.
	c.waitLogged(t, nodes, "store_degraded")
	solved := c.earn(t, a, "/guarded/during-"+t.Name())
	if ck, status, body := c.redeem(t, a, solved); ck == nil {
		t.Fatalf("redeeming on %s during the outage: %d %s", a.name, status, body)
	}
	changes := storeChanges(nodes)
	tr.more(t, 30)
	// While Redis is away each node said so once, however many calls
	// found it gone.
	if now := storeChanges(nodes); !slices.Equal(now, changes) {
		t.Errorf("store state changes logged while Redis stayed away: %v, then %v", changes, now)
	}
	restore()
	back := time.Now()
	c.waitStores(t, nodes, "ok")
	t.Logf("every node recovered %v after Redis returned", time.Since(back).Round(time.Millisecond))
	during := tr.done.Load() - before
	c.waitLogged(t, nodes, "store_recovered")
	// A switches back to Redis first and then writes the marks it set
	// meanwhile; wait for that write.
	if !waitFor(t, 10*time.Second, func() bool { return marks() > marksBefore }) {
		t.Fatalf("no mark written back to Redis (%d before the outage, %d now)", marksBefore, marks())
	}
	c.replayRefused(t, a, nodes[1:], solved)
	tr.more(t, 30)
	tr.end(t)
	t.Logf("%d requests in all, %d of them between Redis leaving and every node recovering; %d failed",
		tr.done.Load(), during, len(tr.failed))
}

// replayRefused redeems a challenge solved on a once more, on the first of
// others whose store stays on Redis while it answers (see attempts), and
// checks that it is refused as reused.
func (c *cluster) replayRefused(t *testing.T, a *clusterNode, others []*clusterNode, solved string) {
	t.Helper()
	for _, b := range others {
		bs := []*clusterNode{b}
		c.waitStores(t, bs, "ok")
		n, changes := reused(t, b), storeChanges(bs)
		ck, status, _ := c.redeem(t, b, solved)
		if !slices.Equal(changes, storeChanges(bs)) || !storesAre(bs, "ok") {
			t.Logf("%s's store changed state during the replay; replaying on another node", b.name)
			continue
		}
		if ck != nil || status != http.StatusForbidden {
			t.Errorf("a challenge redeemed on %s during the outage, again on %s after: %d, cookie %v; want 403", a.name, b.name, status, ck != nil)
		}
		if !waitFor(t, 10*time.Second, func() bool { return reused(t, b) == n+1 }) {
			t.Errorf("%s did not log the replay as %s", b.name, challenge.FailReused)
		}
		return
	}
	t.Error("every other node's store changed state during the replay")
}

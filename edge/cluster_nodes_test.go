package edge

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/maatproxy/maat/edge/config"
	"github.com/maatproxy/maat/internal/testacme"
	"github.com/maatproxy/maat/internal/testredis"
	"github.com/maatproxy/maat/tlsfp"
)

// cluster is what the nodes of a cluster test share, as the machines of a
// deployment do: a redis-server, the ACME CA and its view of the cluster
// (the front), the challenge secret (the same file copied to each node), a
// policy and an upstream.
type cluster struct {
	t        *testing.T
	dir      string
	redis    *testredis.Server
	rdb      *redis.Client // the test's own look into Redis
	ca       *testacme.CA
	front    *acmeFront
	secret   []byte
	policy   string
	upstream string
	names    []string
}

// clusterNode is one edge of the cluster.
type clusterNode struct {
	*Server
	name string
	log  *syncBuffer // the node's log, JSON lines
	fp   string      // its fingerprint log
}

// clusterPolicy limits /limited/ to a burst of 6 per client across the
// cluster, counts every /counted/ request in the store without limiting
// it, and asks a proof of work for /guarded/.
const clusterPolicy = `bots:
  - name: limited
    path_regex: ^/limited/
    action: RATE
    rate: { key: ip, per_second: 0.001, burst: 6 }
  - name: counted
    path_regex: ^/counted/
    action: RATE
    rate: { key: ip, per_second: 10000, burst: 1000000 }
  - name: guarded
    path_regex: ^/guarded/
    action: CHALLENGE
    challenge: { algorithm: fast, bits: 8 }
thresholds:
  - { name: rest, expression: "true", action: ALLOW }
`

// rateBurst is the burst of clusterPolicy's limited rule.
const rateBurst = 6

func newCluster(t *testing.T, names ...string) *cluster {
	t.Helper()
	c := &cluster{t: t, dir: t.TempDir(), names: names, secret: make([]byte, 32)}
	rand.Read(c.secret)
	c.redis = testredis.Start(t)
	c.rdb = c.redis.Client()
	// The nodes do not serve port 80 (listen.http: ""), so they accept
	// only tls-alpn-01 challenges; the CA's http-01 port is the front too.
	c.front = newACMEFront(t)
	port := c.front.ln.Addr().(*net.TCPAddr).Port
	c.ca = testacme.Start(t, port, port, testacme.Options{})
	c.policy = filepath.Join(c.dir, "policy.yaml")
	if err := os.WriteFile(c.policy, []byte(clusterPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	c.upstream = echoUpstream(t, "site").URL
	return c
}

// clusterStoreTimeout is how long the nodes' requests wait for Redis in one
// call, instead of store.DefaultTimeout's 50 ms: on this shared 2-core
// machine under the race detector, a call often waited longer than that
// for a CPU, and the node's store turned degraded for a moment in each of
// the three attempts the sharing phases make (see attempts). A second is
// past any such wait, and Redis paused or killed is still noticed.
const clusterStoreTimeout = time.Second

// startNode starts a node that reaches Redis at storeURL, with a directory
// of its own (certificate cache, secret file, fingerprint log), whose
// requests wait clusterStoreTimeout for Redis.
func (c *cluster) startNode(name, storeURL string) *clusterNode {
	c.t.Helper()
	return c.startNodeWith(name, storeURL, clusterStoreTimeout)
}

// startNodeWith is startNode with the requests' wait for Redis in one
// call (0: store.DefaultTimeout).
func (c *cluster) startNodeWith(name, storeURL string, storeTimeout time.Duration) *clusterNode {
	t := c.t
	t.Helper()
	dir := filepath.Join(c.dir, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, c.secret, 0o600); err != nil { // copied to every node
		t.Fatal(err)
	}
	n := &clusterNode{name: name, log: &syncBuffer{}, fp: filepath.Join(dir, "fp.jsonl")}
	cfg, err := config.Parse(name+".yaml", []byte(fmt.Sprintf(`
listen: { https: "127.0.0.1:0", http: "", admin: "127.0.0.1:0", http3: false }
tls:
  mode: acme
  cache: %s
  acme: { email: ops@cluster.test, directory: %q, ca_roots: %q }
sites: [{hosts: [%s], upstream: %s}]
policy: %s
challenge: { secret_file: %s }
store: { kind: redis, url: %q }
log: { fingerprints: %s }
`, filepath.Join(dir, "certs"), c.ca.DirURL, c.ca.RootsFile, strings.Join(c.names, ", "), c.upstream,
		c.policy, secret, storeURL, n.fp)))
	if err != nil {
		t.Fatalf("%s: config: %v", name, err)
	}
	if n.Server, err = newServer(cfg, slog.New(slog.NewJSONHandler(n.log, nil)), testHooks{storeTimeout: storeTimeout}); err != nil {
		t.Fatalf("%s: New: %v", name, err)
	}
	if err := n.Start(); err != nil {
		t.Fatalf("%s: Start: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = n.Shutdown(ctx)
		if t.Failed() {
			t.Logf("log of %s:\n%s", name, n.log.String())
		}
	})
	c.front.add(n.Addrs().HTTPS)
	return n
}

// logged counts the node's log records with message msg whose attributes
// include attrs (key, value, …).
func (n *clusterNode) logged(msg string, attrs ...string) int {
	count := 0
	for line := range strings.SplitSeq(n.log.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil || rec["msg"] != msg {
			continue
		}
		match := true
		for i := 0; i+1 < len(attrs); i += 2 {
			if v, _ := rec[attrs[i]].(string); v != attrs[i+1] {
				match = false
			}
		}
		if match {
			count++
		}
	}
	return count
}

// lastStoreChange is the node's last log record of a store state change:
// store_degraded or store_recovered ("" when there is none).
func (n *clusterNode) lastStoreChange() string {
	last := ""
	for line := range strings.SplitSeq(n.log.String(), "\n") {
		var rec struct{ Msg string }
		if json.Unmarshal([]byte(line), &rec) == nil && (rec.Msg == "store_degraded" || rec.Msg == "store_recovered") {
			last = rec.Msg
		}
	}
	return last
}

// certEvents counts the node's certificate events of kind for name.
func (n *clusterNode) certEvents(kind, name string) int {
	return n.logged("certificate", "event", kind, "name", name)
}

// readyz reads the node's /readyz.
func (n *clusterNode) readyz() (readiness, error) {
	var rd readiness
	c := http.Client{Timeout: 5 * time.Second}
	res, err := c.Get("http://" + n.Addrs().Admin + "/readyz")
	if err != nil {
		return rd, err
	}
	defer res.Body.Close()
	err = json.NewDecoder(res.Body).Decode(&rd)
	return rd, err
}

// storeState is the store's state in the node's /readyz, or why it could
// not be read.
func (n *clusterNode) storeState() string {
	rd, err := n.readyz()
	switch {
	case err != nil:
		return err.Error()
	case rd.Store == nil:
		return "no store in /readyz"
	}
	return rd.Store.State
}

// certReady reports whether the node's /readyz says it has a certificate
// for name.
func (n *clusterNode) certReady(name string) bool {
	rd, err := n.readyz()
	if err != nil {
		return false
	}
	for _, cs := range rd.Certs {
		if cs.Name == name {
			return cs.Ready
		}
	}
	return false
}

// serial returns the serial number of the certificate the node serves for
// name, to a client that trusts only the CA's root.
func (c *cluster) serial(n *clusterNode, name string) (string, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", n.Addrs().HTTPS,
		&tls.Config{RootCAs: c.ca.Roots, ServerName: name})
	if err != nil {
		return "", err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Text(16), nil
}

// client returns an HTTP client (HTTP/2) of the node for the cluster's
// first name that trusts only the CA's root and follows no redirect. All
// clients send the same ClientHello, so a pass bound to the client's JA4
// holds on every node.
func (c *cluster) client(n *clusterNode) *http.Client { return c.clientFrom(n, "127.0.0.1") }

// clientFrom is client from another loopback address.
func (c *cluster) clientFrom(n *clusterNode, local string) *http.Client {
	addr := n.Addrs().HTTPS
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "tcp", addr)
		},
		TLSClientConfig:   &tls.Config{RootCAs: c.ca.Roots, ServerName: c.names[0]},
		ForceAttemptHTTP2: true,
	}
	c.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// fetch GETs path on the cluster's first name with client hc and the given
// cookies, and returns the status and body.
func (c *cluster) fetch(hc *http.Client, path string, cookies ...*http.Cookie) (*http.Response, string, error) {
	req, err := http.NewRequest("GET", "https://"+c.names[0]+path, nil)
	if err != nil {
		return nil, "", err
	}
	for _, ck := range cookies {
		req.AddCookie(ck)
	}
	res, err := hc.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res, string(b), err
}

// countFP counts the lines of a fingerprint log that match.
func countFP(t *testing.T, file string, match func(fpLine) bool) int {
	n := 0
	for _, l := range fpLines(t, file) {
		if match(l) {
			n++
		}
	}
	return n
}

// acmeFront stands where the CA validates (127.0.0.1, the port it was
// given): the cluster's address as the CA sees it, like DNS round robin
// over the nodes. It passes each validation connection to the next live
// node, except that it parks the next tls-alpn-01 validation of a chosen
// name, so that the test decides what happens while that order waits.
type acmeFront struct {
	ln    net.Listener
	conns sync.WaitGroup

	mu     sync.Mutex
	nodes  []string // HTTPS addresses of the live nodes
	next   int
	park   string        // the name whose next validation is parked
	parked chan net.Conn // where it goes
	open   map[net.Conn]struct{}
}

func newACMEFront(t *testing.T) *acmeFront {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &acmeFront{ln: ln, parked: make(chan net.Conn, 1), open: map[net.Conn]struct{}{}}
	f.conns.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.track(c, true)
			f.conns.Go(func() { f.serve(c) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		f.mu.Lock()
		for c := range f.open {
			c.Close()
		}
		f.mu.Unlock()
		f.conns.Wait()
	})
	return f
}

func (f *acmeFront) track(c net.Conn, add bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if add {
		f.open[c] = struct{}{}
	} else {
		delete(f.open, c)
	}
}

func (f *acmeFront) add(addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nodes = append(f.nodes, addr)
}

func (f *acmeFront) remove(addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, a := range f.nodes {
		if a == addr {
			f.nodes = append(f.nodes[:i], f.nodes[i+1:]...)
			return
		}
	}
}

// parkNext parks the next validation of name.
func (f *acmeFront) parkNext(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.park = name
}

// route returns the node for a validation of name, or "" when it is parked.
func (f *acmeFront) route(name string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if name != "" && name == f.park {
		f.park = ""
		return "", true
	}
	if len(f.nodes) == 0 {
		return "", false
	}
	f.next++
	return f.nodes[f.next%len(f.nodes)], true
}

// serve reads the ClientHello (bounded in size and time) for its server
// name, then parks the connection or relays it to a node.
func (f *acmeFront) serve(c net.Conn) {
	defer f.track(c, false)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var hello []byte
	var h *tlsfp.Hello
	buf := make([]byte, 4096)
	for h == nil {
		n, err := c.Read(buf)
		hello = append(hello, buf[:n]...)
		var perr error
		if h, perr = tlsfp.ParseRecords(hello); perr != nil && (!errors.Is(perr, tlsfp.ErrTruncated) || err != nil || len(hello) > 1<<16) {
			c.Close()
			return
		}
	}
	c.SetReadDeadline(time.Time{})
	addr, ok := f.route(h.ServerName)
	switch {
	case ok && addr == "":
		f.parked <- c // the test closes it
		return
	case !ok:
		c.Close()
		return
	}
	defer c.Close()
	up, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return
	}
	defer up.Close()
	if _, err := up.Write(hello); err != nil {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(c, up)
		c.Close()
	}()
	_, _ = io.Copy(up, c)
	up.Close()
	<-done
}

// redisPath is a node's network path to Redis: a TCP relay that keeps what
// the node sent, and that the test can cut, as a crash or a pulled cable
// cuts a machine off: from then on nothing the node sends reaches Redis.
type redisPath struct {
	ln     net.Listener
	target string
	delay  time.Duration // added to every write of the node: a slow network
	wg     sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	sent  []byte // what the node sent, up to maxSent
	cut   bool
}

const maxSent = 4 << 20

func newRedisPath(t *testing.T, target string, delay time.Duration) *redisPath {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &redisPath{ln: ln, target: target, delay: delay, conns: map[net.Conn]struct{}{}}
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Go(func() { p.relay(c) })
		}
	})
	t.Cleanup(func() {
		p.cutOff()
		p.wg.Wait()
	})
	return p
}

func (p *redisPath) url() string { return "redis://" + p.ln.Addr().String() + "/0" }

// cutOff closes the relay and every connection through it.
func (p *redisPath) cutOff() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
}

// sentBytes returns a copy of what the node sent.
func (p *redisPath) sentBytes() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return bytes.Clone(p.sent)
}

// add tracks c, unless the path is cut.
func (p *redisPath) add(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *redisPath) relay(c net.Conn) {
	defer c.Close()
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		return
	}
	defer up.Close()
	if !p.add(c) || !p.add(up) {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(c, up)
		c.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			p.mu.Lock()
			if len(p.sent)+n <= maxSent {
				p.sent = append(p.sent, buf[:n]...)
			}
			p.mu.Unlock()
			if p.delay > 0 {
				time.Sleep(p.delay) // the latency of the path, not synchronization
			}
			if _, werr := up.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	up.Close()
	<-done
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

package edge

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/maatproxy/maat/edge/config"
	"github.com/maatproxy/maat/internal/testenv"
)

// The differential conformance suite (issue 31): the same scripted
// exchanges sent directly to the upstream, through the edge with parking
// on, through the edge with parking off, and through nginx where it is
// installed; what the client receives must agree byte for byte where a
// proxy must not change it: the status line, the header fields that pass
// through (not the hop-by-hop ones, nor those the edge adds by contract),
// the 1xx answers, the body bytes, the trailers, whether a body ended
// cleanly or was cut, and what the upstream saw of the client. Each
// exchange runs on HTTP/1.1 (raw bytes on a TLS connection, so that the
// test controls the wire), HTTP/2 and HTTP/3, where it makes sense. With
// parking on, the HTTP/1.1 connection is made to park (and the test waits
// until it has) before the exchange and between its requests, so that
// every exchange is served on a connection that parked and came back;
// HTTP/2 and HTTP/3 connections pause as long, though they never park.
//
// The test logs a table, exchange × protocol × target: "yes" agrees with
// the reference (the upstream's direct answer, or for a row with a want,
// the edge's contract), "NO" fails the test, "differs*" is nginx
// answering otherwise by design (said below the table), "aborted*" the
// edge closing the connection where the reference answered, by design
// (said below the table; never an answer that differs), "(ref)" the
// upstream's own answer where a contract is the reference, "-" not run.

// confParkAfter is the time to park of the edge with parking on: short, so
// that a connection parks between any two requests the test spaces out,
// and at every slow answer of the upstream.
const confParkAfter = 20 * time.Millisecond

// confHeaderTimeout is the proxies' upstream header timeout: far beyond
// any answer's but the one that tests it.
const confHeaderTimeout = 3 * time.Second

// confConcurrent is how many exchanges (against one target each) run at
// a time.
const confConcurrent = 16

// confTarget is where a client sends the exchanges.
type confTarget struct {
	name   string // the table's column
	addr   string // TCP: HTTP/1.1 and HTTP/2 over TLS
	h3addr string // UDP: HTTP/3; "" if none
	tls    *tls.Config
	edge   *testEdge // the edge's, nil otherwise
	park   bool      // the edge parks idle connections
}

func (tg *confTarget) tlsConfig(alpn ...string) *tls.Config {
	c := tg.tls.Clone()
	c.NextProtos = alpn
	return c
}

// parked reports whether the edge holds the connection whose client end
// is at local parked.
func (tg *confTarget) parked(local net.Addr) bool {
	if tg.edge == nil {
		return false
	}
	return tg.edge.Server.park.IsParked(local)
}

// confEdge starts an edge in front of up's plain server, parking idle
// connections after confParkAfter when park, never otherwise.
func confEdge(t *testing.T, up *confUpstream, park bool) *confTarget {
	t.Helper()
	parkAfter := 0 * time.Second
	if park {
		parkAfter = confParkAfter
	}
	cfg, err := config.Parse("test.yaml", []byte(edgeConfigText("", "policy: \"\"\n"+
		"limits: {park_after: "+parkAfter.String()+"}\n"+
		"timeouts: {upstream_header: "+confHeaderTimeout.String()+"}\n"+
		"sites: [{hosts: [localhost], upstream: "+up.plain.URL+", compress: false}]\n")))
	if err != nil {
		t.Fatal(err)
	}
	e := startEdgeConfig(t, cfg, io.Discard)
	name := "park off"
	if park {
		name = "park on"
	}
	return &confTarget{name: name, addr: e.Addrs().HTTPS, h3addr: e.Addrs().HTTPS,
		tls: e.tlsConfig(), edge: e, park: park}
}

// confExchange is a row of the table.
type confExchange struct {
	name   string
	protos string    // of "h1 h2 h3", those it runs on; "" = all
	reqs   []confReq // sent one after the other (HTTP/1.1: each after the last answer, with a pause to park between)
	// pipeline sends reqs at once: in one write on HTTP/1.1, as
	// concurrent streams on HTTP/2 and HTTP/3.
	pipeline bool
	// halfClose shuts the client's sending side after the requests
	// (HTTP/1.1); closed reads on after the answers and reports whether
	// the connection was closed.
	halfClose, closed bool
	// h1, hx script the whole exchange instead of reqs.
	h1 func(x *confRun, c *tls.Conn, out *strings.Builder)
	hx func(x *confRun, c *http.Client, out *strings.Builder)
	// want is the reference answer when it is a contract of the edge's
	// rather than the upstream's behaviour (the direct column is then
	// shown, not compared).
	want string
	// nginx says why nginx answers otherwise by design, if it does.
	nginx string
	// aborts says why the edge may close the connection instead of the
	// exchange's last answer, if it may: its cell is then the
	// reference's answers but the last, and no answer (confAborts); any
	// other difference, an empty or made-up answer above all, fails.
	aborts string
}

func (ex *confExchange) runsOn(proto string) bool {
	return ex.protos == "" || slices.Contains(strings.Fields(ex.protos), proto)
}

// confRun is one exchange on one protocol against one target.
type confRun struct {
	tg    *confTarget
	up    *confUpstream
	proto string
	id    string // unique to the run, for the upstream's paths that take one
	parks int    // times the connection was seen parked
	// pausedOff: the connection paused once past the default time to
	// park on the edge with parking off.
	pausedOff bool
}

// path fills in the run's id.
func (x *confRun) path(p string) string { return strings.ReplaceAll(p, "{id}", x.id) }

// confResult is one cell of the table.
type confResult struct {
	got   string
	parks int
}

func TestConformance(t *testing.T) {
	t.Parallel()
	up := newConfUpstream(t)
	direct := &confTarget{name: "direct", addr: up.direct.Listener.Addr().String(), h3addr: up.h3addr,
		tls: &tls.Config{InsecureSkipVerify: true}} // loopback, the upstream's own test certificate
	targets := []*confTarget{direct, confEdge(t, up, true), confEdge(t, up, false)}
	if _, err := exec.LookPath("nginx"); err == nil {
		targets = append(targets, confNginx(t, up))
	} else if testenv.InCI() {
		t.Fatal("nginx is not installed (make deps installs it); CI must not skip the nginx column")
	} else {
		t.Log("nginx is not installed: its column is skipped")
	}

	// Every exchange runs on every protocol against every target at
	// once, up to confConcurrent exchanges at a time (they mostly wait:
	// on a pause to park, a slow upstream); then each is judged.
	type combo struct {
		ex    *confExchange
		proto string
	}
	var combos []combo
	for _, ex := range confExchanges() {
		for _, proto := range []string{"h1", "h2", "h3"} {
			if ex.runsOn(proto) {
				combos = append(combos, combo{ex, proto})
			}
		}
	}
	results := map[string]map[string]confResult{} // exchange/proto → target → result
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, confConcurrent)
	seq := 0
	for _, k := range combos {
		for _, tg := range targets {
			if k.proto == "h3" && tg.h3addr == "" {
				continue
			}
			seq++
			x := &confRun{tg: tg, up: up, proto: k.proto, id: fmt.Sprint(seq)}
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				got := x.run(k.ex)
				mu.Lock()
				defer mu.Unlock()
				if results[k.ex.name+"/"+k.proto] == nil {
					results[k.ex.name+"/"+k.proto] = map[string]confResult{}
				}
				results[k.ex.name+"/"+k.proto][tg.name] = confResult{got: got, parks: x.parks}
			})
		}
	}
	wg.Wait()
	for _, k := range combos {
		t.Run(k.ex.name+"/"+k.proto, func(t *testing.T) { confCompare(t, k.ex, k.proto, results[k.ex.name+"/"+k.proto]) })
	}
	confTable(t, targets, results)
	for _, tg := range targets {
		if tg.edge == nil {
			continue
		}
		// Every client is gone: no request may still be in flight, no
		// connection still counted (a reset, a cut or a half-close that
		// left one hanging).
		s := tg.edge.Server
		busy := func() (requests, conns int) {
			if s.env.inflight != nil {
				requests = s.env.inflight.len()
			}
			if s.conns1 != nil {
				conns = s.conns1.len()
			}
			return requests, conns
		}
		if !confPoll(func() bool { r, c := busy(); return r == 0 && c == 0 }) {
			r, c := busy()
			t.Errorf("%s: after the last client left, clients with requests in flight: %d, with connections: %d", tg.name, r, c)
		}
	}
}

// run runs ex on x's protocol and returns what the client (and, where it
// is the point, the upstream) saw.
func (x *confRun) run(ex *confExchange) string {
	if x.proto == "h1" {
		return x.h1(ex)
	}
	return x.hx(ex)
}

// confReference is the answer a row's cells are held to.
func confReference(ex *confExchange, proto string, cells map[string]confResult) string {
	if ex.want != "" {
		return strings.ReplaceAll(ex.want, "{proto}", map[string]string{"h1": "HTTP/1.1", "h2": "HTTP/2.0", "h3": "HTTP/3.0"}[proto])
	}
	return cells["direct"].got
}

// confAgrees tells a cell's verdict: "yes", "no", or why it is not held to
// the reference.
func confAgrees(ex *confExchange, proto, target string, cells map[string]confResult) (verdict string, fails bool) {
	c, ok := cells[target]
	switch {
	case !ok:
		return "-", false
	case c.got == confReference(ex, proto, cells):
		return "yes", false
	case target == "direct":
		return "(ref)", false
	case target == "nginx" && ex.nginx != "":
		return "differs*", false
	case ex.aborts != "" && strings.HasPrefix(target, "park") && confAborts(c.got, confReference(ex, proto, cells)):
		return "aborted*", false
	}
	return "NO", true
}

// confAborts reports whether got is ref without its last answer, which
// never came: the connection closed where it was due.
func confAborts(got, ref string) bool {
	before, ok := strings.CutSuffix(got, "no answer: connection closed\n")
	if !ok || !strings.HasPrefix(ref, before) {
		return false
	}
	rest := ref[len(before):] // the one answer missing, and what came after it
	return strings.HasPrefix(rest, "HTTP/") && !strings.Contains(rest[1:], "\nHTTP/")
}

func confCompare(t *testing.T, ex *confExchange, proto string, cells map[string]confResult) {
	t.Helper()
	ref := confReference(ex, proto, cells)
	for _, name := range []string{"direct", "park on", "park off", "nginx"} {
		if _, fails := confAgrees(ex, proto, name, cells); fails {
			t.Errorf("%s on %s: %s disagrees\n--- reference (%s):\n%s--- %s:\n%s", ex.name, proto, name,
				map[bool]string{true: "contract", false: "direct"}[ex.want != ""], ref, name, cells[name].got)
		}
	}
	if c, ok := cells["park on"]; ok && proto == "h1" && c.parks == 0 {
		t.Errorf("%s on h1: the connection never parked with parking on", ex.name)
	}
	if c, ok := cells["park off"]; ok && c.parks != 0 {
		t.Errorf("%s on %s: the connection parked with parking off", ex.name, proto)
	}
}

// confTable logs the table: exchange × protocol × target, and the cases
// nginx answers otherwise by design.
func confTable(t *testing.T, targets []*confTarget, results map[string]map[string]confResult) {
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-34s %-5s", "exchange", "proto")
	for _, tg := range targets {
		fmt.Fprintf(&b, " %-9s", tg.name)
	}
	b.WriteString(" parked (on)\n")
	notes := map[string]bool{}
	for _, ex := range confExchanges() {
		for _, proto := range []string{"h1", "h2", "h3"} {
			cells, ok := results[ex.name+"/"+proto]
			if !ok {
				continue
			}
			fmt.Fprintf(&b, "%-34s %-5s", ex.name, proto)
			for _, tg := range targets {
				v, _ := confAgrees(ex, proto, tg.name, cells)
				switch v {
				case "differs*":
					notes["nginx, by design: "+ex.name+": "+ex.nginx] = true
				case "aborted*":
					notes["the edge, by design: "+ex.name+": "+ex.aborts] = true
				}
				fmt.Fprintf(&b, " %-9s", v)
			}
			fmt.Fprintf(&b, " %d\n", cells["park on"].parks)
		}
	}
	for _, n := range slices.Sorted(func(yield func(string) bool) {
		for n := range notes {
			if !yield(n) {
				return
			}
		}
	}) {
		fmt.Fprintf(&b, "* %s\n", n)
	}
	t.Log(b.String())
}

// confIgnored are the response fields a proxy may add, drop or change:
// hop-by-hop ones, and those the edge adds by contract.
var confIgnored = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Transfer-Encoding": true, "Te": true, "Trailer": true,
	"Upgrade": true, "Proxy-Connection": true, "Date": true, "Server": true, "X-Request-Id": true,
	"Alt-Svc": true, "Strict-Transport-Security": true, "Via": true,
}

// confHead writes a status line and the fields that must pass through.
func confHead(out *strings.Builder, status string, h http.Header) {
	out.WriteString(status + "\n")
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range h {
			if !yield(k) {
				return
			}
		}
	}) {
		if confIgnored[k] || strings.HasPrefix(k, "Maat-") {
			continue
		}
		for _, v := range h[k] {
			fmt.Fprintf(out, "%s: %s\n", k, v)
		}
	}
}

// confBodyEnd writes what came of a body: its bytes if it ended cleanly,
// that it was cut otherwise; then the trailers.
func confBodyEnd(out *strings.Builder, body []byte, err error, trailer http.Header) {
	if err != nil {
		out.WriteString("body cut short\n")
		return
	}
	if len(body) <= 96 {
		fmt.Fprintf(out, "body %d bytes %q\n", len(body), body)
	} else {
		fmt.Fprintf(out, "body %d bytes sha256 %x\n", len(body), sha256.Sum256(body))
	}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range trailer {
			if !yield(k) {
				return
			}
		}
	}) {
		fmt.Fprintf(out, "trailer %s: %s\n", k, strings.Join(trailer[k], ", "))
	}
}

// confPoll polls cond until it holds or confWait has passed, and reports
// whether it held.
func confPoll(cond func() bool) bool {
	deadline := time.Now().Add(confWait)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// confErr names a failed read the same way whoever failed it.
func confErr(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return "connection closed"
	case errors.As(err, &ne) && ne.Timeout():
		return "timed out"
	}
	return "failed"
}

// confNginx starts nginx as a TLS reverse proxy (HTTP/1.1 and HTTP/2) in
// front of up's plain server, configured as a site that streams does:
// keep-alive to the upstream, no buffering either way, upgrades passed.
func confNginx(t *testing.T, up *confUpstream) *confTarget {
	t.Helper()
	dir := t.TempDir()
	cert := up.direct.TLS.Certificates[0]
	certFile, keyFile := dir+"/cert.pem", dir+"/key.pem"
	key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), 0o600); err != nil {
		t.Fatal(err)
	}
	// nginx binds a port that was free a moment ago; should another
	// test take it in between, it exits, and another port is tried.
	var errs []string
	for range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		if err := startNginx(t, dir, addr, confNginxConf(dir, up, addr, certFile, keyFile)); err != nil {
			errs = append(errs, err.Error())
			continue
		}
		return &confTarget{name: "nginx", addr: addr, tls: &tls.Config{InsecureSkipVerify: true}}
	}
	t.Fatalf("nginx did not start: %s", strings.Join(errs, "; "))
	return nil
}

// confNginxConf is nginx's configuration: TLS on addr, proxying to up.
func confNginxConf(dir string, up *confUpstream, addr, certFile, keyFile string) string {
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;\n"
	}
	conf := fmt.Sprintf(`%sworker_processes 1;
daemon off;
pid %[2]s/nginx.pid;
error_log %[2]s/error.log warn;
events { worker_connections 1024; }
http {
	access_log off;
	client_body_temp_path %[2]s/body;
	proxy_temp_path %[2]s/proxy;
	fastcgi_temp_path %[2]s/fastcgi;
	uwsgi_temp_path %[2]s/uwsgi;
	scgi_temp_path %[2]s/scgi;
	map $http_upgrade $connection_upgrade { default upgrade; '' ''; }
	upstream up {
		server %[3]s;
		keepalive 16;
	}
	server {
		listen %[4]s ssl http2;
		server_name localhost;
		ssl_certificate %[5]s;
		ssl_certificate_key %[6]s;
		location / {
			proxy_pass http://up;
			proxy_http_version 1.1;
			proxy_set_header Host $host;
			proxy_set_header Upgrade $http_upgrade;
			proxy_set_header Connection $connection_upgrade;
			proxy_buffering off;
			proxy_request_buffering off;
			proxy_read_timeout %[7]d;
		}
	}
}
`, user, dir, strings.TrimPrefix(up.plain.URL, "http://"), addr, certFile, keyFile, int(confHeaderTimeout.Seconds()))
	return conf
}

// startNginx runs nginx with conf until the test ends, and returns once
// it listens on addr, or with why it did not.
func startNginx(t *testing.T, dir, addr, conf string) error {
	if err := os.WriteFile(dir+"/nginx.conf", []byte(conf), 0o600); err != nil {
		return err
	}
	cmd := exec.Command("nginx", "-p", dir, "-c", dir+"/nginx.conf", "-e", dir+"/error.log")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	stop := func() { // nginx's master ends its workers on SIGTERM, not when killed
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(confWait):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	t.Cleanup(stop)
	exited := false
	if confPoll(func() bool {
		select {
		case <-done:
			exited = true
			return true
		default:
		}
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	}) && !exited {
		return nil
	}
	stop()
	log, _ := os.ReadFile(dir + "/error.log")
	return fmt.Errorf("%s %s", stderr.String(), log)
}

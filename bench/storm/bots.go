package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	utls "github.com/refraction-networking/utls"
	"golang.org/x/net/http2"

	"github.com/maatproxy/maat/internal/testattack"
)

// The bots are the kinds a small forge sees in a storm (issue 35), each
// slow and polite per address, from many addresses (127.16+.x.y, one /24
// each), rotating to the next address after -per-addr requests on one
// keep-alive connection, as scrapers behind residential proxies do.
type kind int

const (
	kindCurl    kind = iota // the curl binary itself (its TLS, its HTTP/2)
	kindPython              // "python-requests" over Go's TLS and HTTP/1.1
	kindGo                  // Go's net/http as it comes (Go-http-client/2.0)
	kindParrot              // utls's Chrome 133 ClientHello, Go's HTTP/2, Chrome's header fields
	kindCrawler             // an honest crawler: says who it is (CCBot), Go's TLS
	numKinds
)

var kindNames = [numKinds]string{"curl", "python", "go", "parrot", "crawler"}

var kindTitles = [numKinds]string{
	"curl (curl's own TLS and HTTP/2)",
	"python-requests UA over Go's TLS (HTTP/1.1)",
	"Go net/http (Go-http-client/2.0)",
	"utls Chrome 133 + Go's HTTP/2, Chrome's UA",
	"honest crawler (CCBot UA, Go's TLS)",
}

func (k kind) String() string { return kindNames[k] }

// kindOf reads the kind from a path "KIND/…"; -1 if none.
func kindOf(rest string) kind {
	name, _, _ := strings.Cut(rest, "/")
	for k, n := range kindNames {
		if n == name {
			return kind(k)
		}
	}
	return -1
}

// botAddr is the address of kind k's address number j: its own /24.
func botAddr(k kind, j, perKind int) net.IP {
	g := int(k)*perKind + j
	return net.IPv4(127, byte(16+g/256), byte(g%256), byte(1+g%250))
}

// botTally counts what the bots sent and were answered, per kind.
type botTally struct {
	sent, ok, refused, failed [numKinds]atomic.Int64
	// cut counts the failed requests the run's end cut (in failed too).
	cut [numKinds]atomic.Int64
	// sentPerSecond counts all bots' requests per second of the storm.
	start         time.Time
	sentPerSecond [maxSeconds]atomic.Int64
	// firstErr is each kind's first failure, for the report.
	firstErr [numKinds]atomic.Pointer[string]
}

// add counts one request of kind k, sent at ms milliseconds into the
// storm, and its answer.
func (t *botTally) add(k kind, ms int64, status int, err error) {
	if i := ms / 1000; i >= 0 && i < maxSeconds {
		t.sentPerSecond[i].Add(1)
	}
	t.sent[k].Add(1)
	switch {
	case err != nil || status == 0:
		t.failed[k].Add(1)
		msg := "no answer"
		if err != nil {
			msg = err.Error()
		}
		t.firstErr[k].CompareAndSwap(nil, &msg)
	case status/100 == 2:
		t.ok[k].Add(1)
	default:
		t.refused[k].Add(1)
	}
}

// bot is one scraper of a kind, with its share of the kind's addresses.
type bot struct {
	k        kind
	addrs    []net.IP
	interval time.Duration // between two of its requests
	perAddr  int
	front    *front
	tally    *botTally
	timeout  time.Duration
	curl     string // the curl binary, for kindCurl
	conc     int    // requests in flight at most
	// until is the storm's end: a curl bot is given the URLs due before it.
	until time.Time
	proc  *curlProc // a curl bot's process, from startCurl until run
}

var (
	pythonHeader = http.Header{"User-Agent": {"python-requests/2.32.3"}, "Accept-Encoding": {"gzip, deflate"},
		"Accept": {"*/*"}, "Connection": {"keep-alive"}}
	goHeader      = http.Header{}
	crawlerHeader = http.Header{"User-Agent": {"CCBot/2.0 (https://commoncrawl.org/faq/)"}, "Accept": {"text/html"}}
	parrotHeader  = func() http.Header {
		h := http.Header{}
		for _, f := range testattack.ChromeHeaders {
			if f[0] != "accept-encoding" {
				h.Set(f[0], f[1])
			}
		}
		return h
	}()
)

// run makes the bot's requests until ctx ends: perAddr from each address
// in turn, one every interval whether the last was answered or not (a
// storm does not slow down because the site does), with at most conc in
// flight: past that, the bot waits.
func (b *bot) run(ctx context.Context, seq int) {
	n := 0
	next := time.Now()
	slots := make(chan struct{}, b.conc)
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := 0; ctx.Err() == nil; i++ {
		from := b.addrs[i%len(b.addrs)]
		if b.k == kindCurl {
			b.runCurl(ctx, seq)
			return
		}
		rt, closeIdle := b.transport(from)
		var addrWG sync.WaitGroup // this address's requests
		for j := 0; j < b.perAddr && ctx.Err() == nil; j++ {
			if !sleepUntil(ctx, next) {
				break
			}
			next = next.Add(b.interval)
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
			}
			if ctx.Err() != nil {
				break
			}
			if now := time.Now(); next.Before(now) {
				next = now // late: no burst to catch up
			}
			n++
			// The path carries when it was sent, in milliseconds into the
			// storm, for the upstream to count it in that second.
			at := time.Since(b.tally.start).Milliseconds()
			url := fmt.Sprintf("https://%s/b/%s/%d/%d/%d", b.front.host, b.k, seq, n, at)
			wg.Add(1)
			addrWG.Add(1)
			go func() {
				defer wg.Done()
				defer addrWG.Done()
				defer func() { <-slots }()
				// Every request sent counts, even one the end of the run
				// cuts: the upstream may have seen it.
				status, err := b.get(ctx, rt, url)
				b.tally.add(b.k, at, status, err)
				if err != nil && ctx.Err() != nil {
					b.tally.cut[b.k].Add(1)
				}
			}()
		}
		// The next address's transport; this one's connection closes
		// once its requests are answered. The bot does not wait for
		// them: waiting (as it once did, by taking every slot) sent a
		// slow front fewer requests than a fast one.
		wg.Add(1)
		go func() {
			defer wg.Done()
			addrWG.Wait()
			closeIdle()
		}()
	}
}

// sleepUntil waits until t; false if ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (b *bot) get(ctx context.Context, rt http.RoundTripper, url string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	switch b.k {
	case kindPython:
		req.Header = pythonHeader.Clone()
	case kindGo:
		req.Header = goHeader.Clone()
	case kindParrot:
		req.Header = parrotHeader.Clone()
	case kindCrawler:
		req.Header = crawlerHeader.Clone()
	}
	res, err := rt.RoundTrip(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, maxBody))
	res.Body.Close()
	return res.StatusCode, nil
}

// transport is the bot's client from one address, kept alive for its
// requests from there.
func (b *bot) transport(from net.IP) (http.RoundTripper, func()) {
	d := &net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: from}}
	addr := b.front.addr
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	tc := &tls.Config{InsecureSkipVerify: true, ServerName: b.front.host} // loopback
	switch b.k {
	case kindParrot:
		// x/net's http2.Transport, as scrapers use it: net/http's own
		// wants a *tls.Conn, which a utls connection is not.
		//lint:ignore SA1019 a utls connection is not a *tls.Conn (above)
		t := &http2.Transport{DialTLSContext: func(ctx context.Context, _, _ string, _ *tls.Config) (net.Conn, error) {
			raw, err := dial(ctx, "", "")
			if err != nil {
				return nil, err
			}
			c := utls.UClient(raw, &utls.Config{ServerName: b.front.host, InsecureSkipVerify: true}, utls.HelloChrome_133)
			if err := c.HandshakeContext(ctx); err != nil {
				raw.Close()
				return nil, err
			}
			return c, nil
		}}
		//lint:ignore SA1019 t is x/net's (above)
		return t, t.CloseIdleConnections
	case kindPython:
		tc.NextProtos = []string{"http/1.1"}
		t := &http.Transport{DialContext: dial, TLSClientConfig: tc, MaxIdleConnsPerHost: 1,
			TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}
		return t, t.CloseIdleConnections
	default:
		t := &http.Transport{DialContext: dial, TLSClientConfig: tc, ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 1}
		return t, t.CloseIdleConnections
	}
}

// A curl bot is one curl process for the whole storm, started before the
// measured phases (startCurl) and waiting for its configuration on its
// standard input: the URLs of all its addresses, perAddr from each in
// turn (--next between two addresses: a connection from each), one
// transfer at a time at the bot's pace (--rate). One process per address,
// as the bots once had, started ~40 curl processes a second during the
// storm, with up to ~450 running: their CPU (~40 s over a 20 s storm)
// took the two cores from the front and the people (run queue 40–100,
// no idle time), starving the people (p50 10 s) whatever the front did.
// One transfer at a time: an answer slower than the interval delays the
// bot's next request (curl has no --rate for parallel transfers).
type curlProc struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out io.ReadCloser
}

// startCurl starts the bot's curl process, which waits for its
// configuration until run (runCurl) or abandonCurl.
func (b *bot) startCurl() error {
	cmd := exec.Command(b.curl, "--config", "-")
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	b.proc = &curlProc{cmd: cmd, in: in, out: out}
	return nil
}

// abandonCurl ends the bot's curl process when the bot never ran: an
// empty configuration, on which curl ends at once.
func (b *bot) abandonCurl() {
	if b.proc == nil {
		return
	}
	b.proc.in.Close()
	_, _ = io.Copy(io.Discard, b.proc.out)
	_ = b.proc.cmd.Wait()
	b.proc = nil
}

// curlQuote is s as a quoted string of curl's configuration.
func curlQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// runCurl hands the bot's curl process its URLs, those due before the
// storm's end (b.until), and tallies the statuses it prints (000 for a
// failed transfer). The process is not cut when ctx ends, so that every
// URL it was given is counted: it ends by itself, within its URLs'
// intervals and time limits.
func (b *bot) runCurl(ctx context.Context, seq int) {
	p := b.proc
	if p == nil {
		return
	}
	b.proc = nil
	host, port, _ := net.SplitHostPort(b.front.addr)
	perMin := max(1, int(time.Minute/b.interval))
	every := time.Minute / time.Duration(perMin)
	t0 := time.Since(b.tally.start)
	var due []int64
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "--silent\n--rate %d/m\n", perMin)
	for j := 0; ctx.Err() == nil; j++ {
		at := t0 + time.Duration(j)*every
		if !b.until.IsZero() && b.tally.start.Add(at).After(b.until) {
			break
		}
		if j%b.perAddr == 0 {
			if j > 0 {
				cfg.WriteString("--next\n")
			}
			from := b.addrs[(j/b.perAddr)%len(b.addrs)]
			fmt.Fprintf(&cfg, "--insecure\n--no-sessionid\n--http2\n--interface %s\n--resolve %s\n--max-time %d\n--write-out \"%%{http_code}\\n\"\n",
				from, curlQuote(b.front.host+":"+port+":"+host), int(b.timeout/time.Second))
		}
		due = append(due, at.Milliseconds())
		fmt.Fprintf(&cfg, "--url %s\n--output /dev/null\n", curlQuote(fmt.Sprintf("https://%s:%s/b/curl/%d/%d/%d", b.front.host, port, seq, j+1, due[j])))
	}
	if len(due) == 0 {
		p.in.Close()
		_, _ = io.Copy(io.Discard, p.out)
		_ = p.cmd.Wait()
		return
	}
	// Past its URLs' intervals and time limits, the process is killed.
	limit := time.AfterFunc(time.Duration(len(due))*every+b.timeout+time.Minute, func() { _ = p.cmd.Process.Kill() })
	defer limit.Stop()
	go func() {
		_, _ = io.WriteString(p.in, cfg.String())
		p.in.Close()
	}()
	sc := bufio.NewScanner(p.out)
	got := 0
	for sc.Scan() {
		status, _ := strconv.Atoi(strings.TrimSpace(sc.Text()))
		if got < len(due) {
			b.tally.add(kindCurl, due[got], status, nil)
		}
		got++
	}
	_ = p.cmd.Wait()
	for ; got < len(due); got++ { // killed: the rest count as sent and failed
		b.tally.add(kindCurl, due[got], 0, nil)
		b.tally.cut[kindCurl].Add(1)
	}
}

// firstError is kind k's first failure, "" if none.
func (t *botTally) firstError(k kind) string {
	if p := t.firstErr[k].Load(); p != nil {
		return *p
	}
	return ""
}

package testattack

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	utls "github.com/refraction-networking/utls"
	"golang.org/x/net/http2"
)

// The parrot case (issue 33, item 4): a client whose TLS is a browser's
// (utls's Chrome parrot) but whose HTTP/2 is Go's must not pass for that
// browser.

// decisionFields are the fingerprint log fields that carry the edge's
// judgement of a client; a parrot whose fields all equal a real
// Chromium's passed for one.
var decisionFields = []string{"client_family", "rules", "weight", "action", "challenge"}

// gateParrot compares parrots with a real Chromium (GateTarget.Chromium;
// else with the Chrome emulation: utls Chrome 133 with Chrome's HTTP/2):
// the parrots copy its User-Agent and its header fields in its order and
// speak HTTP/2 either through Go's http2.Transport (Go's SETTINGS, window
// and pseudo-header order) or with Go's SETTINGS and window but Chrome's
// pseudo-header order. Each got through when it is offered the wait, and
// when its log line reads as the browser's.
func gateParrot(ctx context.Context, t GateTarget, out *GateOutcome) error {
	t.Upstream.Record(1000)
	ref, err := t.reference(ctx, out)
	if err != nil {
		return err
	}
	chrome := utls.HelloChrome_133
	for i, pr := range []struct {
		name string
		send func(ctx context.Context, target string, k int) (Answer, error)
	}{
		{"utls Chrome 133 through Go's http2.Transport", func(ctx context.Context, target string, k int) (Answer, error) {
			return t.viaGoTransport(ctx, target, source(blockGateParrot, k), &chrome, ref.header)
		}},
		{"utls Chrome 133 with Go's SETTINGS and window, Chrome's pseudo-header order", func(ctx context.Context, target string, k int) (Answer, error) {
			prof := H2Profile{Settings: GoH2.Settings, Window: GoH2.Window, Pseudo: ChromeH2.Pseudo}
			return t.Send(ctx, GateRequest{Proto: "h2", Target: target, From: source(blockGateParrot, k), Parrot: &chrome, H2: &prof, Header: ref.header})
		}},
	} {
		wait := out.Attack(pr.name+": offered the wait", "a proof of work, no wait")
		same := out.Attack(pr.name+": its log line reads as "+ref.name+"'s ("+strings.Join(decisionFields, ", ")+")", "differs")
		for k := range 2 {
			target := fmt.Sprintf("/gate/chrome/parrot-%d-%d", i, k)
			a, err := pr.send(ctx, target, 10*i+k)
			if err != nil {
				wait.Add("h2", gateErrKind(err), false)
				continue
			}
			p := parseChallenge(a.Body)
			wait.Add("h2", p.describe(a.Status), p.wait != "")
			l, err := fpLine(ctx, t.FPLog, target)
			if err != nil {
				same.Note("%v", err)
				continue
			}
			diff := differing(ref.line, l)
			answer := "identical"
			if len(diff) > 0 {
				answer = "differs in " + strings.Join(diff, ", ")
			}
			same.Add("h2", answer, len(diff) == 0)
			if k == 0 {
				same.Note("its h2fp %s, hfp %s; %s's h2fp %s", l.Str("h2fp"), l.Str("hfp"), ref.name, ref.line.Str("h2fp"))
			}
		}
	}
	return nil
}

// differing lists the decision fields in which a and b differ.
func differing(a, b FPLine) []string {
	var out []string
	for _, f := range decisionFields {
		if a.Str(f) != b.Str(f) {
			out = append(out, f)
		}
	}
	return out
}

// reference is the browser a parrot imitates: its log line, and its
// header fields in its order.
type reference struct {
	name   string
	line   FPLine
	header [][2]string
}

// reference visits the site with a real Chromium when there is one, else
// with the Chrome emulation; an honest row says whether it was offered the
// wait.
func (t GateTarget) reference(ctx context.Context, out *GateOutcome) (reference, error) {
	if t.Chromium == "" {
		row := out.Honest("the Chrome emulation (no Chromium here) is offered the wait", "a proof of work and the wait")
		v := chromeVisitor(t.Target, blockGateParrot, 99)
		const target = "/gate/chrome/emulated"
		a, err := v.get(ctx, target)
		if err != nil {
			row.Add("h2", gateErrKind(err), true)
			return reference{}, fmt.Errorf("the Chrome emulation: %w", err)
		}
		p := parseChallenge(a.Body)
		row.Add("h2", p.describe(a.Status), p.wait == "")
		l, err := fpLine(ctx, t.FPLog, target)
		return reference{name: "the Chrome emulation", line: l, header: ChromeHeaders}, err
	}
	version := chromiumMajor(ctx, t.Chromium)
	name := "Chromium " + strconv.Itoa(version)
	row := out.Honest(name+" (headless, its User-Agent without the headless tell, no JavaScript) is offered the wait", "a proof of work and the wait")
	ua := fmt.Sprintf("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/%d.0.0.0 Safari/537.36", version)
	const target = "/gate/chrome/real"
	page, sent, err := t.visitChromium(ctx, ua, target)
	if err != nil {
		row.Add("h2", "Chromium failed", true)
		return reference{}, fmt.Errorf("chromium: %w", err)
	}
	p := parseChallenge(page)
	row.Add("h2", p.describe(403)+" (the page)", p.wait == "")
	l, err := fpLine(ctx, t.FPLog, target)
	if err != nil {
		return reference{}, err
	}
	if l.Str("proto") != "HTTP/2.0" {
		row.Note("Chromium spoke %s", l.Str("proto"))
	}
	// Its fields, in the order the edge saw them, with the values it sent.
	var header [][2]string
	for name := range strings.SplitSeq(l.Str("hfp_r"), ",") {
		if name == "" || strings.HasPrefix(name, ":") {
			continue
		}
		v, ok := sent[name]
		if name == "accept-encoding" {
			v, ok = "gzip, deflate", true // what the gate attacks decode
		}
		if ok {
			header = append(header, [2]string{name, v})
		}
	}
	if len(header) == 0 {
		return reference{}, fmt.Errorf("no header fields of Chromium's: hfp_r %q, %d sent", l.Str("hfp_r"), len(sent))
	}
	return reference{name: name, line: l, header: header}, nil
}

// chromiumMajor is the major version the Chromium at path reports, or 156
// (Debian 12's in December 2026) when it says none.
func chromiumMajor(ctx context.Context, path string) int {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	b, _ := exec.CommandContext(ctx, path, "--version").Output()
	if m := regexp.MustCompile(`(?:Chromium|Chrome) (\d+)\.`).FindSubmatch(b); m != nil {
		if v, err := strconv.Atoi(string(m[1])); err == nil {
			return v
		}
	}
	return 156
}

// visitChromium navigates a headless Chromium, with User-Agent ua and
// JavaScript off, to target on the site, and returns the page and the
// header fields it sent for it (lower-case names).
func (t GateTarget) visitChromium(ctx context.Context, ua, target string) (string, map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	dir, err := os.MkdirTemp("", "maat-gate-chromium-")
	if err != nil {
		return "", nil, err
	}
	defer os.RemoveAll(dir)
	_, port, err := net.SplitHostPort(t.HTTPS)
	if err != nil {
		return "", nil, err
	}
	host, _, _ := net.SplitHostPort(t.HTTPS)
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(t.Chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-quic", true), chromedp.Flag("ignore-certificate-errors", true),
		chromedp.Flag("host-resolver-rules", "MAP "+t.Host+" "+host),
		chromedp.UserDataDir(dir), chromedp.UserAgent(ua))
	defer cancelAlloc()
	var mu sync.Mutex
	urls := map[network.RequestID]string{}
	headers := map[network.RequestID]network.Headers{}
	listen := chromedp.WithListener(func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			urls[e.RequestID] = e.Request.URL
		case *network.EventRequestWillBeSentExtraInfo:
			headers[e.RequestID] = e.Headers
		}
	})
	bctx, cancelB := chromedp.NewContext(alloc, listen)
	defer cancelB()
	noJS := chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
		return err
	})
	url := "https://" + t.Host + ":" + port + target
	if err := chromedp.Do(bctx, noJS, chromedp.Navigate(url)); err != nil {
		return "", nil, err
	}
	// Read at once: without JavaScript the page refreshes itself when its
	// wait (GateWait) is over.
	page, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
	if err != nil {
		return "", nil, err
	}
	mu.Lock()
	defer mu.Unlock()
	sent := map[string]string{}
	for id, u := range urls {
		if u != url {
			continue
		}
		for k, v := range headers[id] {
			sent[strings.ToLower(k)] = fmt.Sprint(v)
		}
	}
	return page, sent, nil
}

// viaGoTransport sends a GET for target through x/net's http2.Transport
// over a connection that opens with parrot's ClientHello, from src, with
// header (in the order Go's transport chooses).
func (t Target) viaGoTransport(ctx context.Context, target string, src net.IP, parrot *utls.ClientHelloID, header [][2]string) (Answer, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	// x/net's: net/http's own HTTP/2 client reads ALPN from a *tls.Conn
	// only, which a utls connection is not.
	//lint:ignore SA1019 a utls connection is not a *tls.Conn (above)
	tr := &http2.Transport{DialTLSContext: func(ctx context.Context, _, _ string, _ *tls.Config) (net.Conn, error) {
		c, _, err := t.dialGate(ctx, GateRequest{From: src, Parrot: parrot}, "h2")
		return c, err
	}}
	//lint:ignore SA1019 tr is x/net's (above)
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+t.HTTPS+target, nil)
	if err != nil {
		return Answer{}, err
	}
	req.Host = t.Host
	for _, f := range header {
		if !strings.EqualFold(f[0], "host") && !slices.Contains([]string{"connection", "te"}, strings.ToLower(f[0])) {
			req.Header.Add(f[0], f[1])
		}
	}
	//lint:ignore SA1019 tr is x/net's (above)
	res, err := tr.RoundTrip(req)
	if err != nil {
		return Answer{}, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxBody))
	if err != nil {
		return Answer{}, err
	}
	a := Answer{Status: res.StatusCode, Header: res.Header}
	a.Body, err = decoded(res.Header, body)
	return a, err
}

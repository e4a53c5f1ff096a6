package edge

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/maatproxy/maat/internal/testcapture"
	"github.com/maatproxy/maat/internal/testenv"
	utls "github.com/refraction-networking/utls"
	"golang.org/x/net/http2"
)

// goPreface is the HTTP/2 preface of Go's clients (net/http's bundled
// HTTP/2 and x/net/http2; httpfp/testdata/clients.jsonl).
var goPreface = h2Preface{[]http2.Setting{{ID: 2, Val: 0}, {ID: 4, Val: 4194304}, {ID: 5, Val: 16384}, {ID: 6, Val: 10485760}}, 1073741824}

// startParrotEdge runs the default policy with the signal
// tls_http_mismatch weighing weight, the wait of 1s offered below
// maxWeight (0: the policy's bound), and a fingerprint log.
func startParrotEdge(t *testing.T, weight, maxWeight int) (*testEdge, string) {
	t.Helper()
	dir := t.TempDir()
	pol, fp := filepath.Join(dir, "policy.yaml"), filepath.Join(dir, "fp.jsonl")
	src := fmt.Sprintf("bots:\n  - import: (builtin)/default.yaml\nsignals: {tls_http_mismatch: %d}\n", weight)
	if err := os.WriteFile(pol, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	up := echoUpstream(t, "site")
	e := startEdge(t, fmt.Sprintf("log: {fingerprints: %s}\npolicy: %s\nchallenge: {wait: {duration: 1s, max_weight: %d}}\n", fp, pol, maxWeight)+
		"sites: [{hosts: [localhost], upstream: "+up.URL+"}]\n")
	return e, fp
}

// offersWait reports whether a challenge page offers the no-JS wait; it
// fails the test unless body is a challenge page.
func offersWait(t *testing.T, res *http.Response, body string) bool {
	t.Helper()
	if res.StatusCode != http.StatusForbidden || res.Header.Get("Maat-Mitigated") != "challenge" {
		t.Fatalf("%d %q, want a challenge", res.StatusCode, res.Header.Get("Maat-Mitigated"))
	}
	p := parsePage(t, body)
	wait := p.wait != "" || noscriptRefresh.MatchString(body)
	if !wait && !strings.Contains(body, "needs JavaScript") {
		t.Errorf("without the wait, the page does not say JavaScript is needed")
	}
	return wait
}

// TestParrotH2 is issue 33's parrot: a utls Chrome ClientHello under Go's
// HTTP/2 (its SETTINGS and WINDOW_UPDATE), with Chrome's pseudo-header
// order and Chrome's headers, and the same under x/net's http2.Transport as
// it is (Go's pseudo-header order), and a utls Firefox under it. Each fires
// tls_http_mismatch, which the fingerprint log names, and is never offered
// the no-JS wait, even when the signal weighs nothing (a lie, like
// fake_crawler). Chrome's own HTTP/2 over the same ClientHello is offered
// the wait and fires nothing; only the HTTP/2 layer tells their log lines
// apart.
func TestParrotH2(t *testing.T) {
	t.Parallel()
	firefoxHeaders := [][2]string{
		{"User-Agent", "Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0"},
		{"Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"},
		{"Accept-Language", "en-US,en;q=0.5"}, {"Upgrade-Insecure-Requests", "1"},
		{"Sec-Fetch-Dest", "document"}, {"Sec-Fetch-Mode", "navigate"}, {"Sec-Fetch-Site", "none"}, {"Sec-Fetch-User", "?1"},
	}
	for _, weight := range []int{0, 30} {
		t.Run(fmt.Sprintf("weight %d", weight), func(t *testing.T) {
			t.Parallel()
			e, fp := startParrotEdge(t, weight, 0)
			type result struct {
				wait bool
				line fpLine
			}
			run := func(name string, get func(path string) (*http.Response, string)) result {
				path := "/parrot/" + strings.ReplaceAll(name, " ", "-")
				res, body := get(path)
				return result{offersWait(t, res, body), waitLine(t, fp, path)}
			}
			chrome := run("chrome", func(p string) (*http.Response, string) { return chromeVisitor(t, e).get(e, p) })
			parrots := map[string]result{
				"go settings chrome order": run("go settings chrome order", func(p string) (*http.Response, string) {
					return h2RoundTrip(t, e, utls.HelloChrome_133, goPreface, p, chromeHeaders, "")
				}),
				"chrome over x/net": run("chrome over x/net", func(p string) (*http.Response, string) {
					return (&visitor{t: t, header: chromeHeaders, c: utlsClient(t, e, utls.HelloChrome_133)}).get(e, p)
				}),
				"firefox over x/net": run("firefox over x/net", func(p string) (*http.Response, string) {
					return (&visitor{t: t, header: firefoxHeaders, c: utlsClient(t, e, utls.HelloFirefox_120)}).get(e, p)
				}),
			}
			if !chrome.wait || slices.Contains(chrome.line.rules(), "tls_http_mismatch") || chrome.line.str("client_family") != "chrome" {
				t.Errorf("Chrome: wait %v, family %q, rules %v; want the wait and no tls_http_mismatch",
					chrome.wait, chrome.line.str("client_family"), chrome.line.rules())
			}
			for name, p := range parrots {
				rules := p.line.rules()
				if p.wait || !slices.Contains(rules, "tls_http_mismatch") {
					t.Errorf("%s: wait %v, rules %v; want no wait and tls_http_mismatch", name, p.wait, rules)
				}
				if w, cw := p.line["weight"].(float64), chrome.line["weight"].(float64); w < cw+float64(weight) {
					t.Errorf("%s: weight %v, want at least Chrome's %v + %d", name, w, cw, weight)
				}
			}
			// Same ClientHello, same headers and pseudo-header order: the
			// HTTP/2 preface alone tells the parrot from Chrome.
			p := parrots["go settings chrome order"].line
			if p.str("client_family") != "chrome" || p.str("user_agent") != chrome.line.str("user_agent") ||
				p.str("hfp") != chrome.line.str("hfp") || !strings.HasSuffix(p.str("h2fp"), "|m,a,s,p") ||
				p.str("h2fp") == chrome.line.str("h2fp") || slices.Equal(p.rules(), chrome.line.rules()) {
				t.Errorf("the parrot's line does not differ from Chrome's by its HTTP/2 alone:\n%v\n%v", p, chrome.line)
			}
		})
	}
}

// TestParrotRealClientsHonest: real Chromium (HTTP/2 and, with
// --disable-http2, HTTP/1.1) and curl (--http2, --http1.1, claiming
// Chrome or not) never fire tls_http_mismatch, and Chromium over HTTP/2
// without JavaScript reaches the site by the wait.
func TestParrotRealClientsHonest(t *testing.T) {
	t.Parallel()
	e, fp := startParrotEdge(t, 30, 0)
	base := "https://localhost:" + port(e.Addrs().HTTPS)
	check := func(t *testing.T, path, family string) {
		t.Helper()
		for _, l := range fpLines(t, fp) {
			if l.str("path") != path {
				continue
			}
			if slices.Contains(l.rules(), "tls_http_mismatch") || l.str("client_family") != family {
				t.Errorf("%s: family %q rules %v; want %s and no tls_http_mismatch", path, l.str("client_family"), l.rules(), family)
			}
		}
	}
	t.Run("chromium h2 without JavaScript", func(t *testing.T) {
		t.Parallel()
		ctx := newChromium(t, chromiumUA)
		if err := chromedp.Do(ctx, noJS, chromedp.Navigate(base+"/real/chromium-h2")); err != nil {
			t.Fatal(err)
		}
		pageText(t, ctx, "Path=/real/chromium-h2")
		if l := waitLine(t, fp, "/real/chromium-h2"); l.str("proto") != "HTTP/2.0" {
			t.Errorf("Chromium spoke %s", l.str("proto"))
		}
		check(t, "/real/chromium-h2", "chrome")
	})
	t.Run("chromium h1", func(t *testing.T) {
		t.Parallel()
		ctx := newChromium(t, chromiumUA, chromedp.Flag("disable-http2", true))
		if err := chromedp.Do(ctx, chromedp.Navigate(base+"/real/chromium-h1")); err != nil {
			t.Fatal(err)
		}
		pageText(t, ctx, "Path=/real/chromium-h1")
		if l := waitLine(t, fp, "/real/chromium-h1"); l.str("proto") != "HTTP/1.1" {
			t.Errorf("Chromium spoke %s", l.str("proto"))
		}
		check(t, "/real/chromium-h1", "chrome")
	})
	curl := testenv.NeedCommand(t, "curl")
	for _, flag := range []string{"--http2", "--http1.1"} {
		for _, ua := range []string{"", chromiumUA} {
			path := "/real/curl" + flag + map[bool]string{true: "-as-chrome", false: ""}[ua != ""]
			args := []string{"-sk", "-o", "/dev/null", "--max-time", "20", flag, base + path}
			if ua != "" {
				args = append(args, "-H", "User-Agent: "+ua)
			}
			if out, err := exec.Command(curl, args...).CombinedOutput(); err != nil {
				t.Fatalf("curl %v: %v\n%s", args, err, out)
			}
			waitLine(t, fp, path)
			check(t, path, "curl")
		}
	}
}

// TestParrotH1: a parrot of Chromium over HTTP/1.1 replays the ClientHello
// of the installed Chromium with --disable-http2 (so its JA4 is the known
// Chromium's) and speaks Go's HTTP/1.1: Host, User-Agent, then the headers
// sorted. The header-order check that came before looked only for Host
// first, which Go's order passes; tls_http_mismatch also wants Connection
// second, as Chromium always sends it, and keeps the wait from the parrot
// (even at weight 0). The same ClientHello with Chromium's header order
// fires nothing.
func TestParrotH1(t *testing.T) {
	t.Parallel()
	testenv.NeedCommand(t, "chromium")
	s, err := testcapture.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, _ := testcapture.Lookup("chromium-h1")
	recs, err := testcapture.Run(context.Background(), s, c)
	if err != nil {
		t.Fatal(err)
	}
	hello := firstRecord(t, recs[0].Hello)
	// Chromium over HTTP/1.1 weighs 20 (a browser, proto_mismatch): the
	// wait is offered up to 50 here, so that only the lie keeps it.
	e, fp := startParrotEdge(t, 0, 50)
	// A utls spec holds the state of one handshake: a new one each time.
	dial := func(ctx context.Context) (*utls.UConn, error) {
		spec, err := (&utls.Fingerprinter{AllowBluntMimicry: true}).FingerprintClientHello(hello)
		if err != nil {
			return nil, fmt.Errorf("utls cannot replay Chromium's hello: %w", err)
		}
		var d net.Dialer
		raw, err := d.DialContext(ctx, "tcp", e.Addrs().HTTPS)
		if err != nil {
			return nil, err
		}
		uc := utls.UClient(raw, &utls.Config{ServerName: "localhost", InsecureSkipVerify: true}, utls.HelloCustom)
		if err := uc.ApplyPreset(spec); err != nil {
			raw.Close()
			return nil, err
		}
		if err := uc.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, err
		}
		return uc, nil
	}

	// Go's HTTP/1.1 over the replayed hello.
	tr := &http.Transport{DialTLSContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) }}
	defer tr.CloseIdleConnections()
	goParrot := &visitor{t: t, header: chromeHeaders, c: &http.Client{Transport: tr, Timeout: 20 * time.Second}}
	res, body := goParrot.get(e, "/h1/go-order")
	if res.Proto != "HTTP/1.1" {
		t.Fatalf("the parrot spoke %s", res.Proto)
	}
	parrotWait := offersWait(t, res, body)
	parrot := waitLine(t, fp, "/h1/go-order")

	// Chromium's own order over the same hello.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	uc, err := dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	var req strings.Builder
	req.WriteString("GET /h1/chromium-order HTTP/1.1\r\nHost: localhost:" + port(e.Addrs().HTTPS) + "\r\nConnection: keep-alive\r\n")
	for _, h := range chromeHeaders {
		req.WriteString(h[0] + ": " + h[1] + "\r\n")
	}
	req.WriteString("\r\n")
	if _, err := io.WriteString(uc, req.String()); err != nil {
		t.Fatal(err)
	}
	res, err = http.ReadResponse(bufio.NewReader(uc), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	honestWait := offersWait(t, res, decodeBody(t, res, b))
	honest := waitLine(t, fp, "/h1/chromium-order")

	for _, l := range []fpLine{parrot, honest} {
		if l.str("ja4") != recs[0].JA4 || l.str("client_family") != "chrome" || !slices.Contains(l.rules(), "proto_mismatch") {
			t.Errorf("%s: ja4 %s family %q rules %v; want Chromium's %s, chrome and proto_mismatch",
				l.str("path"), l.str("ja4"), l.str("client_family"), l.rules(), recs[0].JA4)
		}
	}
	if parrotWait || !slices.Contains(parrot.rules(), "tls_http_mismatch") {
		t.Errorf("Go's order: wait %v rules %v; want no wait and tls_http_mismatch", parrotWait, parrot.rules())
	}
	if !honestWait || slices.Contains(honest.rules(), "tls_http_mismatch") {
		t.Errorf("Chromium's order: wait %v rules %v; want the wait and no tls_http_mismatch", honestWait, honest.rules())
	}
}

// firstRecord returns the first TLS record of b (a ClientHello fits one).
func firstRecord(t *testing.T, b []byte) []byte {
	t.Helper()
	if len(b) < 5 || b[0] != 0x16 {
		t.Fatalf("not a TLS handshake record: % x", b[:min(len(b), 5)])
	}
	n := 5 + (int(b[3])<<8 | int(b[4]))
	if len(b) < n {
		t.Fatalf("a record of %d bytes, %d captured", n, len(b))
	}
	return b[:n]
}

package edge

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"html"
	"io"
	"math/bits"
	"net"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	utls "github.com/refraction-networking/utls"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/maatproxy/maat/internal/testclient"
)

// chromeHeaders are the headers Chrome sends on a navigation, in its order.
var chromeHeaders = [][2]string{
	{"Sec-Ch-Ua", `"Not(A:Brand";v="99", "Google Chrome";v="133", "Chromium";v="133"`},
	{"Sec-Ch-Ua-Mobile", "?0"},
	{"Sec-Ch-Ua-Platform", `"Windows"`},
	{"Upgrade-Insecure-Requests", "1"},
	{"User-Agent", "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/133.0.0.0 Safari/537.36"},
	{"Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8"},
	{"Sec-Fetch-Site", "none"},
	{"Sec-Fetch-Mode", "navigate"},
	{"Sec-Fetch-User", "?1"},
	{"Sec-Fetch-Dest", "document"},
	{"Accept-Encoding", "gzip, deflate"},
	{"Accept-Language", "en-US,en;q=0.9"},
}

// visitor is one client of the challenge tests: a TLS stack, the headers
// it sends and the cookies it got.
type visitor struct {
	t      *testing.T
	c      *http.Client // nil: Chrome's own HTTP/2 over utls (chromeRoundTrip)
	header [][2]string
	cookie string
}

// chromeVisitor looks like Chrome down to the wire: utls's Chrome 133
// ClientHello, then Chrome's HTTP/2 SETTINGS, window and pseudo-header
// order (net/http's HTTP/2 client would give itself away by its own).
func chromeVisitor(t *testing.T, e *testEdge) *visitor {
	return &visitor{t: t, header: chromeHeaders}
}

// goVisitor is Go's own TLS stack claiming to be Chrome: a lie the policy
// sees (ua_tls_mismatch).
func goVisitor(t *testing.T, e *testEdge) *visitor {
	return &visitor{t: t, header: chromeHeaders, c: e.client(t, "h2")}
}

// get fetches path and returns the response and its (decompressed) body.
func (v *visitor) get(e *testEdge, path string) (*http.Response, string) {
	v.t.Helper()
	if v.c == nil {
		res, body := chromeRoundTrip(v.t, e, path, v.header, v.cookie)
		for _, c := range res.Cookies() {
			if c.Name == "__Host-maat-pass" {
				v.cookie = c.Name + "=" + c.Value
			}
		}
		return res, body
	}
	req, _ := http.NewRequest("GET", "https://localhost:"+port(e.Addrs().HTTPS)+path, nil)
	req.Host = "localhost"
	for _, h := range v.header {
		if h[0] != "Accept-Encoding" { // let the client decompress
			req.Header.Set(h[0], h[1])
		}
	}
	if v.cookie != "" {
		req.Header.Set("Cookie", v.cookie)
	}
	res, err := v.c.Do(req)
	if err != nil {
		v.t.Fatalf("GET %s: %v", path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	for _, c := range res.Cookies() {
		if c.Name == "__Host-maat-pass" {
			v.cookie = c.Name + "=" + c.Value
		}
	}
	return res, string(b)
}

var (
	dataAttr    = regexp.MustCompile(`data-(seed|k|bits|pass|wait)="([^"]*)"`)
	refreshAttr = regexp.MustCompile(`http-equiv="refresh" content="\d+; url=([^"]*)"`)
	hrefAttr    = regexp.MustCompile(`href="(/\.maat/pass[^"]*)"`)
)

// challengePage is what a challenge page asks and offers.
type challengePage struct {
	seed       string
	k, bits    int
	pass, wait string   // data-pass (add &n=…), data-wait ("" when no wait is offered)
	urls       []string // every /.maat/pass URL on the page
}

func parsePage(t *testing.T, body string) challengePage {
	t.Helper()
	var p challengePage
	for _, m := range dataAttr.FindAllStringSubmatch(body, -1) {
		v := html.UnescapeString(m[2])
		switch m[1] {
		case "seed":
			p.seed = v
		case "k":
			p.k, _ = strconv.Atoi(v)
		case "bits":
			p.bits, _ = strconv.Atoi(v)
		case "pass":
			p.pass = v
		case "wait":
			p.wait = v
		}
		if m[1] == "pass" || m[1] == "wait" {
			p.urls = append(p.urls, v)
		}
	}
	for _, m := range refreshAttr.FindAllStringSubmatch(body, -1) {
		p.urls = append(p.urls, html.UnescapeString(m[1]))
	}
	for _, m := range hrefAttr.FindAllStringSubmatch(body, -1) {
		p.urls = append(p.urls, html.UnescapeString(m[1]))
	}
	return p
}

// solve finds the nonces of a page's proof of work: nonce i carries i in
// its top byte, and SHA-256(seed ‖ nonce) has bits leading zero bits.
func (p challengePage) solve() string {
	var out []string
	for i := range p.k {
		for n := uint64(i) << 56; ; n++ {
			var msg [72]byte
			copy(msg[:64], p.seed)
			binary.BigEndian.PutUint64(msg[64:], n)
			sum := sha256.Sum256(msg[:])
			if lz := bits.LeadingZeros64(binary.BigEndian.Uint64(sum[:8])); lz >= p.bits {
				out = append(out, strconv.FormatUint(n, 16))
				break
			}
		}
	}
	return strings.Join(out, ",")
}

func startChallengeEdge(t *testing.T, extra string) (*testEdge, string) {
	t.Helper()
	up := echoUpstream(t, "site")
	fp := t.TempDir() + "/fp.jsonl"
	e := startEdge(t, "log: {fingerprints: "+fp+"}\nchallenge: {wait: {duration: 1s}}\n"+extra+
		"sites: [{hosts: [localhost], upstream: "+up.URL+"}]\n")
	return e, fp
}

// TestWaitOnlyForHonestBrowsers: the no-JS wait is offered to a browser
// whose TLS stack agrees with its User-Agent, and not to a client that lies
// about it, whose page says JavaScript is needed. Both pages answer 403
// with Maat-Mitigated: challenge.
func TestWaitOnlyForHonestBrowsers(t *testing.T) {
	t.Parallel()
	e, _ := startChallengeEdge(t, "")
	for _, tt := range []struct {
		name     string
		v        *visitor
		wantWait bool
	}{
		{"utls chrome", chromeVisitor(t, e), true},
		{"go claiming chrome", goVisitor(t, e), false},
	} {
		res, body := tt.v.get(e, "/page")
		if res.StatusCode != http.StatusForbidden || res.Header.Get("Maat-Mitigated") != "challenge" {
			t.Fatalf("%s: %d, Maat-Mitigated %q; want 403 challenge", tt.name, res.StatusCode, res.Header.Get("Maat-Mitigated"))
		}
		p := parsePage(t, body)
		if (p.wait != "") != tt.wantWait {
			t.Errorf("%s: wait offered %v, want %v", tt.name, p.wait != "", tt.wantWait)
		}
		if !tt.wantWait && !strings.Contains(body, "needs JavaScript") {
			t.Errorf("%s: the page does not say JavaScript is needed", tt.name)
		}
		if !tt.wantWait && strings.Contains(body, "http-equiv=\"refresh\"") {
			t.Errorf("%s: a meta refresh on a page without the wait", tt.name)
		}
	}
}

// TestChallengeTokensFreshAndRedeemable: every pass URL of two pages fetched
// one after the other differs; a second visitor passes by its own no-JS
// Continue (after the wait, not before), a first one by its proof of work;
// each then passes on its cookie. A proof-of-work token without nonces, a
// replay and a wrong solution are refused with their reason in the log.
func TestChallengeTokensFreshAndRedeemable(t *testing.T) {
	t.Parallel()
	e, fp := startChallengeEdge(t, "")
	v1, v2 := chromeVisitor(t, e), chromeVisitor(t, e)
	_, b1 := v1.get(e, "/one")
	_, b2 := v2.get(e, "/two")
	p1, p2 := parsePage(t, b1), parsePage(t, b2)
	if len(p1.urls) < 3 || len(p2.urls) < 3 {
		t.Fatalf("pass URLs: %q and %q", p1.urls, p2.urls)
	}
	// The same token may stand in several places of one page (data-wait,
	// meta refresh, Continue), never on two pages.
	for _, u := range p1.urls {
		if slices.Contains(p2.urls, u) || strings.Contains(strings.Join(p2.urls, " "), tokenOf(u)) {
			t.Errorf("a token of the first page is on the second: %s", u)
		}
	}
	if p1.pass == "" || p1.wait == "" || tokenOf(p1.pass) == tokenOf(p1.wait) {
		t.Errorf("the proof of work and the wait share a token: %q %q", p1.pass, p1.wait)
	}

	// The second visitor waits: too early, the wait page again and no cookie.
	res, _ := v2.get(e, p2.wait)
	if v2.cookie != "" || res.StatusCode == http.StatusSeeOther {
		t.Fatalf("the wait passed early: %d", res.StatusCode)
	}
	if !waitFor(t, 5*time.Second, func() bool {
		res, _ := v2.get(e, p2.wait)
		return res.StatusCode == http.StatusSeeOther
	}) {
		t.Fatal("the second visitor's Continue never passed")
	}
	if res, body := v2.get(e, "/two"); res.StatusCode != 200 || !strings.Contains(body, "Path=/two") {
		t.Errorf("the second visitor after the wait: %d %q", res.StatusCode, body)
	}

	// The first: a proof of work without nonces is refused, then solved.
	if res, _ := v1.get(e, p1.pass); res.StatusCode != http.StatusForbidden || v1.cookie != "" {
		t.Errorf("a PoW token without nonces: %d, cookie %q", res.StatusCode, v1.cookie)
	}
	wrong := make([]string, p1.k)
	for i := range wrong {
		wrong[i] = strconv.FormatUint(uint64(i)<<56, 16) // the right shape, almost surely not a solution
	}
	if res, _ := v1.get(e, p1.pass+"&n="+strings.Join(wrong, ",")); res.StatusCode != http.StatusForbidden {
		t.Errorf("a wrong solution: %d", res.StatusCode)
	}
	solved := p1.pass + "&n=" + p1.solve()
	if res, _ := v1.get(e, solved); res.StatusCode != http.StatusSeeOther || v1.cookie == "" {
		t.Fatalf("the solved proof of work: %d, cookie %q", res.StatusCode, v1.cookie)
	}
	if res, body := v1.get(e, "/one"); res.StatusCode != 200 || !strings.Contains(body, "Path=/one") {
		t.Errorf("the first visitor after the proof of work: %d", res.StatusCode)
	}
	// Someone else replaying the solved URL gets nothing.
	thief := chromeVisitor(t, e)
	if res, _ := thief.get(e, solved); res.StatusCode != http.StatusForbidden || thief.cookie != "" {
		t.Errorf("a replayed solution: %d, cookie %q", res.StatusCode, thief.cookie)
	}
	reasons := map[string]bool{}
	waitFor(t, 5*time.Second, func() bool {
		for _, l := range fpLines(t, fp) {
			if l.str("path") == "/.maat/pass" && l.str("action") == "DENY" {
				for _, r := range l.rules() {
					reasons[r] = true
				}
			}
		}
		return len(reasons) >= 3
	})
	for _, want := range []string{"challenge_nonce_missing", "challenge_wrong_solution", "challenge_reused"} {
		if !reasons[want] {
			t.Errorf("no refusal logged as %s (got %v)", want, reasons)
		}
	}
	if l := waitLine(t, fp, "/two"); l.str("action") != "CHALLENGE" {
		t.Errorf("the first /two: %s", l.str("action"))
	}
}

// tokenOf is the t= parameter of a pass URL.
func tokenOf(u string) string {
	_, rest, _ := strings.Cut(u, "t=")
	tok, _, _ := strings.Cut(rest, "&")
	return tok
}

// fpLines reads every line of a fingerprint log.
func fpLines(t *testing.T, file string) []fpLine {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		return nil
	}
	var out []fpLine
	for _, line := range strings.Split(string(b), "\n") {
		var l fpLine
		if json.Unmarshal([]byte(line), &l) == nil {
			out = append(out, l)
		}
	}
	return out
}

// TestHonestAutomationPasses: monitors, link previewers and feed readers
// reach the site under the default policy by their real User-Agents; one
// that borrows a monitor's name over a browser's TLS stack does not.
func TestHonestAutomationPasses(t *testing.T) {
	t.Parallel()
	e, fp := startChallengeEdge(t, "")
	c := e.client(t, "h2")
	for i, ua := range []string{
		"Mozilla/5.0+(compatible; UptimeRobot/2.0; http://www.uptimerobot.com/)",
		"Uptime-Kuma/1.23.16",
		"http.rb/5.1.1 (Mastodon/4.3.2; +https://mastodon.social/) Bot",
		"Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)",
		"Mozilla/5.0 (compatible; Discordbot/2.0; +https://discordapp.com)",
		"TelegramBot (like TwitterBot)",
		"Synapse (bot; +https://github.com/matrix-org/synapse)",
	} {
		path := "/auto/" + strconv.Itoa(i)
		res, _ := get(t, c, e.url(path), "User-Agent", ua)
		if res.StatusCode != 200 {
			t.Errorf("%s: %d", ua, res.StatusCode)
		}
		if a := waitLine(t, fp, path).str("action"); a != "ALLOW" && a != "PASS" {
			t.Errorf("%s: %s", ua, a)
		}
	}
	// Thunderbird reads feeds over Gecko's TLS stack (Firefox's).
	tb := &visitor{t: t, header: [][2]string{{"User-Agent", "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Thunderbird/128.5.0"}},
		c: utlsClient(t, e, utls.HelloFirefox_120)}
	if res, _ := tb.get(e, "/auto/thunderbird"); res.StatusCode != 200 {
		t.Errorf("Thunderbird over Firefox's TLS stack: %d", res.StatusCode)
	}
	impostor := chromeVisitor(t, e)
	impostor.header = [][2]string{{"User-Agent", "Mozilla/5.0+(compatible; UptimeRobot/2.0; http://www.uptimerobot.com/)"}}
	if res, _ := impostor.get(e, "/auto/impostor"); res.StatusCode == 200 {
		t.Errorf("UptimeRobot's name over Chrome's TLS stack: %d, want a challenge", res.StatusCode)
	}
}

// chromeRoundTrip sends one GET as Chrome does over HTTP/2, on a new utls
// Chrome 133 connection, and reads the answer.
func chromeRoundTrip(t *testing.T, e *testEdge, path string, header [][2]string, cookie string) (*http.Response, string) {
	t.Helper()
	return h2RoundTrip(t, e, utls.HelloChrome_133, chromePreface, path, header, cookie)
}

// h2Preface is what an HTTP/2 client sends before its first request: its
// SETTINGS and the connection's WINDOW_UPDATE increment.
type h2Preface struct {
	settings []http2.Setting
	window   uint32
}

// chromePreface is Chromium's (DESIGN.md's h2fp of Chromium).
var chromePreface = h2Preface{[]http2.Setting{{ID: 1, Val: 65536}, {ID: 2, Val: 0}, {ID: 4, Val: 6291456}, {ID: 6, Val: 262144}}, 15663105}

// h2RoundTrip sends one GET over HTTP/2 on a new connection with the
// ClientHello of id and the preface pre, the pseudo-headers in Chrome's
// order and header in the order given, and reads the answer.
func h2RoundTrip(t *testing.T, e *testEdge, id utls.ClientHelloID, pre h2Preface, path string, header [][2]string, cookie string) (*http.Response, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, _, err := testclient.Dial(ctx, e.Addrs().HTTPS, id, "localhost")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	if conn.ConnectionState().NegotiatedProtocol != "h2" {
		t.Fatal("utls did not negotiate h2")
	}
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	fr.ReadMetaHeaders = hpack.NewDecoder(65536, nil)
	_ = fr.WriteSettings(pre.settings...)
	if pre.window > 0 {
		_ = fr.WriteWindowUpdate(0, pre.window)
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "GET"}, {":authority", "localhost:" + port(e.Addrs().HTTPS)}, {":scheme", "https"}, {":path", path}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	for _, h := range header {
		_ = enc.WriteField(hpack.HeaderField{Name: strings.ToLower(h[0]), Value: h[1]})
	}
	if cookie != "" {
		_ = enc.WriteField(hpack.HeaderField{Name: "cookie", Value: cookie})
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	res := &http.Response{Header: http.Header{}, Proto: "HTTP/2.0", ProtoMajor: 2}
	var body bytes.Buffer
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading %s: %v", path, err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.MetaHeadersFrame:
			if f.StreamID != 1 {
				continue
			}
			for _, hf := range f.Fields {
				if hf.Name == ":status" {
					res.StatusCode, _ = strconv.Atoi(hf.Value)
				} else {
					res.Header.Add(hf.Name, hf.Value)
				}
			}
			if f.StreamEnded() {
				return res, decodeBody(t, res, body.Bytes())
			}
		case *http2.DataFrame:
			if f.StreamID != 1 {
				continue
			}
			body.Write(f.Data())
			if n := len(f.Data()); n > 0 {
				_ = fr.WriteWindowUpdate(1, uint32(n))
				_ = fr.WriteWindowUpdate(0, uint32(n))
			}
			if f.StreamEnded() {
				return res, decodeBody(t, res, body.Bytes())
			}
		case *http2.RSTStreamFrame:
			t.Fatalf("%s: stream reset: %v", path, f.ErrCode)
		case *http2.GoAwayFrame:
			t.Fatalf("%s: GOAWAY %v", path, f.ErrCode)
		}
	}
}

// decodeBody undoes a gzip Content-Encoding.
func decodeBody(t *testing.T, res *http.Response, b []byte) string {
	t.Helper()
	switch res.Header.Get("Content-Encoding") {
	case "":
		return string(b)
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		out, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	t.Fatalf("unexpected Content-Encoding %q", res.Header.Get("Content-Encoding"))
	return ""
}

// utlsClient is an HTTP/2 client (net/http's framing) over a utls
// ClientHello. It stays on x/net's deprecated http2.Transport: net/http's
// own speaks HTTP/2 over TLS only on a crypto/tls *tls.Conn, whose ALPN it
// reads, and a utls connection is not one.
func utlsClient(t *testing.T, e *testEdge, id utls.ClientHelloID) *http.Client {
	//lint:ignore SA1019 a utls connection is not a *tls.Conn (above)
	tr := &http2.Transport{DialTLSContext: func(ctx context.Context, _, _ string, _ *tls.Config) (net.Conn, error) {
		c, _, err := testclient.Dial(ctx, e.Addrs().HTTPS, id, "localhost")
		return c, err
	}}
	//lint:ignore SA1019 tr is x/net's (above)
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

package console

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/maatproxy/maat/fplog"
)

type fakeUpstreams []UpstreamRow

func (f fakeUpstreams) UpstreamStats() []UpstreamRow { return f }

// servePage records a little traffic and returns the page's response and
// body as a client of mode sees it.
func servePage(t *testing.T, mode, query string) (*http.Response, string) {
	t.Helper()
	r := NewRecorder()
	now := t0.Add(time.Minute)
	for i := range 30 {
		r.Record(&Request{Time: now.Add(-time.Duration(i) * 7 * time.Second), Site: "forge.example", Action: fplog.ActionDeny,
			JA4: "t13d1516h2_8daaf6152771_<b>x", Family: "python", ASN: 64500, ASOrg: "Hosting <Inc>",
			Rules: []string{"deny-bad"}, Client: netip.MustParseAddr("203.0.113.57")})
		r.Record(&Request{Time: now.Add(-time.Duration(i) * 7 * time.Second), Site: "forge.example", Action: fplog.ActionChallenge,
			JA4: "t13d1517h2_8daaf6152771_b6f405a00624", Family: "chrome", Client: netip.MustParseAddr("2001:db8:1:2:3:4:5:6")})
	}
	r.ChallengeResult(now, true)
	r.ChallengeResult(now, false)
	p := &Page{Recorder: r, Now: func() time.Time { return now },
		Upstreams: fakeUpstreams{{Site: "forge.example", Upstream: "127.0.0.1:3000", Pressure: 0.75, InUse: 24, Capacity: 32, Queue: 5}},
		Privacy:   func() (string, []byte) { return mode, []byte("0123456789abcdef0123456789abcdef") }}
	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, httptest.NewRequest("GET", "/"+query, nil))
	res := rec.Result()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

func TestPageShowsTraffic(t *testing.T) {
	t.Parallel()
	res, body := servePage(t, fplog.ClientIPFull, "")
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("status %d, type %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	for _, want := range []string{
		`<td>t13d1516h2_8daaf6152771_&lt;b&gt;x</td><td>30</td><td>0</td><td>0</td><td>30</td>`, // escaped
		`<td>AS64500 Hosting &lt;Inc&gt;</td>`,
		`<td>deny-bad</td><td>30</td>`,
		`<td>python</td>`, `<td>chrome</td>`,
		`<td>forge.example</td><td>60</td><td>0</td><td>30</td><td>30</td>`,
		`<td>127.0.0.1:3000</td><td>75 %</td><td>24</td><td>32</td><td>5</td>`,
		`<td>203.0.113.57</td>`,
		`<rect class="deny"`, `<rect class="challenge"`, `<polyline class="issued"`,
		`<title id="decisions-t">Requests by decision</title>`,
		`30 challenged, 30 denied`,
		`location.reload()`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if strings.Contains(body, "<b>") {
		t.Error("the page has a client's markup unescaped")
	}
}

func TestPageCSP(t *testing.T) {
	t.Parallel()
	res, body := servePage(t, fplog.ClientIPFull, "")
	csp := res.Header.Get("Content-Security-Policy")
	m := regexp.MustCompile(`style-src 'nonce-([0-9a-f]{32})'`).FindStringSubmatch(csp)
	if m == nil || !strings.HasPrefix(csp, "default-src 'none';") || !strings.Contains(csp, "script-src 'nonce-"+m[1]+"'") {
		t.Fatalf("CSP %q", csp)
	}
	if n := strings.Count(body, `nonce="`+m[1]+`"`); n != 2 {
		t.Errorf("%d elements carry the nonce, want the style and the script", n)
	}
	if strings.Contains(body, "style=") || strings.Contains(body, "src=") || strings.Contains(body, "http://") && !strings.Contains(body, `xmlns="http://www.w3.org/2000/svg"`) {
		t.Error("the page has an inline style attribute or loads something")
	}
	_, again := servePage(t, fplog.ClientIPFull, "")
	if strings.Contains(again, m[1]) {
		t.Error("two responses share a nonce")
	}
	if h := res.Header.Get("Cache-Control"); h != "no-store" {
		t.Errorf("Cache-Control %q", h)
	}
}

func TestPagePaused(t *testing.T) {
	t.Parallel()
	_, body := servePage(t, fplog.ClientIPFull, "?pause=1")
	if strings.Contains(body, "<script") || !strings.Contains(body, "Resume reloading") {
		t.Error("a paused page still reloads itself")
	}
}

// TestPagePrivacy: the page never shows an address the fingerprint log
// would not write.
func TestPagePrivacy(t *testing.T) {
	t.Parallel()
	raw := []string{"203.0.113.57", "2001:db8:1:2:3:4:5:6"}
	for _, tt := range []struct {
		mode string
		want []string // in the page
	}{
		{fplog.ClientIPFull, raw},
		{fplog.ClientIPPrefix, []string{"203.0.113.0/24", "2001:db8:1:2::/64"}},
		{fplog.ClientIPHash, []string{fplog.FormatAddr(fplog.ClientIPHash, []byte("0123456789abcdef0123456789abcdef"), netip.MustParseAddr(raw[0]))}},
		{fplog.ClientIPNone, nil},
	} {
		t.Run(tt.mode, func(t *testing.T) {
			t.Parallel()
			_, body := servePage(t, tt.mode, "")
			for _, w := range tt.want {
				if !strings.Contains(body, "<td>"+w+"</td>") {
					t.Errorf("the page lacks %s", w)
				}
			}
			if tt.mode == fplog.ClientIPFull {
				return
			}
			for _, a := range raw {
				if strings.Contains(body, a) {
					t.Errorf("log.client_ip %s: the page shows %s", tt.mode, a)
				}
			}
			if !strings.Contains(body, `log.client_ip is “`+tt.mode+`”`) {
				t.Error("the page does not say how addresses are shown")
			}
			if tt.mode == fplog.ClientIPNone && strings.Contains(body, `id="clients"`) {
				t.Error("log.client_ip none: the page has a clients table")
			}
		})
	}
	// Without a Privacy func no address is shown.
	p := &Page{Recorder: NewRecorder()}
	p.Recorder.Record(&Request{Time: time.Now(), Action: fplog.ActionAllow, Client: netip.MustParseAddr(raw[0])})
	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if strings.Contains(rec.Body.String(), raw[0]) {
		t.Error("a Page without Privacy shows an address")
	}
}

func TestNiceMax(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ n, want uint64 }{{0, 2}, {1, 2}, {2, 2}, {3, 3}, {7, 8}, {9, 10}, {11, 20}, {480, 500}, {501, 600}, {801, 1000}} {
		if got := niceMax(tt.n); got != tt.want {
			t.Errorf("niceMax(%d) = %d, want %d", tt.n, got, tt.want)
		}
	}
}

func TestFormatCount(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		n    uint64
		want string
	}{{0, "0"}, {999, "999"}, {1000, "1\u202f000"}, {1234567, "1\u202f234\u202f567"}} {
		if got := formatCount(tt.n); got != tt.want {
			t.Errorf("formatCount(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

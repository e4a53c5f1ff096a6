package policy

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

func TestParseUA(t *testing.T) {
	t.Parallel()
	tests := []struct {
		ua    string
		brand brand
		major int
	}{
		{uaChrome, brandChromium, 131},
		{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0", brandChromium, 131},
		{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36 OPR/115.0.0.0", brandChromium, 130},
		{uaHeadless, brandChromium, 131}, // a Chromium, on Chromium's TLS
		{uaFirefox, brandFirefox, 133},
		{uaSafari, brandSafari, 18},
		{uaIPhone, brandIOS, 18},
		{"Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/131.0.6778.73 Mobile/15E148 Safari/604.1", brandIOS, 17},
		{uaGooglebot, brandNone, 0},
		{uaGPTBot, brandNone, 0},
		{uaGooglebotSmartphone, brandChromium, 131},
		{uaBetterUptime, brandChromium, 130},
		{uaIMessage, brandSafari, 9},
		{uaMiniflux, brandNone, 0},
		{"curl/8.5.0", brandNone, 0},
		{"", brandNone, 0},
		{"Mozilla/5.0 (X11; Linux x86_64; rv:115.0) Gecko/20100101 Thunderbird/115.0", brandNone, 0},
	}
	for _, tt := range tests {
		t.Run(tt.ua, func(t *testing.T) {
			t.Parallel()
			c := parseUA(tt.ua)
			if c.brand != tt.brand || c.major != tt.major {
				t.Errorf("parseUA = %d/%d, want %d/%d", c.brand, c.major, tt.brand, tt.major)
			}
		})
	}
}

func TestSignals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		edit func(r *Request)
		want []Signal
	}{
		{"real chrome", nil, nil},
		{"chrome UA on edge's stack", func(r *Request) { r.ClientFamily = "edge" }, nil},
		{"chrome UA on unknown stack", func(r *Request) { r.ClientFamily = "" }, nil},
		{"chrome UA on curl", func(r *Request) { r.ClientFamily = "curl" }, []Signal{SignalUATLSMismatch}},
		// Firefox's TLS under Chromium's HTTP/2 is a parrot too.
		{"chrome UA on firefox", func(r *Request) { r.ClientFamily = "firefox" }, []Signal{SignalUATLSMismatch, SignalTLSHTTPMismatch}},
		{"chrome UA on firefox's TLS and HTTP/2", func(r *Request) {
			r.ClientFamily, r.H2FP, r.H2Family = "firefox", h2fpFirefox, "firefox"
			r.HeaderOrder = nil
		}, []Signal{SignalUATLSMismatch}},
		{"firefox UA on python", func(r *Request) {
			r.Header.Set("User-Agent", uaFirefox)
			r.Header.Del("Sec-Ch-Ua")
			r.HeaderOrder = nil
			r.ClientFamily = "python"
		}, []Signal{SignalUATLSMismatch}},
		{"safari UA on ios stack", func(r *Request) {
			r.Header.Set("User-Agent", uaSafari)
			r.HeaderOrder = nil
			r.ClientFamily, r.H2FP, r.H2Family = "ios", h2fpSafari, ""
		}, nil},
		{"bot convention is no claim", func(r *Request) { r.Header.Set("User-Agent", uaGPTBot); r.ClientFamily = "python" }, nil},
		{"no accept-language", func(r *Request) { r.Header.Del("Accept-Language") }, []Signal{SignalBrowserHeadersMissing}},
		{"no sec-fetch-mode", func(r *Request) { r.Header.Del("Sec-Fetch-Mode") }, []Signal{SignalBrowserHeadersMissing}},
		{"no sec-ch-ua", func(r *Request) { r.Header.Del("Sec-Ch-Ua") }, []Signal{SignalBrowserHeadersMissing}},
		{"no sec-* over plain http", func(r *Request) {
			r.TLS = false
			r.Header.Del("Sec-Ch-Ua")
			r.Header.Del("Sec-Fetch-Mode")
		}, nil},
		{"firefox needs no sec-ch-ua", func(r *Request) {
			r.Header.Set("User-Agent", uaFirefox)
			r.Header.Del("Sec-Ch-Ua")
			r.ClientFamily, r.H2FP, r.H2Family = "firefox", h2fpFirefox, "firefox"
			r.HeaderOrder = []string{":method", ":path", ":authority", ":scheme", "user-agent"}
		}, nil},
		{"chrome with curl's pseudo order", func(r *Request) {
			r.HeaderOrder = []string{":method", ":path", ":scheme", ":authority", "user-agent"}
		}, []Signal{SignalBrowserHeadersMissing}},
		{"chrome on HTTP/1.1 over TLS", func(r *Request) {
			r.Proto = "HTTP/1.1"
			r.HeaderOrder = []string{"Host", "Connection", "User-Agent"}
		}, []Signal{SignalProtoMismatch}},
		{"HTTP/1.1 with Host not first", func(r *Request) {
			r.Proto = "HTTP/1.1"
			r.TLS = false
			r.HeaderOrder = []string{"User-Agent", "Host"}
		}, []Signal{SignalBrowserHeadersMissing}},
		{"websocket on HTTP/1.1", func(r *Request) {
			r.Proto = "HTTP/1.1"
			r.HeaderOrder = nil
			r.Header.Set("Upgrade", "websocket")
		}, nil},
		{"chrome on HTTP/3", func(r *Request) { r.Proto = "HTTP/3.0" }, nil},
		{"firefox on HTTP/3, another pseudo order", func(r *Request) {
			r.Header.Set("User-Agent", uaFirefox)
			r.Header.Del("Sec-Ch-Ua")
			r.ClientFamily, r.Proto, r.H2FP, r.H2Family = "firefox", "HTTP/3.0", "", ""
			r.HeaderOrder = []string{":method", ":scheme", ":authority", ":path", "user-agent"}
		}, nil},
		{"chrome websocket handshake", func(r *Request) {
			r.Proto = "HTTP/1.1"
			r.Header.Del("Accept")
			r.Header.Set("Upgrade", "websocket")
			r.HeaderOrder = []string{"Host", "Connection", "Pragma", "Cache-Control", "User-Agent", "Upgrade"}
		}, nil},
		{"no accept", func(r *Request) { r.Header.Del("Accept") }, []Signal{SignalBrowserHeadersMissing}},
		{"old chrome on HTTP/1.1", func(r *Request) {
			r.Header.Set("User-Agent", "Mozilla/5.0 (Windows NT 6.1) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/49.0.2623.112 Safari/537.36")
			r.Proto = "HTTP/1.1"
			r.HeaderOrder = nil
		}, nil},
		{"crawler unverified", func(r *Request) { r.Header.Set("User-Agent", uaGooglebot); r.CrawlerVerified = CrawlerFailed }, []Signal{SignalFakeCrawler}},
		{"crawler verified", func(r *Request) { r.Header.Set("User-Agent", uaGooglebot); r.CrawlerVerified = CrawlerVerified }, []Signal{SignalVerifiedCrawler}},
		{"HeadlessChrome in the User-Agent", func(r *Request) { r.Header.Set("User-Agent", uaHeadless) }, []Signal{SignalHeadless}},
		{"HeadlessChrome in Sec-CH-UA", func(r *Request) {
			r.Header.Set("Sec-Ch-Ua", `"Chromium";v="131", "HeadlessChrome";v="131", "Not_A Brand";v="24"`)
		}, []Signal{SignalHeadless}},
		{"PhantomJS", func(r *Request) {
			r.Header.Set("User-Agent", "Mozilla/5.0 (Unknown; Linux x86_64) AppleWebKit/538.1 (KHTML, like Gecko) PhantomJS/2.1.1 Safari/538.1")
			r.ClientFamily = ""
			r.HeaderOrder = nil
		}, []Signal{SignalHeadless}},
		{"chrome from a cloud network", func(r *Request) { r.ASN = 16509 }, []Signal{SignalHostingASN}},
		{"chrome from a home network", func(r *Request) { r.ASN = 3320 }, nil},
		{"curl from a cloud network", func(r *Request) {
			r.Header.Set("User-Agent", "curl/8.5.0")
			r.ClientFamily, r.H2FP, r.H2Family, r.ASN = "curl", h2fpCurl, "curl", 24940
		}, nil},
		{"a declared bot with a Chrome part from a cloud network", func(r *Request) {
			r.Header.Set("User-Agent", uaBetterUptime)
			r.ASN = 16509
		}, nil},
		// A bot token does not hide the browser part from the TLS stack.
		{"a monitor's Chrome part on Go's TLS", func(r *Request) {
			r.Header.Set("User-Agent", uaBetterUptime)
			r.ClientFamily = "go"
			r.Header.Del("Sec-Ch-Ua")
		}, []Signal{SignalUATLSMismatch}},
		{"a Chrome with a bot token on Chrome's TLS", func(r *Request) {
			r.Header.Set("User-Agent", uaChrome+" SomeBot/1.0")
		}, nil},
		{"iMessage's Safari part on Apple's TLS", func(r *Request) {
			r.Header.Set("User-Agent", uaIMessage)
			r.ClientFamily, r.H2FP, r.H2Family = "ios", h2fpSafari, ""
		}, nil},
		{"iMessage's Safari part on curl", func(r *Request) {
			r.Header.Set("User-Agent", uaIMessage)
			r.ClientFamily = "curl"
		}, []Signal{SignalUATLSMismatch}},
		{"Googlebot smartphone's Chrome part on an unknown stack", func(r *Request) {
			r.Header.Set("User-Agent", uaGooglebotSmartphone)
			r.ClientFamily = ""
		}, nil},
		// Parrots: a browser's TLS stack under another client's HTTP/2.
		{"Chrome's TLS under Go's HTTP/2 preface in Chrome's order", func(r *Request) {
			r.H2FP, r.H2Family = h2fpGoChromeOrder, "go"
		}, []Signal{SignalTLSHTTPMismatch}},
		{"Chrome's TLS under Go's HTTP/2", func(r *Request) {
			r.H2FP, r.H2Family = h2fpGo, "go"
			r.HeaderOrder = []string{":authority", ":method", ":path", ":scheme", "user-agent"}
		}, []Signal{SignalBrowserHeadersMissing, SignalTLSHTTPMismatch}},
		{"Chrome's TLS under curl's HTTP/2 claiming curl", func(r *Request) {
			r.Header = http.Header{"User-Agent": {"curl/8.5.0"}, "Accept": {"*/*"}}
			r.H2FP, r.H2Family = h2fpCurl, "curl"
		}, []Signal{SignalUATLSMismatch, SignalTLSHTTPMismatch}},
		{"Chrome's TLS under an unknown preface in Go's pseudo order", func(r *Request) {
			r.H2FP, r.H2Family = "1:4096|00|0|a,m,p,s", ""
		}, []Signal{SignalTLSHTTPMismatch}},
		{"Edge's TLS under Chromium's HTTP/2", func(r *Request) { r.ClientFamily = "edge" }, nil},
		{"Chrome's TLS under an unknown preface in Chrome's order", func(r *Request) {
			r.H2FP, r.H2Family = "1:65536;2:0;4:6291456;6:262144;9:1|15663105|0|m,a,s,p", ""
		}, nil},
		{"Chrome's TLS, an extended CONNECT first", func(r *Request) {
			r.H2FP = "1:65536;2:0;4:6291456;6:262144|15663105|0|m,a,s,p,p"
		}, nil},
		{"Chrome's TLS on HTTP/1.1", func(r *Request) {
			r.Proto, r.H2FP, r.H2Family = "HTTP/1.1", "", ""
			r.HeaderOrder = []string{"Host", "Connection", "User-Agent"}
		}, []Signal{SignalProtoMismatch}},
		// Go's HTTP/1.1 writes Host, User-Agent, then the rest sorted.
		{"Chrome's TLS under Go's HTTP/1.1", func(r *Request) {
			r.Proto, r.H2FP, r.H2Family = "HTTP/1.1", "", ""
			r.HeaderOrder = []string{"Host", "User-Agent", "Accept", "Accept-Encoding", "Accept-Language", "Sec-Ch-Ua"}
		}, []Signal{SignalProtoMismatch, SignalTLSHTTPMismatch}},
		{"Chrome's TLS under HTTP/1.1 without Connection", func(r *Request) {
			r.Proto, r.H2FP, r.H2Family = "HTTP/1.1", "", ""
			r.HeaderOrder = []string{"Host"}
		}, []Signal{SignalProtoMismatch, SignalTLSHTTPMismatch}},
		{"Chrome's TLS on HTTP/1.1, order unknown", func(r *Request) {
			r.Proto, r.H2FP, r.H2Family, r.HeaderOrder = "HTTP/1.1", "", "", nil
		}, []Signal{SignalProtoMismatch}},
		{"Firefox's TLS under Go's HTTP/1.1 (not checked)", func(r *Request) {
			r.Header.Set("User-Agent", uaFirefox)
			r.Header.Del("Sec-Ch-Ua")
			r.Proto, r.H2FP, r.H2Family, r.ClientFamily = "HTTP/1.1", "", "", "firefox"
			r.HeaderOrder = []string{"Host", "User-Agent", "Accept"}
		}, []Signal{SignalProtoMismatch}},
		{"Chrome's TLS under Go's HTTP/2, plain HTTP", func(r *Request) {
			r.TLS = false
			r.Header.Del("Sec-Ch-Ua")
			r.H2FP, r.H2Family, r.HeaderOrder = h2fpGo, "go", nil
		}, nil},
		{"Safari's TLS under Go's HTTP/2", func(r *Request) {
			r.Header.Set("User-Agent", uaSafari)
			r.HeaderOrder = nil
			r.ClientFamily, r.H2FP, r.H2Family = "safari", h2fpGo, "go"
		}, []Signal{SignalTLSHTTPMismatch}},
		{"Firefox's TLS under Go's HTTP/2", func(r *Request) {
			r.Header.Set("User-Agent", uaFirefox)
			r.Header.Del("Sec-Ch-Ua")
			r.HeaderOrder = nil
			r.ClientFamily, r.H2FP, r.H2Family = "firefox", h2fpGo, "go"
		}, []Signal{SignalTLSHTTPMismatch}},
		// A client's own name over another client's HTTP/2 is a lie too.
		{"curl's TLS under Go's HTTP/2", func(r *Request) {
			r.Header = http.Header{"User-Agent": {"curl/8.5.0"}}
			r.ClientFamily, r.H2FP, r.H2Family = "curl", h2fpGo, "go"
		}, []Signal{SignalUATLSMismatch}},
		{"curl's TLS and HTTP/2", func(r *Request) {
			r.Header = http.Header{"User-Agent": {"curl/8.5.0"}}
			r.ClientFamily, r.H2FP, r.H2Family = "curl", h2fpCurl, "curl"
		}, nil},
		{"Go's TLS and HTTP/2 claiming Chrome", func(r *Request) {
			r.ClientFamily, r.H2FP, r.H2Family = "go", h2fpGo, "go"
			r.HeaderOrder = nil
		}, []Signal{SignalUATLSMismatch}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := chromeRequest()
			if tt.edit != nil {
				tt.edit(r)
			}
			var got []Signal
			p := &Policy{hosting: newASNSet([]uint32{16509, 24940})}
			raw, _ := p.signals(r, r.Header.Get("User-Agent"))
			for s := range raw.All {
				got = append(got, s)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("signals = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSignalNames(t *testing.T) {
	t.Parallel()
	for s := range numSignals {
		got, ok := parseSignal(s.String())
		if !ok || got != s {
			t.Errorf("parseSignal(%q) = %v, %v", s.String(), got, ok)
		}
	}
	if _, ok := parseSignal("nope"); ok {
		t.Error(`parseSignal("nope") succeeded`)
	}
	for a := ALLOW; a <= DIVERT; a++ {
		if got, ok := parseAction(a.String()); !ok || got != a {
			t.Errorf("parseAction(%q) = %v, %v", a.String(), got, ok)
		}
	}
	if Action(99).String() != "UNKNOWN" {
		t.Error("Action(99).String()")
	}
}

func TestBrowserAgrees(t *testing.T) {
	t.Parallel()
	p := mustDefault(t)
	tests := []struct {
		name string
		edit func(r *Request)
		want bool
	}{
		{"Chrome on Chrome's TLS and HTTP/2", nil, true},
		{"Chrome on Edge's TLS", func(r *Request) { r.ClientFamily = "edge" }, true},
		{"Chrome on an unknown JA4", func(r *Request) { r.ClientFamily = "" }, false},
		{"Chrome on Firefox's TLS", func(r *Request) { r.ClientFamily = "firefox" }, false},
		{"Chrome with curl's HTTP/2 fingerprint", func(r *Request) { r.H2FP, r.H2Family = h2fpCurl, "curl" }, false},
		{"Chrome with Chromium 156's HTTP/2 fingerprint", func(r *Request) { r.H2FP = h2fpChromium }, true},
		{"Chrome with Go's HTTP/2 preface in Chrome's order", func(r *Request) { r.H2FP, r.H2Family = h2fpGoChromeOrder, "go" }, false},
		{"Chrome with an unknown HTTP/2 preface in Chrome's order", func(r *Request) {
			r.H2FP, r.H2Family = "1:65536;2:0;4:6291456;6:262144;9:1|15663105|0|m,a,s,p", ""
		}, true},
		{"Chrome on HTTP/3", func(r *Request) { r.Proto, r.H2FP = "HTTP/3.0", "" }, true},
		{"Chrome without an HTTP/2 fingerprint", func(r *Request) { r.H2FP = "" }, true},
		{"Firefox", func(r *Request) {
			r.Header.Set("User-Agent", uaFirefox)
			r.ClientFamily, r.H2FP, r.H2Family = "firefox", h2fpFirefox, "firefox"
		}, true},
		{"Safari on iOS's TLS", func(r *Request) {
			r.Header.Set("User-Agent", uaIPhone)
			r.ClientFamily, r.H2FP, r.H2Family = "ios", h2fpSafari, ""
		}, true},
		{"a bot token", func(r *Request) { r.Header.Set("User-Agent", uaChrome+" FetchBot/1.0") }, false},
		{"no browser claimed", func(r *Request) { r.Header.Set("User-Agent", "curl/8.5.0") }, false},
		{"a malformed HTTP/2 fingerprint", func(r *Request) { r.H2FP = "x|y|z|m,a,s,p,q" }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := chromeRequest()
			if tt.edit != nil {
				tt.edit(r)
			}
			if d := p.Evaluate(r); d.BrowserAgrees != tt.want {
				t.Errorf("BrowserAgrees = %v, want %v", d.BrowserAgrees, tt.want)
			}
		})
	}
}

func TestLied(t *testing.T) {
	t.Parallel()
	off := mustParse(t, "bots: [{name: x, path_regex: ^/x$, action: DENY}]\nsignals: {ua_tls_mismatch: off, headless: off}")
	tests := []struct {
		name string
		edit func(r *Request)
		want bool
	}{
		{"real Chrome", nil, false},
		{"browser headers missing is not a lie", func(r *Request) { r.Header.Del("Accept-Language") }, false},
		{"Chrome's User-Agent on curl", func(r *Request) { r.ClientFamily = "curl" }, true},
		{"a failed crawler check", func(r *Request) { r.Header.Set("User-Agent", uaGooglebot); r.CrawlerVerified = CrawlerFailed }, true},
		{"headless", func(r *Request) { r.Header.Set("User-Agent", uaHeadless) }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := chromeRequest()
			if tt.edit != nil {
				tt.edit(r)
			}
			for _, p := range []*Policy{mustDefault(t), off} {
				if d := p.Evaluate(r); d.Lied() != tt.want {
					t.Errorf("Lied = %v, want %v (signals %v)", d.Lied(), tt.want, names(&d))
				}
			}
		})
	}
}

// TestSignalsRealHeaderSets: browser_headers_missing and proto_mismatch
// stay quiet for real clients that send fewer headers than a current
// browser: Pale Moon (a Gecko fork from before Fetch Metadata, whose
// User-Agent names Firefox/102 for compatibility) and Google's Storebot
// (a crawler whose User-Agent carries a Chrome part and the token
// Storebot-Google/1.0, and which sends no Accept-Language), with the
// headers each sends (anubisdiff_corpus_test.go), over HTTP/1.1 and
// HTTP/2. A Firefox 133 without Fetch Metadata still fires.
func TestSignalsRealHeaderSets(t *testing.T) {
	t.Parallel()
	p := mustDefault(t)
	req := func(h [][2]string, proto string) *Request {
		r := diffRequestToPolicy(diffRequest{Method: "GET", Target: "/", IP: "203.0.113.7", Headers: h})
		r.Proto = proto
		r.HeaderOrder = []string{"host"}
		for _, kv := range h {
			r.HeaderOrder = append(r.HeaderOrder, strings.ToLower(kv[0]))
		}
		if proto == "HTTP/2.0" {
			r.HeaderOrder = append([]string{":method", ":path", ":authority", ":scheme"}, r.HeaderOrder[1:]...)
		}
		return r
	}
	firefoxWithout := [][2]string{{"User-Agent", uaFirefox}, {"Accept", "text/html"}, {"Accept-Language", "en"}}
	tests := []struct {
		name    string
		headers [][2]string
		want    []Signal
	}{
		{"pale moon", hdrPaleMoon, nil},
		{"storebot", hdrGoogleCrawler(uaStorebot), nil},
		{"storebot mobile", hdrGoogleCrawler(uaStorebotMob), nil},
		{"firefox 133 without fetch metadata", firefoxWithout, []Signal{SignalBrowserHeadersMissing}},
	}
	for _, tt := range tests {
		for _, proto := range []string{"HTTP/1.1", "HTTP/2.0"} {
			t.Run(tt.name+" "+proto, func(t *testing.T) {
				t.Parallel()
				r := req(tt.headers, proto)
				var got []Signal
				for s := range p.Evaluate(r).Signals.All {
					if s == SignalBrowserHeadersMissing || s == SignalProtoMismatch {
						got = append(got, s)
					}
				}
				want := tt.want
				if proto == "HTTP/1.1" && tt.want != nil {
					want = append(slices.Clone(want), SignalProtoMismatch)
				}
				if !slices.Equal(got, want) {
					t.Errorf("signals %v, want %v\n%s", got, want, p.Explain(r))
				}
			})
		}
	}
}

package policy

import (
	"slices"
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
		{"Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.6778.69 Mobile Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", brandNone, 0},
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
		{"chrome UA on firefox", func(r *Request) { r.ClientFamily = "firefox" }, []Signal{SignalUATLSMismatch}},
		{"firefox UA on python", func(r *Request) {
			r.Header.Set("User-Agent", uaFirefox)
			r.Header.Del("Sec-Ch-Ua")
			r.HeaderOrder = nil
			r.ClientFamily = "python"
		}, []Signal{SignalUATLSMismatch}},
		{"safari UA on ios stack", func(r *Request) {
			r.Header.Set("User-Agent", uaSafari)
			r.HeaderOrder = nil
			r.ClientFamily = "ios"
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
			r.ClientFamily = "firefox"
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
			r.ClientFamily, r.Proto = "firefox", "HTTP/3.0"
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := chromeRequest()
			if tt.edit != nil {
				tt.edit(r)
			}
			var got []Signal
			for s := range computeSignals(r, r.Header.Get("User-Agent")).All {
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
	for a := ALLOW; a <= WEIGH; a++ {
		if got, ok := parseAction(a.String()); !ok || got != a {
			t.Errorf("parseAction(%q) = %v, %v", a.String(), got, ok)
		}
	}
	if Action(99).String() != "UNKNOWN" {
		t.Error("Action(99).String()")
	}
}

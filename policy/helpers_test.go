package policy

import (
	"net/http"
	"net/netip"
	"testing"
)

const (
	uaChrome    = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"
	uaFirefox   = "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0"
	uaSafari    = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15"
	uaIPhone    = "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1"
	uaHeadless  = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/131.0.0.0 Safari/537.36"
	uaGooglebot = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
	uaGPTBot    = "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)"
	uaMiniflux  = "Mozilla/5.0 (compatible; Miniflux/2.2.3; +https://miniflux.app)"
	// Real User-Agents that carry a browser part and a bot token; see
	// lists/monitors.yaml and lists/link-previews.yaml for their sources.
	uaGooglebotSmartphone = "Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.6778.69 Mobile Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
	uaBetterUptime        = "Better Uptime Bot Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36"
	uaIMessage            = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_11_1) AppleWebKit/601.2.4 (KHTML, like Gecko) Version/9.0.1 Safari/601.2.4 facebookexternalhit/1.1 Facebot Twitterbot/1.0"
)

// HTTP/2 fingerprints of real clients (httpfp/testdata/clients.jsonl;
// Safari's as published, for its pseudo-header order).
const (
	h2fpChromium = "1:65536;2:0;4:6291456;6:262144|15663105|0|m,a,s,p"
	h2fpFirefox  = "1:65536;2:0;4:131072;5:16384|12517377|0|m,p,a,s"
	h2fpSafari   = "2:0;3:100;4:2097152;8:1;9:1|10420225|0|m,s,a,p"
	h2fpCurl     = "3:100;4:33554432;2:0|33488897|0|m,p,s,a"
	h2fpGo       = "2:0;4:4194304;5:16384;6:10485760|1073741824|0|a,m,p,s"
	// A parrot: Go's HTTP/2 connection preface with Chrome's pseudo-header
	// order (a utls Chrome hello under a patched x/net transport).
	h2fpGoChromeOrder = "2:0;4:4194304;5:16384;6:10485760|1073741824|0|m,a,s,p"
)

// chromeRequest is what Chrome sends for a top-level navigation over
// HTTP/2.
func chromeRequest() *Request {
	return &Request{
		RemoteAddr: netip.MustParseAddr("203.0.113.7"),
		Host:       "example.org",
		Method:     "GET",
		Path:       "/wiki/Main_Page",
		Proto:      "HTTP/2.0",
		TLS:        true,
		Header: http.Header{
			"User-Agent":                {uaChrome},
			"Accept":                    {"text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"},
			"Accept-Language":           {"en-GB,en;q=0.9"},
			"Accept-Encoding":           {"gzip, deflate, br, zstd"},
			"Sec-Ch-Ua":                 {`"Chromium";v="131", "Not_A Brand";v="24"`},
			"Sec-Ch-Ua-Mobile":          {"?0"},
			"Sec-Ch-Ua-Platform":        {`"Linux"`},
			"Sec-Fetch-Dest":            {"document"},
			"Sec-Fetch-Mode":            {"navigate"},
			"Sec-Fetch-Site":            {"none"},
			"Sec-Fetch-User":            {"?1"},
			"Upgrade-Insecure-Requests": {"1"},
		},
		HeaderOrder: []string{":method", ":authority", ":scheme", ":path", "sec-ch-ua", "sec-ch-ua-mobile",
			"sec-ch-ua-platform", "upgrade-insecure-requests", "user-agent", "accept", "sec-fetch-site",
			"sec-fetch-mode", "sec-fetch-user", "sec-fetch-dest", "accept-encoding", "accept-language"},
		JA4:          "t13d1516h2_8daaf6152771_02713d6af862",
		H2FP:         h2fpChromium,
		ClientFamily: "chrome",
		H2Family:     "chrome",
	}
}

// curlRequest is what curl sends over HTTP/2: its own User-Agent, */*.
func curlRequest(ua string) *Request {
	return &Request{
		RemoteAddr:   netip.MustParseAddr("127.0.0.1"),
		Host:         "localhost",
		Method:       "GET",
		Path:         "/",
		Proto:        "HTTP/2.0",
		TLS:          true,
		Header:       http.Header{"User-Agent": {ua}, "Accept": {"*/*"}},
		HeaderOrder:  []string{":method", ":path", ":scheme", ":authority", "user-agent", "accept"},
		JA4:          "t13d3112h2_e8f1e7e78f70_6bebaf5329ac",
		ClientFamily: "curl",
	}
}

func mustDefault(t testing.TB) *Policy {
	t.Helper()
	p, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mustParse(t testing.TB, src string) *Policy {
	t.Helper()
	p, err := Parse("test.yaml", []byte(src), Options{})
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return p
}

func names(d *Decision) []string { return d.AppendNames(nil) }

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

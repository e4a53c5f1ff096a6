package policy

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// The corpus of the differential test against Anubis (anubisdiff_test.go):
// the requests both Anubis and Maat decide. Each client is a real
// User-Agent with the headers that client sends (sources beside each),
// from the addresses it comes from (and, for crawlers, from one that is
// not theirs), asked for a spread of paths and methods.
// `go test -run TestAnubisDiffCorpus -anubisdiff.corpus` writes
// testdata/anubisdiff/corpus.json and dns.json, which the recorder
// (testdata/anubisdiff/record.sh) feeds to Anubis.

var updateCorpus = flag.Bool("anubisdiff.corpus", false, "rewrite testdata/anubisdiff/corpus.json and dns.json")

// diffRequest is one request of the corpus.
type diffRequest struct {
	Name    string      `json:"name"`
	Method  string      `json:"method"`
	Target  string      `json:"target"` // path and query
	IP      string      `json:"ip"`
	Headers [][2]string `json:"headers"` // in order
}

// diffDNS is the DNS both sides see: PTR names of addresses and the
// addresses of names (everything else does not exist).
type diffDNS struct {
	Reverse map[string][]string `json:"reverse"`
	Forward map[string][]string `json:"forward"`
}

// Header sets as the clients send them.
var (
	// Chrome 131 on Linux, a top-level navigation (Chrome's DevTools).
	hdrChrome = [][2]string{
		{"Sec-Ch-Ua", `"Google Chrome";v="131", "Chromium";v="131", "Not_A Brand";v="24"`},
		{"Sec-Ch-Ua-Mobile", "?0"}, {"Sec-Ch-Ua-Platform", `"Linux"`},
		{"Upgrade-Insecure-Requests", "1"}, {"User-Agent", uaChrome},
		{"Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7"},
		{"Sec-Fetch-Site", "none"}, {"Sec-Fetch-Mode", "navigate"}, {"Sec-Fetch-User", "?1"}, {"Sec-Fetch-Dest", "document"},
		{"Accept-Encoding", "gzip, deflate, br, zstd"}, {"Accept-Language", "en-GB,en;q=0.9"}, {"Priority", "u=0, i"},
	}
	// Firefox 133 on Linux (about:networking, HTTP/2).
	hdrFirefox = [][2]string{
		{"User-Agent", uaFirefox},
		{"Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"},
		{"Accept-Language", "en-US,en;q=0.5"}, {"Accept-Encoding", "gzip, deflate, br, zstd"},
		{"Upgrade-Insecure-Requests", "1"}, {"Sec-Fetch-Dest", "document"}, {"Sec-Fetch-Mode", "navigate"},
		{"Sec-Fetch-Site", "none"}, {"Sec-Fetch-User", "?1"}, {"Priority", "u=0, i"}, {"Te", "trailers"},
	}
	// Safari 18 on macOS (Web Inspector).
	hdrSafari = [][2]string{
		{"Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"},
		{"Sec-Fetch-Site", "none"}, {"Accept-Encoding", "gzip, deflate, br"}, {"Sec-Fetch-Mode", "navigate"},
		{"User-Agent", uaSafari}, {"Accept-Language", "en-GB,en;q=0.9"}, {"Sec-Fetch-Dest", "document"}, {"Priority", "u=0, i"},
	}
	// Pale Moon 33 (UXP, forked before Firefox added Fetch Metadata in
	// version 90, so no Sec-Fetch-*; Accept-Encoding with br).
	hdrPaleMoon = [][2]string{
		{"User-Agent", uaPaleMoon},
		{"Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"},
		{"Accept-Language", "en-US,en;q=0.5"}, {"Accept-Encoding", "gzip, deflate, br"},
		{"Connection", "keep-alive"}, {"Upgrade-Insecure-Requests", "1"},
	}
	// Google's crawlers (Googlebot, Storebot-Google): no Accept-Language,
	// no client hints or Fetch Metadata.
	hdrGoogleCrawler = func(ua string) [][2]string {
		return [][2]string{
			{"Accept", "text/html,application/xhtml+xml,application/signed-exchange;v=b3,application/xml;q=0.9,*/*;q=0.8"},
			{"From", "googlebot(at)googlebot.com"}, {"User-Agent", ua}, {"Accept-Encoding", "gzip, deflate, br"},
		}
	}
	hdrBot = func(ua string) [][2]string {
		return [][2]string{{"User-Agent", ua}, {"Accept", "*/*"}, {"Accept-Encoding", "gzip, br"}}
	}
)

const (
	uaPaleMoon     = "Mozilla/5.0 (X11; Linux x86_64; rv:102.0) Gecko/20100101 Goanna/6.7 Firefox/102.0 PaleMoon/33.3.1"
	uaStorebot     = "Mozilla/5.0 (X11; Linux x86_64; Storebot-Google/1.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/79.0.3945.88 Safari/537.36"
	uaStorebotMob  = "Mozilla/5.0 (Linux; Android 8.0; Pixel 2 Build/OPD3.170816.012; Storebot-Google/1.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/81.0.4044.138 Mobile Safari/537.36"
	uaEdge         = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0"
	uaChromeMobile = "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36"
)

// client is a kind of request: a User-Agent with its headers, from
// addresses, and the targets it asks for.
type client struct {
	name    string
	headers [][2]string
	ips     []string
	extra   []string // targets beyond the common ones
	methods []string // beyond GET
}

// Addresses: a home address (documentation range), the crawlers' own
// (from their published lists), networks Anubis's lists name.
const (
	ipHome      = "203.0.113.7"
	ipHome6     = "2001:db8:1::7"
	ipGoogle    = "66.249.66.1"
	ipGoogle6   = "2001:4860:4801:10::1"
	ipBing      = "157.55.39.1"
	ipApple     = "17.241.208.170"
	ipDDG       = "104.43.54.127"
	ipQwant     = "194.187.171.5"
	ipMojeek    = "5.102.173.70"
	ipYandex    = "5.255.231.10"
	ipTelegram  = "149.154.161.200"
	ipVK        = "95.142.206.10"
	ipOpenAI    = "20.171.206.5"
	ipCCBot     = "18.97.9.170"
	ipArchive   = "207.241.224.5"
	ipAlibaba   = "8.208.0.9"
	ipHuawei    = "1.178.32.9"
	ipLyrenth   = "46.224.73.201"
	ipXAI       = "69.12.56.9"
	ipPrivate   = "10.0.0.5"
	ipPrivate6  = "fd00::5"
	ipUptime    = "3.12.251.153"
	ipArchLinux = "159.69.213.214"
)

func diffClients() []client {
	browser := func(name string, h [][2]string, ips ...string) client {
		return client{name: name, headers: h, ips: ips, extra: []string{"/search?q=anubis", "/wp-login.php", "/.git/config"}, methods: []string{"POST", "HEAD"}}
	}
	without := func(h [][2]string, drop ...string) [][2]string {
		var out [][2]string
	next:
		for _, kv := range h {
			for _, d := range drop {
				if kv[0] == d {
					continue next
				}
			}
			out = append(out, kv)
		}
		return out
	}
	with := func(h [][2]string, add ...[2]string) [][2]string {
		return append(append([][2]string(nil), h...), add...)
	}
	replaceUA := func(h [][2]string, ua string) [][2]string {
		out := append([][2]string(nil), h...)
		for i := range out {
			if out[i][0] == "User-Agent" {
				out[i][1] = ua
			}
		}
		return out
	}
	bot := func(name, ua string, ips ...string) client {
		return client{name: name, headers: hdrBot(ua), ips: ips, extra: []string{"/feed.xml", "/user/repo.rss"}}
	}
	return []client{
		browser("chrome", hdrChrome, ipHome, ipHome6, ipPrivate, ipAlibaba),
		browser("chrome, no Accept-Language", without(hdrChrome, "Accept-Language"), ipHome),
		browser("chrome, no Accept", without(hdrChrome, "Accept"), ipHome),
		browser("chrome mobile", replaceUA(hdrChrome, uaChromeMobile), ipHome),
		browser("edge", replaceUA(hdrChrome, uaEdge), ipHome, ipHuawei),
		browser("firefox", hdrFirefox, ipHome, ipHome6, ipPrivate6),
		browser("firefox ai", with(hdrFirefox, [2]string{"X-Firefox-Ai", "1"}), ipHome),
		browser("safari", hdrSafari, ipHome),
		browser("iphone", replaceUA(hdrSafari, uaIPhone), ipHome),
		browser("pale moon", hdrPaleMoon, ipHome),
		browser("headless chrome", replaceUA(hdrChrome, uaHeadless), ipHome),
		browser("lightpanda", [][2]string{{"User-Agent", "Lightpanda/1.0"}, {"Accept", "*/*"}}, ipHome),
		browser("lightpanda hints", with(hdrChrome, [2]string{"Sec-Ch-Ua", `"Lightpanda";v="1"`}), ipHome),
		browser("msie", [][2]string{{"User-Agent", "Mozilla/5.0 (compatible; MSIE 10.0; Windows NT 6.1; Trident/6.0)"}, {"Accept", "text/html, application/xhtml+xml, */*"}, {"Accept-Language", "en-US"}}, ipHome),
		browser("windows 98", [][2]string{{"User-Agent", "Mozilla/4.0 (compatible; MSIE 5.5; Windows 98; Win 9x 4.90)"}, {"Accept", "*/*"}}, ipHome),
		browser("opera presto", [][2]string{{"User-Agent", "Opera/9.80 (Windows NT 6.1; WOW64) Presto/2.12.388 Version/12.18"}, {"Accept", "text/html, */*"}, {"Accept-Language", "en"}}, ipHome),
		browser("dillo", [][2]string{{"User-Agent", "Dillo/3.1.1"}, {"Accept", "text/html,image/png,image/*;q=0.8,*/*;q=0.5"}, {"Accept-Encoding", "gzip, deflate, br"}, {"Dnt", "1"}, {"X-Http-Protocol", "HTTP/1.1"}}, ipHome),
		browser("netsurf", [][2]string{{"User-Agent", "NetSurf/3.11 (Linux)"}, {"Accept", "*/*"}, {"Accept-Language", "en"}}, ipHome),
		browser("lynx", [][2]string{{"User-Agent", "Lynx/2.9.0dev.12 libwww-FM/2.14 SSL-MM/1.4.1 GNUTLS/3.7.9"}, {"Accept", "text/html, text/plain, */*;q=0.01"}, {"Accept-Language", "en"}}, ipHome),
		browser("cloudflare worker", with(hdrBot("Mozilla/5.0 (compatible; worker)"), [2]string{"Cf-Worker", "example.workers.dev"}), ipHome),
		{name: "googlebot", headers: hdrGoogleCrawler(uaGooglebot), ips: []string{ipGoogle, ipGoogle6, ipHome}, extra: []string{"/sitemap.xml"}},
		{name: "googlebot smartphone", headers: hdrGoogleCrawler(uaGooglebotSmartphone), ips: []string{ipGoogle, ipHome}},
		{name: "storebot", headers: hdrGoogleCrawler(uaStorebot), ips: []string{ipGoogle}},
		{name: "storebot mobile", headers: hdrGoogleCrawler(uaStorebotMob), ips: []string{ipGoogle}},
		bot("bingbot", "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)", ipBing, ipHome),
		bot("applebot", "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/13.1.1 Safari/605.1.15 (Applebot/0.1; +http://www.apple.com/go/applebot)", ipApple, ipHome),
		bot("duckduckbot", "DuckDuckBot/1.1; (+http://duckduckgo.com/duckduckbot.html)", ipDDG, ipHome),
		bot("qwantbot", "Mozilla/5.0 (compatible; Qwantbot/1.0_4193332; +https://help.qwant.com/bot/)", ipQwant, ipHome),
		bot("mojeekbot", "Mozilla/5.0 (compatible; MojeekBot/0.11; +https://www.mojeek.com/bot.html)", ipMojeek, ipHome),
		bot("yandexbot", "Mozilla/5.0 (compatible; YandexBot/3.0; +http://yandex.com/bots)", ipYandex, ipHome),
		bot("kagibot", "Mozilla/5.0 (compatible; Kagibot/1.0; +https://kagi.com/bot)", "216.18.205.234", ipHome),
		bot("marginalia", "search.marginalia.nu", "193.183.0.162", ipHome),
		bot("ccbot", "CCBot/2.0 (https://commoncrawl.org/faq/)", ipCCBot, ipHome),
		bot("internet archive", "Mozilla/5.0 (compatible; archive.org_bot +http://archive.org/details/archive.org_bot)", ipArchive),
		bot("gptbot", uaGPTBot, ipOpenAI, ipHome),
		bot("chatgpt-user", "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko); compatible; ChatGPT-User/1.0; +https://openai.com/bot", ipHome),
		bot("oai-searchbot", "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko); compatible; OAI-SearchBot/1.0; +https://openai.com/searchbot", ipHome),
		bot("claudebot", "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; ClaudeBot/1.0; +claudebot@anthropic.com)", ipHome),
		bot("perplexitybot", "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; PerplexityBot/1.0; +https://perplexity.ai/perplexitybot)", ipHome),
		bot("bytespider", "Mozilla/5.0 (Linux; Android 5.0) AppleWebKit/537.36 (KHTML, like Gecko) Mobile Safari/537.36 (compatible; Bytespider; spider-feedback@bytedance.com)", ipHome),
		bot("amazonbot", "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_10_1) AppleWebKit/600.2.5 (KHTML, like Gecko) Version/8.0.2 Safari/600.2.5 (Amazonbot/0.1; +https://developer.amazon.com/support/amazonbot)", ipHome),
		bot("meta-externalagent", "meta-externalagent/1.1 (+https://developers.facebook.com/docs/sharing/webmasters/crawler)", ipHome),
		bot("petalbot", "Mozilla/5.0 (Linux; Android 7.0;) AppleWebKit/537.36 (KHTML, like Gecko) Mobile Safari/537.36 (compatible; PetalBot;+https://webmaster.petalsearch.com/site/petalbot)", ipHome),
		bot("xai", "code-review-sourcing/1.0 (+xai-research)", ipXAI, ipHome),
		bot("lyrenth", "AIWebIndex/1.2 (+https://lyrenth.com/bot)", ipLyrenth, ipHome),
		bot("custom async", "Custom-AsyncHttpClient", ipHome),
		bot("us ai scraper", "Mozilla/5.0 (compatible; scraper; +https://github.com/US-Artificial-Intelligence/scraper)", ipHome),
		bot("uptimerobot", "Mozilla/5.0+(compatible; UptimeRobot/2.0; http://www.uptimerobot.com/)", ipUptime, ipHome),
		bot("updown", "updown.io daemon 2.11", "45.32.74.41", ipHome),
		bot("telegram", "TelegramBot (like TwitterBot)", ipTelegram, ipHome),
		bot("vk", "Mozilla/5.0 (compatible; vkShare; +http://vk.com/dev/Share)", ipVK, ipHome),
		bot("slack", "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)", ipHome),
		bot("discord", "Mozilla/5.0 (compatible; Discordbot/2.0; +https://discordapp.com)", ipHome),
		bot("mastodon", "Mastodon/4.3.2 (http.rb/5.2.0; +https://mastodon.social/) Bot", ipHome),
		bot("miniflux", uaMiniflux, ipHome),
		bot("freshrss", "FreshRSS/1.24.3 (Linux; https://freshrss.org)", ipHome),
		bot("netnewswire", "NetNewsWire (RSS Reader; https://netnewswire.com/)", ipHome),
		bot("feedly", "Feedly/1.0 (+http://www.feedly.com/fetcher.html; 12 subscribers; like FeedFetcher-Google)", ipHome),
		{name: "curl", headers: [][2]string{{"User-Agent", "curl/8.5.0"}, {"Accept", "*/*"}}, ips: []string{ipHome, ipPrivate}, extra: []string{"/api/v1/items", "/.git/config"}, methods: []string{"POST", "HEAD"}},
		{name: "wget", headers: [][2]string{{"User-Agent", "Wget/1.21.4"}, {"Accept", "*/*"}, {"Accept-Encoding", "identity"}, {"Connection", "Keep-Alive"}}, ips: []string{ipHome}},
		{name: "python-requests", headers: [][2]string{{"User-Agent", "python-requests/2.32.3"}, {"Accept-Encoding", "gzip, deflate"}, {"Accept", "*/*"}, {"Connection", "keep-alive"}}, ips: []string{ipHome}, methods: []string{"POST"}},
		{name: "scrapy", headers: [][2]string{{"User-Agent", "Scrapy/2.11.2 (+https://scrapy.org)"}, {"Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}, {"Accept-Language", "en"}, {"Accept-Encoding", "gzip, deflate, br"}}, ips: []string{ipHome}},
		{name: "go-http-client", headers: [][2]string{{"User-Agent", "Go-http-client/1.1"}, {"Accept-Encoding", "gzip"}}, ips: []string{ipHome}, extra: []string{"/example/module?go-get=1"}},
		{name: "httpie", headers: [][2]string{{"User-Agent", "HTTPie/3.2.2"}, {"Accept-Encoding", "gzip, deflate, br"}, {"Accept", "application/json, */*;q=0.5"}, {"Connection", "keep-alive"}}, ips: []string{ipHome}, methods: []string{"POST"}},
		{name: "json api", headers: [][2]string{{"User-Agent", "okhttp/4.12.0"}, {"Accept", "application/json"}, {"Accept-Encoding", "gzip"}}, ips: []string{ipHome}, methods: []string{"POST", "DELETE"}},
		{name: "node fetch", headers: [][2]string{{"Accept", "*/*"}, {"Accept-Language", "*"}, {"Sec-Fetch-Mode", "cors"}, {"User-Agent", "node"}, {"Accept-Encoding", "gzip, deflate"}}, ips: []string{ipHome}},
		{name: "git", headers: [][2]string{{"User-Agent", "git/2.43.0"}, {"Accept", "*/*"}, {"Accept-Encoding", "deflate, gzip, br, zstd"}, {"Accept-Language", "en-US, *;q=0.9"}, {"Pragma", "no-cache"}, {"Cache-Control", "no-cache"}, {"Git-Protocol", "version=2"}}, ips: []string{ipHome}, extra: []string{"/user/repo.git/info/refs?service=git-upload-pack"}, methods: []string{"POST"}},
		{name: "git, bare", headers: [][2]string{{"User-Agent", "git/2.39.5"}, {"Accept", "*/*"}}, ips: []string{ipHome}, extra: []string{"/user/repo.git/info/refs?service=git-upload-pack"}},
		{name: "jgit", headers: [][2]string{{"User-Agent", "JGit/6.10.0.202406032230-r"}, {"Accept", "*/*"}, {"Accept-Encoding", "gzip"}, {"Pragma", "no-cache"}, {"Cache-Control", "no-cache"}}, ips: []string{ipHome}},
		{name: "docker", headers: [][2]string{{"User-Agent", "docker/27.3.1 go/go1.22.7 git-commit/41ca978 kernel/6.8.0 os/linux arch/amd64 UpstreamClient(Docker-Client/27.3.1 \\(linux\\))"}, {"Accept", "application/vnd.docker.distribution.manifest.v2+json"}, {"Baggage", "trigger=pull"}, {"Accept-Encoding", "gzip"}}, ips: []string{ipHome}, extra: []string{"/v2/library/alpine/manifests/latest"}},
		{name: "podman", headers: [][2]string{{"User-Agent", "containers/5.32.2 (github.com/containers/image)"}, {"Accept", "application/vnd.oci.image.index.v1+json"}, {"Docker-Distribution-Api-Version", "registry/2.0"}}, ips: []string{ipHome}, extra: []string{"/v2/library/alpine/manifests/latest"}},
		{name: "limnoria", headers: [][2]string{{"User-Agent", "Mozilla/5.0 (compatible; utils.web Limnoria module)"}, {"X-Http-Version", "HTTP/1.1"}}, ips: []string{ipArchLinux, ipHome}},
		{name: "no user agent", headers: [][2]string{{"Accept", "*/*"}}, ips: []string{ipHome}, methods: []string{"POST"}},
		{name: "empty user agent", headers: [][2]string{{"User-Agent", ""}, {"Accept", "*/*"}}, ips: []string{ipHome}},
	}
}

// commonTargets are asked by every client; clients add their own.
var commonTargets = []string{"/", "/robots.txt", "/.well-known/security.txt", "/sitemap.xml", "/favicon.ico", "/api/v1/items"}

// diffCorpus builds the corpus: every client asks for the common targets
// from its first address with GET, for its own targets and with its other
// methods; every other address asks for /.
func diffCorpus() []diffRequest {
	var out []diffRequest
	for _, c := range diffClients() {
		add := func(method, target, ip string) {
			out = append(out, diffRequest{Name: c.name, Method: method, Target: target, IP: ip, Headers: c.headers})
		}
		for _, t := range append(append([]string(nil), commonTargets...), c.extra...) {
			add("GET", t, c.ips[0])
		}
		for _, m := range c.methods {
			add(m, "/", c.ips[0])
			add(m, "/api/v1/items", c.ips[0])
		}
		for _, ip := range c.ips[1:] {
			add("GET", "/", ip)
			add("GET", "/robots.txt", ip)
		}
	}
	return out
}

// diffDNSTable is the DNS of the corpus: Yandex's and Telegram's crawlers
// have forward-confirmed names; VK's name does not resolve back; the home
// address has a name outside every crawler's domain.
func diffDNSTable() diffDNS {
	return diffDNS{
		Reverse: map[string][]string{
			ipYandex:   {"5-255-231-10.spider.yandex.com."},
			ipTelegram: {"s149154161200.ptr.telegram.org."},
			ipVK:       {"snipster12.go.mail.ru."},
			ipHome:     {"host-7.example.net."},
			ipGoogle:   {"crawl-66-249-66-1.googlebot.com."},
		},
		Forward: map[string][]string{
			"5-255-231-10.spider.yandex.com":  {ipYandex},
			"s149154161200.ptr.telegram.org":  {ipTelegram},
			"snipster12.go.mail.ru":           {"95.142.206.99"},
			"host-7.example.net":              {ipHome},
			"crawl-66-249-66-1.googlebot.com": {ipGoogle},
		},
	}
}

// TestAnubisDiffCorpus keeps corpus.json and dns.json what diffCorpus and
// diffDNSTable say (-anubisdiff.corpus rewrites them); the recorded
// decisions of Anubis are for exactly these requests.
func TestAnubisDiffCorpus(t *testing.T) {
	t.Parallel()
	for name, v := range map[string]any{"corpus.json": diffCorpus(), "dns.json": diffDNSTable()} {
		want, err := json.MarshalIndent(v, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, '\n')
		path := filepath.Join("testdata", "anubisdiff", name)
		if *updateCorpus {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s is not what the corpus says: run go test -run TestAnubisDiffCorpus -anubisdiff.corpus, then record Anubis's decisions again (testdata/anubisdiff/record.sh)", path)
		}
	}
}

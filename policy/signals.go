package policy

import (
	"slices"
	"strings"
)

// Signal is a built-in observation about a request that adds weight.
type Signal uint8

// The built-in signals.
const (
	// SignalUATLSMismatch: the User-Agent claims a browser whose TLS stack
	// is not the one the known-client table has for this JA4; or it names
	// a non-browser client (curl, Wget, git, Go-http-client, Python's,
	// Node's, Java's: clientClaims) over a TLS stack, or an HTTP/2
	// connection preface, that the known-client tables give to another
	// client.
	SignalUATLSMismatch Signal = iota
	// SignalBrowserHeadersMissing: a claimed browser without the headers
	// every browser sends, or with a header order no browser uses.
	SignalBrowserHeadersMissing
	// SignalProtoMismatch: a claimed modern browser on HTTP/1.1 over TLS.
	SignalProtoMismatch
	// SignalFakeCrawler: a well-known crawler's User-Agent from an address
	// that is not the crawler's.
	SignalFakeCrawler
	// SignalVerifiedCrawler: a well-known crawler whose address verified.
	SignalVerifiedCrawler
	// SignalHeadless: an automated browser that says so: HeadlessChrome (or
	// PhantomJS, SlimerJS) in the User-Agent, or the HeadlessChrome brand in
	// Sec-CH-UA.
	SignalHeadless
	// SignalHostingASN: a User-Agent that claims a browser (without a bot
	// token) from an address of a hosting or cloud network (the policy's
	// hosting_asns, by default lists/hosting-asns.txt). People browse from
	// homes, offices and phones; scrapers rent servers. Needs geo.asn_db.
	SignalHostingASN
	// SignalTLSHTTPMismatch: a parrot. The TLS stack is a browser's (the
	// known-client table's family for the JA4 is chrome, edge, firefox,
	// safari or ios) and the HTTP layer is another client's: on HTTP/2 the
	// connection's SETTINGS, WINDOW_UPDATE and PRIORITY frames are those
	// the HTTP/2 known-client table has for another family
	// (Request.H2Family: Go's x/net defaults under a utls Chrome
	// ClientHello, say), or its first request's pseudo-header order is not
	// that browser's; on HTTP/1.1 over Chromium's TLS, the header order
	// does not start Host, Connection, as Chromium's always does. Whatever
	// the User-Agent says.
	SignalTLSHTTPMismatch
	numSignals
)

var signalNames = [numSignals]string{
	"ua_tls_mismatch", "browser_headers_missing", "proto_mismatch", "fake_crawler", "verified_crawler",
	"headless", "hosting_asn", "tls_http_mismatch",
}

// defaultSignalWeights are the weights a policy gets unless its signals:
// section says otherwise.
var defaultSignalWeights = [numSignals]int{30, 10, 10, 50, 0, 20, 20, 30}

// String returns the signal's name as policy files write it.
func (s Signal) String() string {
	if s < numSignals {
		return signalNames[s]
	}
	return "unknown"
}

func parseSignal(name string) (Signal, bool) {
	for i, n := range signalNames {
		if n == name {
			return Signal(i), true
		}
	}
	return 0, false
}

// Signals is a set of signals.
type Signals uint8

// Has reports whether s is in the set.
func (ss Signals) Has(s Signal) bool { return ss&(1<<s) != 0 }

// All yields the signals in the set in a fixed order.
func (ss Signals) All(yield func(Signal) bool) {
	for s := range numSignals {
		if ss.Has(s) && !yield(s) {
			return
		}
	}
}

// brand is the browser a User-Agent claims.
type brand uint8

const (
	brandNone brand = iota
	brandChromium
	brandFirefox
	brandSafari
	brandIOS // any browser on iOS or iPadOS: WebKit and Apple's TLS
)

// uaClaim is what a User-Agent says about the client.
type uaClaim struct {
	brand    brand
	major    int
	bot      bool // a bot convention ("compatible;", "+http", a bot/ token) or text before "Mozilla/5.0 ("
	headless bool // HeadlessChrome, PhantomJS or SlimerJS
	// legacy: a Gecko fork that names a Firefox version for
	// compatibility but is older underneath (Goanna: Pale Moon, Basilisk):
	// no Fetch Metadata (Firefox 90), so not held to a modern browser's
	// headers, protocol or header order.
	legacy bool
}

// parseUA reads the browser claim of a User-Agent without allocating. A
// browser claim is "Mozilla/5.0 (" followed by a browser's product token;
// it is read even when the User-Agent also carries a bot convention
// ("Mozilla/5.0 (compatible; Bot/1.0; +url)", a previewer's
// "… Safari/601.2.4 facebookexternalhit/1.1", a monitor's
// "Better Uptime Bot Mozilla/5.0 (…) Chrome/…"): such a client is marked
// bot, and its browser part is still held to its TLS stack.
func parseUA(ua string) uaClaim {
	var c uaClaim
	c.headless = strings.Contains(ua, "HeadlessChrom") || strings.Contains(ua, "PhantomJS") || strings.Contains(ua, "SlimerJS")
	at := strings.Index(ua, "Mozilla/5.0 (")
	if at < 0 {
		return c
	}
	c.bot = at > 0 || strings.Contains(ua, "compatible;") || strings.Contains(ua, "+http") ||
		strings.Contains(ua, "bot/") || strings.Contains(ua, "Bot/") ||
		strings.Contains(ua, "bot-") || strings.Contains(ua, "Bot-") // Storebot-Google/1.0, AdsBot-Google
	if strings.Contains(ua, "(iPhone") || strings.Contains(ua, "(iPad") {
		c.brand = brandIOS
		c.major = versionAfter(ua, "Version/")
		if c.major == 0 {
			c.major = 17 // CriOS/FxiOS carry their own versions; WebKit is current
		}
		return c
	}
	if v := versionAfter(ua, "Firefox/"); v > 0 {
		c.brand, c.major = brandFirefox, v
		c.legacy = strings.Contains(ua, "Goanna/") || strings.Contains(ua, "PaleMoon/") || strings.Contains(ua, "Basilisk/")
		return c
	}
	if v := versionAfter(ua, "Chrome/"); v > 0 {
		c.brand, c.major = brandChromium, v
		return c
	}
	if v := versionAfter(ua, "Chromium/"); v > 0 {
		c.brand, c.major = brandChromium, v
		return c
	}
	if strings.Contains(ua, "Safari/") {
		if v := versionAfter(ua, "Version/"); v > 0 {
			c.brand, c.major = brandSafari, v
		}
	}
	return c
}

// versionAfter returns the integer that follows key in s, or 0.
func versionAfter(s, key string) int {
	i := strings.Index(s, key)
	if i < 0 {
		return 0
	}
	n := 0
	for _, b := range []byte(s[i+len(key):]) {
		if b < '0' || b > '9' || n > 10000 {
			break
		}
		n = n*10 + int(b-'0')
	}
	return n
}

// familyConsistent reports whether a TLS family is one the claimed brand
// uses. Chromium-based browsers share one TLS stack.
func familyConsistent(b brand, family string) bool {
	switch b {
	case brandChromium:
		return family == "chrome" || family == "edge"
	case brandFirefox:
		return family == "firefox"
	case brandSafari, brandIOS:
		return family == "safari" || family == "ios"
	}
	return true
}

// signals returns the signals that fire for r (before the policy's
// signals: section switches any off) and the User-Agent's claim.
func (p *Policy) signals(r *Request, ua string) (Signals, uaClaim) {
	var ss Signals
	switch r.CrawlerVerified {
	case CrawlerFailed:
		ss |= 1 << SignalFakeCrawler
	case CrawlerVerified:
		ss |= 1 << SignalVerifiedCrawler
	}
	c := parseUA(ua)
	if c.headless {
		ss |= 1 << SignalHeadless
	}
	if r.TLS && tlsHTTPMismatch(r) {
		ss |= 1 << SignalTLSHTTPMismatch
	}
	if c.brand == brandNone {
		if clientLie(r, ua) {
			ss |= 1 << SignalUATLSMismatch
		}
		return ss, c
	}
	if c.brand == brandChromium && strings.Contains(headerValue(r, "Sec-Ch-Ua"), "HeadlessChrome") {
		ss |= 1 << SignalHeadless
	}
	if r.ClientFamily != "" && !familyConsistent(c.brand, r.ClientFamily) {
		ss |= 1 << SignalUATLSMismatch
	}
	if c.bot {
		// A declared bot is not held to the headers and protocols of
		// browsers, nor to where people browse from.
		return ss, c
	}
	if browserHeadersMissing(r, c) {
		ss |= 1 << SignalBrowserHeadersMissing
	}
	if r.TLS && r.Proto == "HTTP/1.1" && modernBrowser(c) && !isUpgrade(r) {
		ss |= 1 << SignalProtoMismatch
	}
	if r.ASN != 0 && p.hosting.contains(r.ASN) {
		ss |= 1 << SignalHostingASN
	}
	return ss, c
}

// familyBrand is the browser whose TLS stack a known-client family is;
// brandNone for clients that are not browsers.
func familyBrand(family string) brand {
	switch family {
	case "chrome", "edge":
		return brandChromium
	case "firefox":
		return brandFirefox
	case "safari", "ios":
		return brandSafari
	}
	return brandNone
}

// tlsHTTPMismatch reports a browser's TLS stack (by the JA4's known-client
// family) under another client's HTTP. On HTTP/2: the connection preface is
// known as another family's (r.H2Family), or the first request's four
// pseudo-headers are not in the browser's order; an HTTP/2 fingerprint the
// table does not know, and a first request with other than the four
// pseudo-headers of a GET (an extended CONNECT's :protocol), say nothing.
// On HTTP/1.1 over Chromium's TLS: the header names do not start Host,
// Connection (Chromium's HttpNetworkTransaction writes these two first on
// every request, "Connection: Upgrade" on a WebSocket handshake); other
// browsers' HTTP/1.1 orders are not checked.
func tlsHTTPMismatch(r *Request) bool {
	b := familyBrand(r.ClientFamily)
	switch {
	case b == brandNone:
		return false
	case r.H2FP != "":
		if r.H2Family != "" && !familyConsistent(b, r.H2Family) {
			return true
		}
		letters, n, ok := pseudoLetters(r.H2FP)
		return ok && n == len(letters) && !pseudoLettersOK(b, string(letters[:])) // does not escape: compared only
	case r.Proto == "HTTP/1.1" && b == brandChromium && len(r.HeaderOrder) > 0:
		o := r.HeaderOrder
		return len(o) < 2 || !strings.EqualFold(o[0], "host") || !strings.EqualFold(o[1], "connection")
	}
	return false
}

// pseudoLetters returns the initials of an h2fp's last field, the first
// request's pseudo-headers ("m,a,s,p" → "masp"), in letters[:n]; ok is
// false when there are more than four.
func pseudoLetters(h2fp string) (letters [4]byte, n int, ok bool) {
	i := strings.LastIndexByte(h2fp, '|')
	for _, b := range []byte(h2fp[i+1:]) {
		if b == ',' {
			continue
		}
		if n == len(letters) {
			return letters, n, false
		}
		letters[n] = b
		n++
	}
	return letters, n, true
}

// browserAgrees reports whether r's fingerprints agree with the browser c
// claims: see Decision.BrowserAgrees.
func browserAgrees(r *Request, c uaClaim) bool {
	if c.brand == brandNone || c.bot || r.ClientFamily == "" || !familyConsistent(c.brand, r.ClientFamily) {
		return false
	}
	if r.Proto != "HTTP/2.0" || r.H2FP == "" {
		return true
	}
	if r.H2Family != "" && !familyConsistent(c.brand, r.H2Family) {
		return false
	}
	letters, n, ok := pseudoLetters(r.H2FP)
	return ok && pseudoLettersOK(c.brand, string(letters[:n]))
}

// modernBrowser reports a browser version that speaks HTTP/2 and sends
// Sec-Fetch-* headers.
func modernBrowser(c uaClaim) bool {
	if c.legacy {
		return false
	}
	switch c.brand {
	case brandChromium:
		return c.major >= 80
	case brandFirefox:
		return c.major >= 90
	case brandSafari, brandIOS:
		return c.major >= 17
	}
	return false
}

func isUpgrade(r *Request) bool {
	v := headerValue(r, "Upgrade")
	return v != ""
}

// headerValue returns the first value of a header whose name is given in
// canonical form, without allocating.
func headerValue(r *Request, canonical string) string {
	if v := r.Header[canonical]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func hasHeader(r *Request, canonical string) bool {
	_, ok := r.Header[canonical]
	return ok
}

// browserHeadersMissing checks the headers every modern browser sends on
// every request: Accept-Language, Accept (but for WebSocket handshakes);
// over TLS also Sec-Fetch-Mode and, for Chromium, Sec-Ch-Ua. It also checks
// the order of the pseudo-headers (HTTP/2) or that Host comes first
// (HTTP/1.1) when the order is known.
func browserHeadersMissing(r *Request, c uaClaim) bool {
	if !hasHeader(r, "Accept-Language") {
		return true
	}
	if !hasHeader(r, "Accept") && !isUpgrade(r) { // WebSocket handshakes carry no Accept
		return true
	}
	if r.TLS && modernBrowser(c) {
		if !hasHeader(r, "Sec-Fetch-Mode") {
			return true
		}
		if c.brand == brandChromium && c.major >= 90 && !hasHeader(r, "Sec-Ch-Ua") {
			return true
		}
	}
	if len(r.HeaderOrder) == 0 || c.legacy {
		return false // the order of a legacy Gecko fork's headers is not known
	}
	if r.HeaderOrder[0] != "" && r.HeaderOrder[0][0] == ':' {
		// Pseudo-header orders are known for HTTP/2; browsers' HTTP/3
		// stacks are younger and differ.
		return r.Proto == "HTTP/2.0" && !pseudoOrderOK(c.brand, r.HeaderOrder)
	}
	if r.Proto == "HTTP/1.1" {
		return !strings.EqualFold(r.HeaderOrder[0], "host")
	}
	return false
}

// pseudoOrderOK checks the pseudo-header order against the one the claimed
// browser uses.
func pseudoOrderOK(b brand, order []string) bool {
	var buf [4]byte
	n := 0
	for _, h := range order {
		if h == "" || h[0] != ':' {
			break
		}
		if n < len(buf) && len(h) > 1 {
			buf[n] = h[1]
			n++
		}
	}
	return pseudoLettersOK(b, string(buf[:n])) // does not escape: compared only
}

// pseudoLettersOK checks pseudo-header initials in order (":method",
// ":authority", ":scheme", ":path" → "masp") against the claimed browser:
// Chromium m,a,s,p; Firefox m,p,a,s; Safari m,s,p,a or m,s,a,p.
func pseudoLettersOK(b brand, got string) bool {
	switch b {
	case brandChromium:
		return got == "masp"
	case brandFirefox:
		return got == "mpas"
	case brandSafari, brandIOS:
		return got == "mspa" || got == "msap"
	}
	return true
}

// IsNavigation reports whether r is a top-level navigation that can be
// answered with an HTML challenge page: a GET (or HEAD) whose Sec-Fetch-Mode
// is navigate, or, from clients that do not send Sec-Fetch-Mode, a GET that
// accepts text/html and is not an XMLHttpRequest.
func IsNavigation(r *Request) bool {
	if r.Method != "GET" && r.Method != "HEAD" {
		return false
	}
	if m := headerValue(r, "Sec-Fetch-Mode"); m != "" {
		return m == "navigate"
	}
	if headerValue(r, "X-Requested-With") != "" {
		return false
	}
	return strings.Contains(headerValue(r, "Accept"), "text/html")
}

// clientClaims are the non-browser clients a User-Agent can name at its
// start, each with the known-client families whose TLS stack (and HTTP/2
// preface) it may come with: its own, and the TLS libraries it is built
// on (openssl and gnutls are the rows of openssl s_client and
// gnutls-cli, whose ClientHellos a client built on the library may
// share). The tokens and families are honest-clients.yaml's.
var clientClaims = [...]struct {
	token  string // the User-Agent starts with it, then "/" (or ends, where exact)
	exact  bool   // the token may also be the whole User-Agent ("node", "undici")
	accept []string
}{
	{"curl", false, []string{"curl", "git", "openssl", "gnutls"}}, // git's is libcurl-gnutls
	{"Wget", false, []string{"wget", "openssl", "gnutls"}},
	{"git", false, []string{"git", "curl", "wget", "openssl", "gnutls"}},
	{"Go-http-client", false, []string{"go"}},
	{"python-requests", false, []string{"python", "openssl"}},
	{"python-httpx", false, []string{"python", "openssl"}},
	{"Python-urllib", false, []string{"python", "openssl"}},
	{"aiohttp", false, []string{"python", "openssl"}},
	{"node-fetch", true, []string{"node", "openssl"}},
	{"undici", true, []string{"node", "openssl"}},
	{"axios", true, []string{"node", "openssl"}},
	{"node", true, []string{"node", "openssl"}},
	{"Java-http-client", false, []string{"java"}},
	{"Java", false, []string{"java", "android"}},
	{"Apache-HttpClient", false, []string{"java", "android"}},
	{"okhttp", false, []string{"java", "android"}},
}

// clientLie reports a User-Agent that names a non-browser client
// (clientClaims) while the JA4's known-client family, or the HTTP/2
// preface's, is a client it is not built on: python-requests over Go's
// TLS, curl over Python's. An unknown fingerprint (family "") says
// nothing.
func clientLie(r *Request, ua string) bool {
	if r.ClientFamily == "" && r.H2Family == "" {
		return false
	}
	for _, c := range clientClaims {
		rest, ok := strings.CutPrefix(ua, c.token)
		if !ok || !(strings.HasPrefix(rest, "/") || c.exact && rest == "") {
			continue
		}
		return r.ClientFamily != "" && !slices.Contains(c.accept, r.ClientFamily) ||
			r.H2Family != "" && !slices.Contains(c.accept, r.H2Family)
	}
	return false
}

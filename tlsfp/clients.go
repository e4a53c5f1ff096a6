package tlsfp

// The table of known clients (clients_table.go) is generated and committed:
// `go generate ./tlsfp` fingerprints utls's browser parrots, runs the real
// clients installed on the machine (curl, wget, openssl s_client,
// gnutls-cli, python3, node, java, chromium --headless, Go's net/http)
// against a capture listener on loopback, reads httpfp's capture of
// internal/testcapture's HTTP clients (httpfp/testdata/clients.jsonl, so
// `go generate ./httpfp` comes first: Chromium over HTTP/2 and HTTP/1.1,
// Firefox ESR, curl, git, Node's http2, https and fetch, Python's urllib
// and requests, Java's HttpClient, Go's net/http with and without ALPN
// and x/net/http2, every version captured), and takes the packet captures in
// testdata/tls-clienthellos.jsonl whose client is known (Chrome, Firefox,
// Apple's stack on macOS); a missing program is skipped. Tests and builds
// never need those programs; httpfp's TestKnownClientsLive re-derives the
// rows of the HTTP clients, and httpfp/testdata/clients.jsonl holds their
// capture.
//
//go:generate go run ./internal/genclients -o clients_table.go

// Client is a known client family, as named by the generated table of known
// clients.
type Client struct {
	// Family is the client's family in lower case: "chrome", "firefox",
	// "safari", "ios", "android", "edge", "curl", "git" (git's libcurl,
	// GnuTLS on Debian), "wget", "openssl", "gnutls", "go", "python",
	// "node", "java", …
	Family string
	// Versions is the range of versions seen with this fingerprint, e.g.
	// "120-133" or "8.5.0".
	Versions string
	// Source names where the row came from: a utls parrot or a program run
	// on the machine that generated the table.
	Source string
}

// LookupClient returns the known client whose JA4 fingerprint is ja4. When
// several sources share a JA4 (Edge and Chrome, for instance), the row names
// the browser before the library and lists every source.
func LookupClient(ja4 string) (Client, bool) {
	c, ok := knownClients[ja4]
	return c, ok
}

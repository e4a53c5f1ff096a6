package httpfp

import "strings"

// The table of known HTTP/2 clients (clients_table.go) is generated and
// committed: `go generate ./httpfp` runs the real clients installed on the
// machine (Chromium, Firefox ESR, curl, Node, Go's net/http and
// x/net/http2; see internal/testcapture) against a capture server on
// loopback and keys each by its connection preface. The capture it was made
// from, every request's JA4, h2fp and hfp_r, is testdata/clients.jsonl.
// Tests and builds never need those programs; TestKnownClientsLive re-derives
// the rows from the clients that are installed.
//
//go:generate go run ./internal/genclients -o clients_table.go -capture testdata/clients.jsonl

// Client is a known HTTP/2 client, as named by the generated table.
type Client struct {
	// Family is the client's family, in the words of tlsfp's known-client
	// table: "chrome", "firefox", "curl", "go", …
	Family string
	// Versions is the range of versions seen with this preface.
	Versions string
	// Pseudo is the pseudo-header order of the client's first request, as
	// in the h2fp: "m,a,s,p".
	Pseudo string
	// Source names the programs the row came from and the system they ran
	// on.
	Source string
}

// LookupClient returns the known client whose HTTP/2 connection preface is
// that of h2fp: its first three fields (SETTINGS, WINDOW_UPDATE and
// PRIORITY), which a client's HTTP/2 library writes before any request. The
// pseudo-header order, the last field, is not part of the key (it is the
// easiest to change; Client.Pseudo tells the client's own). A preface with
// an empty SETTINGS frame is never known: too many clients send one.
func LookupClient(h2fp string) (Client, bool) {
	i := strings.LastIndexByte(h2fp, '|')
	if i <= 0 || h2fp[0] == '|' {
		return Client{}, false
	}
	c, ok := knownClients[h2fp[:i]]
	return c, ok
}

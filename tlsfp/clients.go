package tlsfp

//go:generate go run ./internal/genclients -o clients_table.go

// Client is a known client family, as named by the generated table of known
// clients.
type Client struct {
	// Family is the client's family in lower case: "chrome", "firefox",
	// "safari", "ios", "android", "edge", "curl", "wget", "openssl",
	// "gnutls", "go", "python", "node", …
	Family string
	// Versions is the range of versions seen with this fingerprint, e.g.
	// "120-133" or "8.5.0".
	Versions string
	// Source names where the row came from: a utls parrot or a program run
	// on the machine that generated the table.
	Source string
}

// LookupClient returns the known client whose JA4 fingerprint is ja4.
func LookupClient(ja4 string) (Client, bool) {
	c, ok := knownClients[ja4]
	return c, ok
}

package testcapture

import (
	"context"
	"strings"
	"testing"
)

// TestRunGo runs Go's clients, which are always there, and checks that each
// request was fingerprinted over the protocol the client was asked to
// speak. httpfp's TestKnownClientsLive runs every client.
func TestRunGo(t *testing.T) {
	t.Parallel()
	s, err := NewServer()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, c := range Clients() {
		if c.Program != "" {
			continue
		}
		recs, err := Run(context.Background(), s, c)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		for _, r := range recs {
			if r.Client != c.Name || r.Family != "go" || r.Proto != c.Proto || !strings.HasPrefix(r.JA4, "t13d") ||
				r.HFP == "" || (r.Proto == "HTTP/2.0") != (r.H2FP != "") || !strings.HasPrefix(r.Source, "Go ") {
				t.Errorf("%s: %+v", c.Name, r)
			}
		}
	}
}

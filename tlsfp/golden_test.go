package tlsfp

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/maatproxy/maat/internal/testclient"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestParrotsGolden pins the JA4 and JA4_r of every utls parrot (JA4_o
// varies with Chrome's extension shuffling). Rewrite it with
// `go test ./tlsfp -run ParrotsGolden -update` after a deliberate change.
func TestParrotsGolden(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for _, p := range testclient.Parrots() {
		msg, err := testclient.HelloMessage(p.ID, "www.example.org")
		if err != nil {
			t.Fatal(err)
		}
		h, err := ParseHandshake(msg)
		if err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		fp := h.Fingerprint(false)
		fmt.Fprintf(&b, "%s %s %s\n", p.Name, fp.JA4, fp.JA4R)
	}
	const path = "testdata/parrots.golden"
	if *update {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != string(want) {
		t.Errorf("parrot fingerprints differ from %s (go test -update to accept):\n%s", path, got)
	}
}

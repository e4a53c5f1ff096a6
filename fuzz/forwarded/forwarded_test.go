// Package forwardedfuzz holds the fuzz target of package forwarded.
package forwardedfuzz

import (
	"net/netip"
	"strings"
	"testing"
	"unicode"

	"github.com/maatproxy/maat/forwarded"
)

// FuzzClientAddr: whatever a trusted proxy's X-Forwarded-For holds, the
// client is an address, the proxy is taken for it only when the header
// names no one else, and an address written plainly is read as itself.
func FuzzClientAddr(f *testing.F) {
	for _, s := range []string{"1.2.3.4", "1.2.3.4:5678", "[2001:db8::7]:443", "2001:db8::7", `"[::1]"`,
		"unknown", "_hidden", "garbage, 10.0.0.2", "1.2.3.4, , 10.0.0.9", "", ",", "[", "[]:1", "_"} {
		f.Add(s)
	}
	tp := forwarded.Proxies{netip.MustParsePrefix("10.0.0.0/8")}
	peer := netip.MustParseAddr("10.0.0.1")
	f.Fuzz(func(t *testing.T, xff string) {
		got, ok := tp.Client(peer, []string{xff})
		if !ok {
			return
		}
		if !got.IsValid() || got.Zone() != "" || got.Is4In6() {
			t.Fatalf("Client(%q) = %v", xff, got)
		}
		empty := strings.TrimFunc(xff, func(r rune) bool { return r == ',' || unicode.IsSpace(r) }) == ""
		if got == peer && !empty && !strings.Contains(xff, "10.0.0.1") {
			t.Fatalf("Client(%q): the proxy taken for the client", xff)
		}
		if a, err := netip.ParseAddr(strings.TrimSpace(xff)); err == nil && a.Zone() == "" && !tp.Contains(a.Unmap()) && got != a.Unmap() {
			t.Fatalf("Client(%q) = %v, want %v", xff, got, a.Unmap())
		}
	})
}

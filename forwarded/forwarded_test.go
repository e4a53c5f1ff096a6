package forwarded

import (
	"net/netip"
	"testing"
)

func TestClient(t *testing.T) {
	t.Parallel()
	tp := Proxies{netip.MustParsePrefix("10.0.0.0/8")}
	unknown, obf := Hidden("unknown").String(), Hidden("_hidden").String()
	for _, tt := range []struct {
		peer string
		xff  []string
		want string // "" = refused (ok false)
	}{
		{"203.0.113.1", []string{"1.2.3.4"}, "203.0.113.1"},             // untrusted peer: XFF ignored
		{"203.0.113.1", []string{"garbage"}, "203.0.113.1"},             // ... even garbage
		{"10.0.0.1", []string{"1.2.3.4"}, "1.2.3.4"},                    // trusted peer
		{"10.0.0.1", []string{"6.6.6.6, 1.2.3.4, 10.1.1.1"}, "1.2.3.4"}, // right-most untrusted
		{"10.0.0.1", []string{"6.6.6.6", "1.2.3.4"}, "1.2.3.4"},         // several header lines
		{"10.0.0.1", []string{"garbage, 1.2.3.4"}, "1.2.3.4"},           // garbage left of the client is never read
		{"10.0.0.1", nil, "10.0.0.1"},                                   // no header: the proxy's own request
		{"10.0.0.1", []string{"::ffff:1.2.3.4"}, "1.2.3.4"},             // mapped
		{"10.0.0.1", []string{"1.2.3.4:5678"}, "1.2.3.4"},               // with a port
		{"10.0.0.1", []string{"1.2.3.4:5678, 10.9.9.9:80"}, "1.2.3.4"},  // ports all along
		{"10.0.0.1", []string{"[2001:db8::7]:443"}, "2001:db8::7"},      // IPv6 with a port
		{"10.0.0.1", []string{"[2001:db8::7]"}, "2001:db8::7"},          // IPv6 in brackets
		{"10.0.0.1", []string{"2001:db8::7"}, "2001:db8::7"},            // bare IPv6
		{"10.0.0.1", []string{`"[2001:db8::7]:443"`}, "2001:db8::7"},    // quoted (RFC 7239)
		{"10.0.0.1", []string{"1.2.3.4, , 10.1.1.1"}, "1.2.3.4"},        // an empty element
		{"10.0.0.1", []string{"unknown"}, unknown},                      // hidden: counted apart
		{"10.0.0.1", []string{"UNKNOWN, 10.1.1.1"}, unknown},            // case folded
		{"10.0.0.1", []string{"_hidden"}, obf},                          // obfuscated identifier
		{"10.0.0.1", []string{"garbage"}, ""},                           // garbage: refused, never the proxy
		{"10.0.0.1", []string{"garbage, 10.2.2.2"}, ""},                 // garbage right of the trusted hops
		{"10.0.0.1", []string{"1.2.3.4:99999"}, ""},                     // a port out of range
		{"10.0.0.1", []string{"[1.2.3.4]"}, ""},                         // IPv4 in brackets
		{"10.0.0.1", []string{"fe80::1%eth0"}, ""},                      // a zone
		{"10.0.0.1", []string{"_"}, ""},                                 // an empty identifier
		{"10.0.0.1", []string{"_a/b"}, ""},                              // not an identifier
		{"10.0.0.1", []string{"1.2.3.4 5.6.7.8"}, ""},                   // no comma
	} {
		got, ok := tp.Client(netip.MustParseAddr(tt.peer), tt.xff)
		switch {
		case tt.want == "" && ok:
			t.Errorf("Client(%s, %q) = %s, want it refused", tt.peer, tt.xff, got)
		case tt.want != "" && (!ok || got.String() != tt.want):
			t.Errorf("Client(%s, %q) = %s, %t, want %s", tt.peer, tt.xff, got, ok, tt.want)
		}
	}
	if unknown == obf || !netip.MustParsePrefix("100::/64").Contains(Hidden("x")) {
		t.Errorf("hidden clients %s and %s: want distinct addresses in 100::/64", unknown, obf)
	}
}

package fplog

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/netip"
	"regexp"
	"testing"
)

func TestClientIP(t *testing.T) {
	t.Parallel()
	key := []byte("0123456789abcdef0123456789abcdef")
	hexHash := regexp.MustCompile(`^[0-9a-f]{24}$`)
	tests := []struct {
		name, mode, addr string
		want             string // "" = omitted; "HASH" = 24 hex digits
	}{
		{"full_v4", ClientIPFull, "203.0.113.7", "203.0.113.7"},
		{"full_default", "", "203.0.113.7", "203.0.113.7"},
		{"full_v6", ClientIPFull, "2001:db8::1", "2001:db8::1"},
		{"full_mapped", ClientIPFull, "::ffff:203.0.113.7", "203.0.113.7"},
		{"full_zone", ClientIPFull, "fe80::1%eth0", "fe80::1"},
		{"prefix_v4", ClientIPPrefix, "203.0.113.7", "203.0.113.0/24"},
		{"prefix_v6", ClientIPPrefix, "2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"},
		{"prefix_mapped", ClientIPPrefix, "::ffff:203.0.113.7", "203.0.113.0/24"},
		{"hash_v4", ClientIPHash, "203.0.113.7", "HASH"},
		{"hash_v6", ClientIPHash, "2001:db8::1", "HASH"},
		{"none", ClientIPNone, "203.0.113.7", ""},
		{"invalid", ClientIPFull, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var addr netip.Addr
			if tt.addr != "" {
				addr = netip.MustParseAddr(tt.addr)
			}
			var buf bytes.Buffer
			w, err := NewWriter(Config{Output: &buf, ClientIP: tt.mode, HashKey: key})
			if err != nil {
				t.Fatal(err)
			}
			w.Write(&Record{Time: testTime, RemoteIP: addr, ClientIP: "caller's value is ignored", Action: ActionDeny})
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			r, err := ParseLine(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.want == "HASH":
				if !hexHash.MatchString(r.ClientIP) {
					t.Fatalf("remote_ip = %q; want 24 hex digits", r.ClientIP)
				}
				if bytes.Contains(buf.Bytes(), []byte(tt.addr)) {
					t.Fatalf("the hashed line holds the address: %s", buf.Bytes())
				}
			case r.ClientIP != tt.want:
				t.Fatalf("remote_ip = %q; want %q (line %s)", r.ClientIP, tt.want, buf.Bytes())
			}
			if tt.want == "" && bytes.Contains(buf.Bytes(), []byte("remote_ip")) {
				t.Fatalf("line has remote_ip: %s", buf.Bytes())
			}
		})
	}
}

func TestClientIPHashKeyed(t *testing.T) {
	t.Parallel()
	a := netip.MustParseAddr("203.0.113.7")
	b := netip.MustParseAddr("203.0.113.8")
	k1 := []byte("0123456789abcdef")
	k2 := []byte("fedcba9876543210")
	// One encoder per key, used for every line as a writer uses it: its
	// HMAC is reset between addresses.
	e1, e2 := newAddrEncoder(ClientIPHash, k1), newAddrEncoder(ClientIPHash, k2)
	hash := func(e *addrEncoder, addr netip.Addr) string { return string(e.appendJSON(nil, addr)) }
	// independent is the documented hash, computed afresh: HMAC-SHA-256 of
	// the 16-byte form of the address, its first 24 hex digits.
	independent := func(key []byte, addr netip.Addr) string {
		mac := hmac.New(sha256.New, key)
		b := addr.As16()
		mac.Write(b[:])
		return hex.EncodeToString(mac.Sum(nil))[:24]
	}
	tests := []struct {
		name  string
		x, y  string
		equal bool
	}{
		{"documented_a", hash(e1, a), independent(k1, a), true},
		{"documented_b", hash(e1, b), independent(k1, b), true},
		{"documented_other_key", hash(e2, a), independent(k2, a), true},
		{"mapped_same", hash(e1, netip.AddrFrom16(a.As16())), independent(k1, a), true},
		{"other_address", hash(e1, a), hash(e1, b), false},
		{"other_key", hash(e1, a), hash(e2, a), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if (tt.x == tt.y) != tt.equal {
				t.Fatalf("%q == %q is %v; want %v", tt.x, tt.y, tt.x == tt.y, tt.equal)
			}
		})
	}
}

func TestFormatAddr(t *testing.T) {
	t.Parallel()
	a := netip.MustParseAddr("203.0.113.57")
	key := []byte("0123456789abcdef")
	for _, tt := range []struct{ mode, want string }{
		{ClientIPFull, "203.0.113.57"}, {"", "203.0.113.57"}, {ClientIPPrefix, "203.0.113.0/24"}, {ClientIPNone, ""},
	} {
		if got := FormatAddr(tt.mode, key, a); got != tt.want {
			t.Errorf("FormatAddr(%q) = %q, want %q", tt.mode, got, tt.want)
		}
	}
	h := FormatAddr(ClientIPHash, key, a)
	if len(h) != hashHexDigits || h != string(newAddrEncoder(ClientIPHash, key).appendJSON(nil, a)) {
		t.Errorf("FormatAddr(hash) = %q, want the log's hash", h)
	}
}

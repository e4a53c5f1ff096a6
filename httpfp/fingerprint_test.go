package httpfp

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// specHFP computes hfp and hfp_r as DESIGN.md spells them, independently
// of HFP: the names lowercased, cookie and referer left out, joined with
// ","; then the protocol, the count in two digits (99 at most), "_" and the
// first 12 hex digits of SHA-256 of hfp_r. TestHFP checks it against values
// computed outside Go.
func specHFP(p Proto, names []string) (hfp, hfpr string) {
	var kept []string
	for _, n := range names {
		if l := strings.ToLower(n); l != "cookie" && l != "referer" {
			kept = append(kept, l)
		}
	}
	hfpr = strings.Join(kept, ",")
	sum := sha256.Sum256([]byte(hfpr))
	proto := map[Proto]string{H1: "h1", H2: "h2", H3: "h3"}[p]
	return fmt.Sprintf("%s%02d_%x", proto, min(len(kept), 99), sum[:6]), hfpr
}

func TestHFP(t *testing.T) {
	t.Parallel()
	many := make([]string, 120)
	for i := range many {
		many[i] = fmt.Sprintf("x%d", i)
	}
	// Expected values computed independently (Python hashlib).
	tests := []struct {
		name      string
		proto     Proto
		names     []string
		hfp, hfpr string
	}{
		{"curl X-A X-B", H1, strings.Split("Host,User-Agent,Accept,X-A,X-B", ","), "h105_fd0fa7656f68", "host,user-agent,accept,x-a,x-b"},
		{"curl X-B X-A", H1, strings.Split("Host,User-Agent,Accept,X-B,X-A", ","), "h105_0d0639c2dc38", "host,user-agent,accept,x-b,x-a"},
		{"cookie and referer left out", H2, strings.Split(":method,:authority,:scheme,:path,cookie,referer,Cookie", ","), "h204_683a171cf85c", ":method,:authority,:scheme,:path"},
		{"empty", H3, nil, "h300_e3b0c44298fc", ""},
		{"count capped", H1, many, "h199_1ad172544bce", strings.Join(many, ",")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			hfp, hfpr := HFP(tt.proto, tt.names)
			if hfp != tt.hfp || hfpr != tt.hfpr {
				t.Errorf("HFP = %s %q, want %s %q", hfp, hfpr, tt.hfp, tt.hfpr)
			}
			if hfp, hfpr := specHFP(tt.proto, tt.names); hfp != tt.hfp || hfpr != tt.hfpr {
				t.Errorf("specHFP = %s %q, want %s %q: the tests' reference is wrong", hfp, hfpr, tt.hfp, tt.hfpr)
			}
		})
	}
}

func TestNewH3Fingerprint(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		method string
		header http.Header
		names  string
		ja4h   string
	}{
		{"get", "GET", http.Header{"User-Agent": {"x"}, "Accept": {"*/*"}, "Cookie": {"a=b"}},
			":method,:authority,:scheme,:path,Accept,Cookie,User-Agent", "ge30cn020000_"},
		{"connect", "CONNECT", http.Header{"X-A": {"1", "2"}},
			":method,:authority,X-A,X-A", "co30nn020000_"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fp := NewH3Fingerprint(&http.Request{Method: tt.method, Header: tt.header}, Config{JA4H: true})
			if got := strings.Join(fp.Names, ","); got != tt.names || fp.Ordered {
				t.Errorf("Names = %q, Ordered = %v; want %q, false", got, fp.Ordered, tt.names)
			}
			if hfp, _ := specHFP(H3, fp.Names); fp.HFP != hfp || !strings.HasPrefix(fp.JA4H, tt.ja4h) {
				t.Errorf("HFP %s (want %s), JA4H %s (want prefix %s)", fp.HFP, hfp, fp.JA4H, tt.ja4h)
			}
		})
	}
}

func TestProtoString(t *testing.T) {
	t.Parallel()
	for p, want := range map[Proto]string{H1: "h1", H2: "h2", H3: "h3", 0: "h?"} {
		if p.String() != want {
			t.Errorf("%d.String() = %q, want %q", p, p.String(), want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"zero", Config{}, true},
		{"set", Config{JA4H: true, MaxHeaderBytes: 8192}, true},
		{"negative", Config{MaxHeaderBytes: -1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if err := tt.cfg.Validate(); (err == nil) != tt.ok {
				t.Errorf("Validate() = %v", err)
			}
		})
	}
}

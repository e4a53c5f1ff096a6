package tlsfp

import (
	"regexp"
	"strings"
	"testing"
)

func TestLookupClient(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, ja4, family string
		ok                bool
	}{
		{"utls HelloChrome_133", "t13d1516h2_8daaf6152771_d8a2da3f94cd", "chrome", true},
		{"curl with OpenSSL", "t13d3112h2_e8f1e7e78f70_b26ce05bbdd6", "curl", true},
		{"unknown", "t13d0000h2_000000000000_000000000000", "", false},
		{"empty", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, ok := LookupClient(tt.ja4)
			if ok != tt.ok || c.Family != tt.family {
				t.Errorf("LookupClient(%q) = %+v, %v; want family %q, %v", tt.ja4, c, ok, tt.family, tt.ok)
			}
		})
	}
}

// TestKnownClientsTable checks every generated row: a well-formed JA4, a
// family from the documented list, versions and provenance.
func TestKnownClientsTable(t *testing.T) {
	t.Parallel()
	ja4 := regexp.MustCompile(`^[tq](13|12|11|10|s3)[di]\d{4}[0-9a-zA-Z]{2}_[0-9a-f]{12}_[0-9a-f]{12}$`)
	families := "chrome edge firefox safari ios android curl git wget openssl gnutls go python node java rust"
	if len(knownClients) < 20 {
		t.Errorf("%d known clients, want at least 20", len(knownClients))
	}
	for k, c := range knownClients {
		if !ja4.MatchString(k) || !strings.Contains(" "+families+" ", " "+c.Family+" ") || c.Versions == "" || c.Source == "" {
			t.Errorf("row %q: %+v", k, c)
		}
	}
}

package httpfp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/maatproxy/maat/httpfp"
	"github.com/maatproxy/maat/internal/testcapture"
	"github.com/maatproxy/maat/internal/testenv"
	"github.com/maatproxy/maat/tlsfp"
)

// readCapture reads testdata/clients.jsonl, the capture the known-client
// table was generated from.
func readCapture(t *testing.T) []testcapture.Record {
	t.Helper()
	f, err := os.Open("testdata/clients.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []testcapture.Record
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r testcapture.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestLookupClient(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, h2fp, family, pseudo string
		ok                         bool
	}{
		{"Chromium", chromiumH2FP, "chrome", "m,a,s,p", true},
		{"curl", curlH2FP, "curl", "m,p,s,a", true},
		{"Firefox ESR", "1:65536;2:0;4:131072;5:16384|12517377|0|m,p,a,s", "firefox", "m,p,a,s", true},
		{"Go", "2:0;4:4194304;5:16384;6:10485760|1073741824|0|a,m,p,s", "go", "a,m,p,s", true},
		// The pseudo-header order is not part of the key: a parrot that
		// sends Chrome's over Go's preface is still Go's preface.
		{"Go's preface in Chrome's order", "2:0;4:4194304;5:16384;6:10485760|1073741824|0|m,a,s,p", "go", "a,m,p,s", true},
		{"an empty SETTINGS frame", "|00|0|p,m,a,s", "", "", false},
		{"unknown", "1:4096|00|0|m,a,s,p", "", "", false},
		{"no separator", "m,a,s,p", "", "", false},
		{"empty", "", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, ok := httpfp.LookupClient(tt.h2fp)
			if ok != tt.ok || c.Family != tt.family || c.Pseudo != tt.pseudo {
				t.Errorf("LookupClient(%q) = %+v, %v; want %q %q, %v", tt.h2fp, c, ok, tt.family, tt.pseudo, tt.ok)
			}
		})
	}
}

// TestKnownClientsTable checks the generated table against the capture it
// was made from: every row is a well-formed preface that a captured client
// sent, and every captured HTTP/2 client with a SETTINGS frame has its row,
// naming it as a source, with its pseudo-header order. Every captured request's
// JA4 is in tlsfp's known-client table under the same family.
func TestKnownClientsTable(t *testing.T) {
	t.Parallel()
	recs := readCapture(t)
	if len(recs) < 6 {
		t.Fatalf("%d captured requests, want at least 6", len(recs))
	}
	preface := regexp.MustCompile(`^(\d+:\d+(;\d+:\d+)*)\|\d+\|[0-9:,]+$`)
	backed := map[string]bool{}
	for _, r := range recs {
		if c, ok := tlsfp.LookupClient(r.JA4); !ok || c.Family != r.Family {
			t.Errorf("%s: JA4 %s is %+v in tlsfp's table, want family %s", r.Client, r.JA4, c, r.Family)
		}
		if r.H2FP == "" || strings.HasPrefix(r.H2FP, "|") {
			continue
		}
		c, ok := httpfp.LookupClient(r.H2FP)
		i := strings.LastIndexByte(r.H2FP, '|')
		// A preface several clients send (git's is its libcurl's) names
		// the first family of the generator's order, and every source.
		if !ok || c.Pseudo != r.H2FP[i+1:] || !strings.Contains(c.Source, r.Source) || c.Family != r.Family && !strings.Contains(c.Source, "; ") {
			t.Errorf("%s: h2fp %s is %+v in the table, want family %s, pseudo %s, source %q", r.Client, r.H2FP, c, r.Family, r.H2FP[i+1:], r.Source)
		}
		backed[r.H2FP[:i]] = true
	}
	for _, c := range []string{"1:65536;2:0;4:6291456;6:262144|15663105|0", "3:100;4:33554432;2:0|33488897|0",
		"2:0;4:4194304;5:16384;6:10485760|1073741824|0", "1:65536;2:0;4:131072;5:16384|12517377|0"} {
		if !backed[c] {
			t.Errorf("no captured client sent the preface %s", c)
		}
	}
	for _, fam := range []string{"chrome", "firefox", "curl", "go"} {
		if !slices.ContainsFunc(recs, func(r testcapture.Record) bool { return r.Family == fam && r.Proto == "HTTP/2.0" }) {
			t.Errorf("no %s in the capture", fam)
		}
	}
	for p := range backed {
		if !preface.MatchString(p) {
			t.Errorf("row %q is not a preface", p)
		}
	}
}

// TestKnownClientsLive runs the real clients again and re-derives what the
// tables and the capture hold for each: the same JA4, HTTP/2 fingerprint and
// header order, so that a client that changed (an upgrade of Chromium, curl,
// Firefox ESR or x/net) fails here instead of drifting silently. Go's
// clients always run; a missing program skips its client (fails in CI).
// Rewrite with `go generate ./httpfp ./tlsfp` after a deliberate change.
func TestKnownClientsLive(t *testing.T) {
	t.Parallel()
	want := map[string][]testcapture.Record{}
	for _, r := range readCapture(t) {
		want[r.Client] = append(want[r.Client], r)
	}
	s, err := testcapture.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	// One client at a time: the server's records are not told apart by
	// client.
	for _, c := range testcapture.Clients() {
		t.Run(c.Name, func(t *testing.T) {
			if !c.Installed() {
				testenv.Missing(t, "%s is not installed (make deps installs it)", c.Program)
			}
			got, err := testcapture.Run(context.Background(), s, c)
			if err != nil {
				t.Fatal(err)
			}
			w := want[c.Name]
			if len(w) == 0 {
				t.Fatalf("%s is not in testdata/clients.jsonl (go generate ./httpfp)", c.Name)
			}
			for _, r := range got {
				if r.Proto != c.Proto {
					t.Errorf("%s spoke %s, want %s", c.Name, r.Proto, c.Proto)
				}
				if !slices.ContainsFunc(w, func(x testcapture.Record) bool {
					return x.Path == r.Path && x.Proto == r.Proto && x.JA4 == r.JA4 && x.H2FP == r.H2FP && x.HFPR == r.HFPR
				}) {
					t.Errorf("%s %s: ja4 %s h2fp %q hfp_r %s is not in testdata/clients.jsonl: the client changed (go generate ./httpfp ./tlsfp)", c.Name, r.Path, r.JA4, r.H2FP, r.HFPR)
				}
				if tc, ok := tlsfp.LookupClient(r.JA4); !ok || tc.Family != c.Family {
					t.Errorf("%s: JA4 %s is %+v in tlsfp's table, want %s", c.Name, r.JA4, tc, c.Family)
				}
				if r.H2FP == "" || strings.HasPrefix(r.H2FP, "|") {
					continue
				}
				if hc, ok := httpfp.LookupClient(r.H2FP); !ok || hc.Family != c.Family && !strings.Contains(hc.Source, r.Source) || !strings.HasSuffix(r.H2FP, "|"+hc.Pseudo) {
					t.Errorf("%s: h2fp %s is %+v in the table, want %s", c.Name, r.H2FP, hc, c.Family)
				}
			}
		})
	}
}

// BenchmarkLookupClient is the edge's per-request lookup of the HTTP/2
// known-client table: no allocation.
func BenchmarkLookupClient(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if c, ok := httpfp.LookupClient(chromiumH2FP); !ok || c.Family != "chrome" {
			b.Fatal(c, ok)
		}
	}
}

package accept

import (
	"strings"
	"testing"
)

func TestEncoding(t *testing.T) {
	t.Parallel()
	all := []string{Zstd, Brotli, Gzip}
	for _, tt := range []struct {
		name    string
		accept  []string // nil: no Accept-Encoding field
		offered []string
		want    string
	}{
		{"no field", nil, all, ""},
		{"empty field", []string{""}, all, ""},
		{"chrome", []string{"gzip, deflate, br, zstd"}, all, Zstd},
		{"firefox without zstd", []string{"gzip, deflate, br"}, all, Brotli},
		{"curl", []string{"deflate, gzip"}, all, Gzip},
		{"server order breaks ties", []string{"gzip;q=0.8, br;q=0.8"}, all, Brotli},
		{"highest q wins", []string{"zstd;q=0.5, gzip;q=0.9, br;q=0.7"}, all, Gzip},
		{"q=0 refuses", []string{"zstd;q=0, br;q=0.000, gzip"}, all, Gzip},
		{"all refused", []string{"zstd;q=0, br;q=0, gzip;q=0"}, all, ""},
		{"star", []string{"*"}, all, Zstd},
		{"star with a refusal", []string{"*, zstd;q=0"}, all, Brotli},
		{"star refuses the rest", []string{"gzip, *;q=0"}, all, Gzip},
		{"star lower than a named one", []string{"*;q=0.1, gzip"}, all, Gzip},
		{"identity preferred", []string{"gzip;q=0.5, identity"}, all, ""},
		{"identity equal keeps compression", []string{"gzip, identity"}, all, Gzip},
		{"identity only", []string{"identity"}, all, ""},
		{"identity refused", []string{"identity;q=0, gzip;q=0.1"}, all, Gzip},
		{"x-gzip", []string{"x-gzip"}, all, Gzip},
		{"case and spaces", []string{" GZip ; Q=0.5 ,\tBR;q=0.4"}, all, Gzip},
		{"several fields", []string{"gzip;q=0.2", "br;q=0.9"}, all, Brotli},
		{"empty elements", []string{",, ,gzip,"}, all, Gzip},
		{"bad q ignored", []string{"zstd;q=2, br;q=0.5x, gzip;q=0.1"}, all, Gzip},
		{"too many decimals ignored", []string{"zstd;q=0.0001, gzip;q=0.001"}, all, Gzip},
		{"q=1.000", []string{"gzip;q=0.999, br;q=1.000"}, all, Brotli},
		{"q=1.001 ignored", []string{"br;q=1.001, gzip;q=0.5"}, all, Gzip},
		{"other parameters", []string{"br;level=5;q=0.3, gzip;q=0.2"}, all, Brotli},
		{"first entry of a coding counts", []string{"gzip;q=0, gzip"}, all, ""},
		{"only gzip offered", []string{"zstd, br, gzip;q=0.1"}, []string{Gzip}, Gzip},
		{"unknown codings", []string{"deflate, compress, exi"}, all, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Encoding(tt.accept, tt.offered); got != tt.want {
				t.Errorf("Encoding(%q, %q) = %q, want %q", tt.accept, tt.offered, got, tt.want)
			}
			// The plain restatement agrees, so that the fuzz target's
			// differential check (fuzz/accept) stands on a checked reference.
			if ref := referenceEncoding(tt.accept, tt.offered); ref != tt.want {
				t.Errorf("referenceEncoding(%q, %q) = %q, want %q", tt.accept, tt.offered, ref, tt.want)
			}
		})
	}
}

func TestParseQ(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		want int
	}{
		{"0", 0}, {"1", 1000}, {"0.", 0}, {"1.", 1000}, {"0.5", 500}, {"0.05", 50},
		{"0.005", 5}, {"0.999", 999}, {"1.0", 1000}, {"1.000", 1000},
		{"", -1}, {"2", -1}, {".5", -1}, {"0.0000", -1}, {"1.5", -1}, {"0,5", -1},
		{"0.a", -1}, {"01", -1}, {"-0", -1},
	} {
		if got := parseQ(tt.in); got != tt.want {
			t.Errorf("parseQ(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func TestRank(t *testing.T) {
	t.Parallel()
	all := []string{Zstd, Brotli, Gzip}
	for _, tt := range []struct {
		name   string
		accept []string
		want   []string
	}{
		{"no field", nil, nil},
		{"chrome", []string{"gzip, deflate, br, zstd"}, []string{Zstd, Brotli, Gzip}},
		{"q order", []string{"zstd;q=0.5, gzip;q=0.9, br;q=0.7"}, []string{Gzip, Brotli, Zstd}},
		{"ties keep offered order", []string{"gzip;q=0.8, br;q=0.8, zstd;q=0.1"}, []string{Brotli, Gzip, Zstd}},
		{"refused left out", []string{"*, br;q=0"}, []string{Zstd, Gzip}},
		{"below identity left out", []string{"gzip;q=0.9, br;q=0.4, identity;q=0.5"}, []string{Gzip}},
		{"x-gzip", []string{"x-gzip;q=0.5, zstd"}, []string{Zstd, Gzip}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got []string
			for _, i := range Rank(tt.accept, all, nil) {
				got = append(got, all[i])
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("Rank(%q) = %q, want %q", tt.accept, got, tt.want)
			}
			want := ""
			if len(tt.want) > 0 {
				want = tt.want[0]
			}
			if e := Encoding(tt.accept, all); e != want {
				t.Errorf("Encoding(%q) = %q, but Rank's first is %q", tt.accept, e, want)
			}
		})
	}
}

func TestEncodingDoesNotAllocate(t *testing.T) {
	accept := []string{"gzip;q=0.5, deflate, br;q=0.9, zstd;q=0.1, *;q=0"}
	offered := []string{Zstd, Brotli, Gzip}
	if n := testing.AllocsPerRun(100, func() { Encoding(accept, offered) }); n != 0 {
		t.Errorf("Encoding allocates %v times", n)
	}
	var buf [3]int
	if n := testing.AllocsPerRun(100, func() { Rank(accept, offered, buf[:0]) }); n != 0 {
		t.Errorf("Rank allocates %v times", n)
	}
}

// referenceEncoding is a plain restatement of RFC 9110, section 12.5.3,
// with maps and strings.Split, to check Encoding against.
func referenceEncoding(accept []string, offered []string) string {
	qs := map[string]int{}
	for _, v := range accept {
		for _, elem := range strings.Split(v, ",") {
			parts := strings.Split(elem, ";")
			coding := strings.ToLower(strings.TrimSpace(parts[0]))
			if coding == "" {
				continue
			}
			if coding == "x-gzip" {
				coding = "gzip"
			}
			q := 1000
			for _, p := range parts[1:] {
				name, value, _ := strings.Cut(p, "=")
				if strings.EqualFold(strings.TrimSpace(name), "q") {
					q = parseQ(strings.TrimSpace(value))
				}
			}
			if _, seen := qs[coding]; !seen && q >= 0 {
				qs[coding] = q
			}
		}
	}
	best, bestQ := "", 0
	for _, o := range offered {
		q, ok := qs[strings.ToLower(o)]
		if !ok {
			if q, ok = qs["*"]; !ok {
				q = 0
			}
		}
		if q > bestQ {
			best, bestQ = o, q
		}
	}
	if id, ok := qs["identity"]; ok && id > bestQ {
		return ""
	}
	return best
}

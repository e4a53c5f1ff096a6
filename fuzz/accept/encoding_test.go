package accept_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/maatproxy/maat/accept"
)

// FuzzEncoding checks Encoding against the reference on any
// Accept-Encoding value: it returns an offered coding or "", and the same
// one as the reference, which differs only where "x-gzip" and "gzip" are
// both named (the reference merges them, Encoding reads the first match).
func FuzzEncoding(f *testing.F) {
	for _, s := range []string{
		"gzip, deflate, br, zstd", "gzip;q=0.5, identity", "*;q=0", "x-gzip;q=0.3, br;q=0.3",
		"zstd;q=0, *", " GZip ; Q=0.5 ,\tBR;q=0.4", ";;,=;q=", "br;q=1.001",
	} {
		f.Add(s)
	}
	offered := []string{accept.Zstd, accept.Brotli, accept.Gzip}
	f.Fuzz(func(t *testing.T, s string) {
		got := accept.Encoding([]string{s}, offered)
		if got != "" && got != accept.Zstd && got != accept.Brotli && got != accept.Gzip {
			t.Fatalf("accept.Encoding(%q) = %q, not offered", s, got)
		}
		if strings.Contains(strings.ToLower(s), "x-gzip") {
			return
		}
		if want := referenceEncoding([]string{s}, offered); got != want {
			t.Fatalf("accept.Encoding(%q) = %q, reference says %q", s, got, want)
		}
	})
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
					q = refQ(strings.TrimSpace(value))
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

// refQ parses a qvalue as strconv does, within RFC 9110's grammar, into
// thousandths, or -1.
func refQ(v string) int {
	if v == "" || v[0] != '0' && v[0] != '1' || len(v) > 1 && (v[1] != '.' || len(v) > 5) {
		return -1
	}
	for _, c := range v[min(2, len(v)):] {
		if c < '0' || c > '9' {
			return -1
		}
	}
	f, err := strconv.ParseFloat(strings.TrimSuffix(v, "."), 64)
	if err != nil || f > 1 {
		return -1
	}
	return int(f*1000 + 0.5)
}

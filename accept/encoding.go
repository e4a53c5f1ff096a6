package accept

import "strings"

// The content codings of RFC 9110, section 8.4.1, under the names
// Accept-Encoding and Content-Encoding use.
const (
	Gzip   = "gzip"
	Brotli = "br"
	Zstd   = "zstd"
)

// Encoding returns the content coding to use for a request whose
// Accept-Encoding field values are fields, from offered (in the server's
// order of preference), or "" for none (identity). It follows RFC 9110,
// section 12.5.3: the coding with the highest q-value wins, ties go to the
// earlier offered coding, q=0 refuses, "*" gives its q-value to every coding
// not named, "x-gzip" is gzip, and an explicit "identity" with a higher
// q-value than every acceptable coding wins over them. No field at all, or
// an empty one, means identity. An element with a malformed q-value is
// ignored. Encoding does not allocate.
func Encoding(fields []string, offered []string) string {
	var buf [8]int
	if r := Rank(fields, offered, buf[:0]); len(r) > 0 {
		return offered[r[0]]
	}
	return ""
}

// Rank appends to dst the indexes into offered of the codings the client
// accepts, best first: by q-value, then in offered's order. A coding the
// client values below an explicit "identity" is left out, as Encoding would
// never choose it. Rank does not allocate when dst has room for offered.
func Rank(fields []string, offered []string, dst []int) []int {
	star, identity := -1, -1
	for s := (scanner{vals: fields}); ; {
		coding, q, ok := s.next()
		if !ok {
			break
		}
		switch {
		case coding == "*" && star < 0:
			star = q
		case strings.EqualFold(coding, "identity") && identity < 0:
			identity = q
		}
	}
	start := len(dst)
	var qs [16]int // q-values of the ranked entries, by position after start
	for i, o := range offered {
		q := star
		for s := (scanner{vals: fields}); ; {
			coding, cq, ok := s.next()
			if !ok {
				break
			}
			if sameCoding(coding, o) {
				q = cq
				break
			}
		}
		if q <= 0 || q < identity || len(dst)-start >= len(qs) {
			continue
		}
		// Insert by descending q; equal q keeps offered's order.
		dst = append(dst, i)
		j := len(dst) - 1 - start
		for j > 0 && qs[j-1] < q {
			qs[j] = qs[j-1]
			dst[start+j] = dst[start+j-1]
			j--
		}
		qs[j] = q
		dst[start+j] = i
	}
	return dst
}

// sameCoding reports whether the coding named in Accept-Encoding is the
// offered one.
func sameCoding(coding, offered string) bool {
	return strings.EqualFold(coding, offered) ||
		strings.EqualFold(offered, Gzip) && strings.EqualFold(coding, "x-gzip")
}

// scanner walks the elements of Accept-Encoding field values:
// coding *( OWS ";" OWS parameter ), separated by commas.
type scanner struct {
	vals []string
	rest string
}

// next returns the next well-formed element's coding and its q-value in
// thousandths (1000 if absent).
func (s *scanner) next() (coding string, q int, ok bool) {
	for {
		for s.rest == "" {
			if len(s.vals) == 0 {
				return "", 0, false
			}
			s.rest, s.vals = s.vals[0], s.vals[1:]
		}
		var elem string
		elem, s.rest, _ = strings.Cut(s.rest, ",")
		coding, params, _ := strings.Cut(elem, ";")
		coding = strings.TrimSpace(coding)
		if coding == "" {
			continue // empty list elements are allowed (RFC 9110, section 5.6.1)
		}
		q := 1000
		for params != "" {
			var p string
			p, params, _ = strings.Cut(params, ";")
			name, value, _ := strings.Cut(p, "=")
			if strings.EqualFold(strings.TrimSpace(name), "q") {
				q = parseQ(strings.TrimSpace(value))
			}
		}
		if q >= 0 {
			return coding, q, true
		}
	}
}

// parseQ parses a qvalue (RFC 9110, section 12.4.2) into thousandths, or
// returns -1: "0" [ "." 0*3DIGIT ] / "1" [ "." 0*3("0") ].
func parseQ(v string) int {
	if v == "" || (v[0] != '0' && v[0] != '1') {
		return -1
	}
	q := int(v[0]-'0') * 1000
	if len(v) == 1 {
		return q
	}
	frac := v[1:]
	if frac[0] != '.' || len(frac) > 4 {
		return -1
	}
	scale := 100
	for _, c := range []byte(frac[1:]) {
		if c < '0' || c > '9' {
			return -1
		}
		q += int(c-'0') * scale
		scale /= 10
	}
	if q > 1000 {
		return -1
	}
	return q
}

package httpfp

import (
	"slices"
	"strings"
)

// ja4hInput is what JA4H needs of one request.
type ja4hInput struct {
	method  string   // as sent
	version string   // "10", "11", "20" or "30"
	names   []string // header names in wire order, pseudo-headers included
	cookies []string // the values of every Cookie field, in order
	lang    string   // the first Accept-Language value
}

// zeroHash stands for a JA4H section that has nothing to hash.
const zeroHash = "000000000000"

// compute returns ja4h and ja4h_r (cookies sorted).
func (j *ja4hInput) compute() (ja4h, ja4hr string) {
	h, r := j.appendJA4H(nil, nil, true)
	return string(h), string(r)
}

// appendJA4H appends ja4h to dst and its raw form to raw: ja4h_r when
// sorted, ja4h_ro (cookies in wire order) otherwise.
func (j *ja4hInput) appendJA4H(dst, raw []byte, sorted bool) (ja4h, ja4hRaw []byte) {
	cookie, referer, n := false, false, 0
	for _, name := range j.names {
		switch {
		case strings.HasPrefix(name, ":"):
		case strings.EqualFold(name, "cookie"):
			cookie = true
		case strings.EqualFold(name, "referer"):
			referer = true
		default:
			n++
		}
	}
	// JA4H_a: method, version, cookie and referer flags, count, language.
	a := appendLower(make([]byte, 0, 12), j.method[:min(2, len(j.method))])
	a = append(a, j.version...)
	a = append(a, flag(cookie, 'c'), flag(referer, 'r'))
	a = appendCount(a, n)
	a = appendLanguage(a, j.lang)
	dst = append(dst, a...)
	raw = append(raw, a...)

	// JA4H_b: header names in wire order, original case.
	raw = append(raw, '_')
	start := len(raw)
	first := true
	for _, name := range j.names {
		if strings.HasPrefix(name, ":") || excludedName(name) {
			continue
		}
		if !first {
			raw = append(raw, ',')
		}
		raw = append(raw, name...)
		first = false
	}
	dst = append(dst, '_')
	dst = appendSection(dst, raw[start:])

	// JA4H_c and JA4H_d: cookie names, then name=value pairs, sorted.
	pairs := cookiePairs(j.cookies)
	names := make([]string, len(pairs))
	for i, p := range pairs {
		names[i], _, _ = strings.Cut(p, "=")
	}
	sortedNames, sortedPairs := slices.Clone(names), slices.Clone(pairs)
	slices.Sort(sortedNames)
	// Pairs sort by name, then value (FoxIO sorts split pairs): "a=1"
	// before "a-b=2" although "-" sorts before "=".
	slices.SortFunc(sortedPairs, func(x, y string) int {
		xn, xv, _ := strings.Cut(x, "=")
		yn, yv, _ := strings.Cut(y, "=")
		if c := strings.Compare(xn, yn); c != 0 {
			return c
		}
		return strings.Compare(xv, yv)
	})
	for _, list := range [][]string{sortedNames, sortedPairs} {
		var b []byte
		for i, s := range list {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, s...)
		}
		dst = append(dst, '_')
		dst = appendSection(dst, b)
	}
	if len(pairs) == 0 {
		return dst, append(raw, '_') // FoxIO's raw form ends here without cookies
	}
	if !sorted {
		sortedNames, sortedPairs = names, pairs
	}
	for _, list := range [][]string{sortedNames, sortedPairs} {
		raw = append(raw, '_')
		for i, s := range list {
			if i > 0 {
				raw = append(raw, ',')
			}
			raw = append(raw, s...)
		}
	}
	return dst, raw
}

// appendSection appends the truncated hash of b, or zeros when b is empty.
func appendSection(dst, b []byte) []byte {
	if len(b) == 0 {
		return append(dst, zeroHash...)
	}
	return truncHash(dst, b)
}

func flag(set bool, c byte) byte {
	if set {
		return c
	}
	return 'n'
}

// appendLanguage appends the first four characters of the first language
// of an Accept-Language value, lowercased, without "-", padded with "0".
func appendLanguage(dst []byte, lang string) []byte {
	lang, _, _ = strings.Cut(lang, ",")
	lang, _, _ = strings.Cut(lang, ";")
	n := 0
	for i := 0; i < len(lang) && n < 4; i++ {
		c := lang[i]
		if c == '-' || c == ' ' {
			continue
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
		n++
	}
	for ; n < 4; n++ {
		dst = append(dst, '0')
	}
	return dst
}

// cookiePairs splits Cookie field values into their name=value pairs.
func cookiePairs(values []string) []string {
	var pairs []string
	for _, v := range values {
		for p := range strings.SplitSeq(v, ";") {
			if p = strings.TrimSpace(p); p != "" {
				pairs = append(pairs, p)
			}
		}
	}
	return pairs
}

package static

import (
	"cmp"
	"math"
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
)

// DefaultMaxRanges is the number of ranges a Range header may ask for when
// Config.MaxRanges is zero. Readers of large files (PDF viewers, video
// players, download managers) ask for a few; Apache's MaxRanges allows 200.
const DefaultMaxRanges = 100

// span is a byte range of a representation: [start, end) once resolved
// for a size, [start, end] in overlapUnsized.
type span struct{ start, end int64 }

// LimitRanges deletes h's Range header if it asks for more than limit
// ranges (DefaultMaxRanges if limit is zero or less), is sent more than
// once, or asks for ranges that certainly
// overlap, and reports whether it did. It is for a request whose
// representation's size is not known, such as one a proxy forwards: without
// the header the response is the whole representation, as Apache answers
// too many ranges (MaxRanges) and as RFC 9110, section 14.2, allows for
// overlapping ones. Ranges overlap certainly when two explicit ranges
// ("0-99") share a byte, when an open one ("100-") reaches another, or when
// two are suffixes ("-500"); a suffix and an explicit range may or may not,
// by the size, and are left to the server. A header that is not a "bytes="
// set of ranges is left alone: the server ignores or refuses it.
func LimitRanges(h http.Header, limit int) bool {
	vs := h["Range"]
	if len(vs) == 0 {
		return false
	}
	if limit <= 0 {
		limit = DefaultMaxRanges
	}
	if len(vs) > 1 || countRanges(vs[0], limit) > limit || overlapUnsized(vs[0]) {
		delete(h, "Range")
		return true
	}
	return false
}

// rangeSet returns the ranges of a Range header value, after "bytes=", or
// false if it is not a byte-range set.
func rangeSet(v string) (string, bool) {
	const unit = "bytes="
	if len(v) < len(unit) || !strings.EqualFold(v[:len(unit)], unit) {
		return "", false
	}
	return v[len(unit):], true
}

// countRanges returns the number of ranges in a Range header value, its
// non-blank elements as net/http's ServeContent reads them, or limit+1 if
// there are more than limit; 0 if it is not a byte-range set.
func countRanges(v string, limit int) int {
	set, ok := rangeSet(v)
	if !ok {
		return 0
	}
	n := 0
	for elem := range strings.SplitSeq(set, ",") {
		if textproto.TrimString(elem) != "" {
			if n++; n > limit {
				break
			}
		}
	}
	return n
}

// splitRange splits one element of a range set into its first and last
// positions: ok is false unless it is "first-last" (first <= last),
// "first-" or "-suffix", with non-negative decimal numbers.
func splitRange(elem string) (first, last int64, hasFirst, hasLast, ok bool) {
	a, b, found := strings.Cut(textproto.TrimString(elem), "-")
	a, b = textproto.TrimString(a), textproto.TrimString(b)
	if !found || (a == "" && b == "") {
		return 0, 0, false, false, false
	}
	num := func(s string) (int64, bool) {
		if s == "" || s[0] == '-' {
			return 0, false
		}
		n, err := strconv.ParseInt(s, 10, 64)
		return n, err == nil && n >= 0
	}
	if a != "" {
		if first, ok = num(a); !ok {
			return 0, 0, false, false, false
		}
		hasFirst = true
	}
	if b != "" {
		if last, ok = num(b); !ok || (hasFirst && last < first) {
			return 0, 0, false, false, false
		}
		hasLast = true
	}
	return first, last, hasFirst, hasLast, true
}

// overlapUnsized reports whether the well-formed ranges of a Range header
// value overlap whatever the representation's size (see LimitRanges);
// malformed ones are passed over.
func overlapUnsized(v string) bool {
	set, ok := rangeSet(v)
	if !ok {
		return false
	}
	var spans []span // first and last byte, inclusive; open ranges end at MaxInt64
	suffixes := 0
	for elem := range strings.SplitSeq(set, ",") {
		first, last, hasFirst, hasLast, ok := splitRange(elem)
		switch {
		case !ok:
			continue
		case !hasFirst:
			if suffixes++; suffixes > 1 {
				return true
			}
		case !hasLast:
			spans = append(spans, span{first, math.MaxInt64})
		default:
			spans = append(spans, span{first, last})
		}
	}
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.start, b.start) })
	for i := 1; i < len(spans); i++ {
		if spans[i].start <= spans[i-1].end {
			return true
		}
		spans[i].end = max(spans[i].end, spans[i-1].end) // the furthest end so far
	}
	return false
}

// resolveRanges returns the satisfiable ranges of a byte-range set (after
// "bytes=") for a representation of size bytes, exactly as net/http's
// ServeContent reads them (its parseRange): a range that starts at or after
// the end is left out whatever follows its dash, a suffix longer than the
// representation is all of it. ok is false where ServeContent finds the set
// invalid.
func resolveRanges(set string, size int64) (spans []span, ok bool) {
	for elem := range strings.SplitSeq(set, ",") {
		elem = textproto.TrimString(elem)
		if elem == "" {
			continue
		}
		a, b, found := strings.Cut(elem, "-")
		if !found {
			return nil, false
		}
		a, b = textproto.TrimString(a), textproto.TrimString(b)
		if a == "" {
			if b == "" || b[0] == '-' {
				return nil, false
			}
			n, err := strconv.ParseInt(b, 10, 64)
			if err != nil || n < 0 {
				return nil, false
			}
			spans = append(spans, span{size - min(n, size), size})
			continue
		}
		first, err := strconv.ParseInt(a, 10, 64)
		if err != nil || first < 0 {
			return nil, false
		}
		if first >= size {
			continue // not satisfiable
		}
		if b == "" {
			spans = append(spans, span{first, size})
			continue
		}
		last, err := strconv.ParseInt(b, 10, 64)
		if err != nil || first > last {
			return nil, false
		}
		spans = append(spans, span{first, min(last, size-1) + 1})
	}
	return spans, true
}

// rangesFor returns the Range header value to serve a representation of
// size bytes with, at most limit ranges: v itself when it is fine (or
// invalid, or unsatisfiable: ServeContent answers those), "" for the whole
// representation when v asks for more than limit ranges, or the ranges
// merged where they overlap or touch, in ascending order (RFC 9110, section
// 14.6, lets a server coalesce ranges regardless of their order). What it
// returns asks for at most size bytes in at most limit ranges.
func rangesFor(v string, size int64, limit int) string {
	set, ok := strings.CutPrefix(v, "bytes=") // as ServeContent, case-sensitive
	if !ok {
		return v
	}
	n := countRanges(v, limit)
	if n > limit {
		return ""
	}
	if n < 2 {
		return v
	}
	spans, ok := resolveRanges(set, size)
	if !ok || len(spans) == 0 {
		return v // 416
	}
	sorted := slices.SortedFunc(slices.Values(spans), func(a, b span) int { return cmp.Compare(a.start, b.start) })
	merged := sorted[:1]
	for _, s := range sorted[1:] {
		if last := &merged[len(merged)-1]; s.start <= last.end {
			last.end = max(last.end, s.end)
			continue
		}
		merged = append(merged, s)
	}
	if len(merged) == len(spans) {
		return v // nothing overlaps or touches: served as asked, in its order
	}
	b := []byte("bytes=")
	for _, s := range merged {
		if s.end == s.start {
			continue // "-0": nothing
		}
		if len(b) > len("bytes=") {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, s.start, 10)
		b = append(b, '-')
		b = strconv.AppendInt(b, s.end-1, 10)
	}
	if len(b) == len("bytes=") {
		return ""
	}
	return string(b)
}

// withRanges returns r, or a copy of it whose Range header asks for what
// rangesFor allows for a representation of size bytes. A Range header sent
// more than once is dropped: the field takes one value (RFC 9110, section
// 14.2).
func withRanges(r *http.Request, size int64, limit int) *http.Request {
	vs := r.Header["Range"]
	if len(vs) == 0 {
		return r
	}
	v := ""
	if len(vs) == 1 {
		v = rangesFor(vs[0], size, limit)
		if v == vs[0] {
			return r
		}
	}
	r2 := *r
	r2.Header = r.Header.Clone()
	if v == "" {
		delete(r2.Header, "Range")
	} else {
		r2.Header["Range"] = []string{v}
	}
	return &r2
}

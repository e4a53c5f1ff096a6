package urlpath

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Fold returns s in one case: each rune upper-cased, then lower-cased
// (unicode.ToUpper, unicode.ToLower). Runes a case-insensitive file system
// or server takes for one (A and a, K and the Kelvin sign, ſ and s, I, İ
// and ı) fold to one rune; ASCII letters fold to lower case. Fold is
// idempotent, and returns s itself, without allocating, when nothing in it
// changes.
func Fold(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' || c >= utf8.RuneSelf {
			return strings.Map(foldRune, s)
		}
	}
	return s
}

func foldRune(r rune) rune {
	if r < utf8.RuneSelf {
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}
	return unicode.ToLower(unicode.ToUpper(r))
}

// CutPrefix returns s without prefix and true, if s starts with prefix,
// rune by rune folded (see Fold) when fold is true; or s and false.
func CutPrefix(s, prefix string, fold bool) (string, bool) {
	if !fold {
		return strings.CutPrefix(s, prefix)
	}
	i := 0
	for _, pr := range prefix {
		if i >= len(s) {
			return s, false
		}
		sr, n := utf8.DecodeRuneInString(s[i:])
		if sr != pr && foldRune(sr) != foldRune(pr) {
			return s, false
		}
		i += n
	}
	return s[i:], true
}

// HasPrefix reports whether s starts with prefix, folded when fold is true.
func HasPrefix(s, prefix string, fold bool) bool {
	_, ok := CutPrefix(s, prefix, fold)
	return ok
}

// Equal reports whether s and t are the same path, folded when fold is
// true.
func Equal(s, t string, fold bool) bool {
	rest, ok := CutPrefix(s, t, fold)
	return ok && rest == ""
}

package static

import (
	"net/http"
	"strings"
	"unicode/utf8"
)

// wellKnown is the one dot-directory served (RFC 8615), at the top only.
const wellKnown = ".well-known"

// cleanPath turns a request path (already percent-decoded once, as
// r.URL.Path is) into a name for os.Root: slash-separated, relative, without
// a trailing slash, "." for the root itself. dir reports whether the path
// named a directory (empty, or ending in a slash).
//
// It rejects rather than repairs: a NUL byte is 400; invalid UTF-8, a
// backslash, an empty, "." or ".." segment, or a segment starting with a dot
// (other than a leading .well-known) is 404. Double-encoded sequences such as %252e%252e
// arrive here as the literal name "%2e%2e", which is not decoded again.
func cleanPath(p string) (name string, dir bool, status int) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", false, http.StatusBadRequest
	}
	if strings.IndexByte(p, '\\') >= 0 || !utf8.ValidString(p) {
		return "", false, http.StatusNotFound
	}
	p = strings.TrimPrefix(p, "/")
	if p == "" {
		return ".", true, 0
	}
	p, dir = strings.CutSuffix(p, "/")
	rest := p
	for first := true; ; first = false {
		seg, tail, more := strings.Cut(rest, "/")
		if seg == "" || (seg[0] == '.' && !(first && seg == wellKnown)) {
			return "", false, http.StatusNotFound
		}
		if !more {
			break
		}
		rest = tail
	}
	return p, dir, 0
}

package static

import "strings"

// lookupPath returns the path to look up under the root: p without
// StripPrefix, on a segment boundary; "" for the prefix itself without its
// trailing slash. ok is false when p is outside the prefix.
func (h *Handler) lookupPath(p string) (rest string, ok bool) {
	if h.strip == "" {
		return p, true
	}
	dir := strings.TrimSuffix(h.strip, "/") // "/docs" for "/docs/"; "" for "/"
	if p == dir {
		return "", true
	}
	if len(p) > len(dir) && p[len(dir)] == '/' && strings.HasPrefix(p, dir) {
		return p[len(dir):], true // with its slash: "/a.html"
	}
	return "", false
}

// cleanPrefix reports whether p is a path prefix a request path can start
// with: "/", or "/" and segments that cleanPath accepts, with or without a
// trailing slash.
func cleanPrefix(p string) bool {
	if p == "/" {
		return true
	}
	if p == "" || p[0] != '/' {
		return false
	}
	name, _, status := cleanPath(p)
	return status == 0 && name != "."
}

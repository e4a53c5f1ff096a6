package urlpath

import (
	"errors"
	"strings"
)

// Errors of a path that has no normal form or no model. Each names the
// first thing found wrong.
var (
	ErrNotAbsolute = errors.New("urlpath: path does not start with /")
	ErrEscape      = errors.New("urlpath: bad percent-encoding")
	ErrBackslash   = errors.New("urlpath: backslash in path")
	ErrControl     = errors.New("urlpath: control character in path")
	// ErrEncodedSlash is a "%2F" that would decode into an empty or dot
	// segment: an application that decodes it would see another path than
	// the normal form.
	ErrEncodedSlash = errors.New("urlpath: encoded slash makes an empty or dot segment")
	ErrUTF8         = errors.New("urlpath: invalid UTF-8 in path")
	ErrOverlong     = errors.New("urlpath: overlong UTF-8 in path")
	// ErrAmbiguous is a path that upstreams read as different places: a
	// segment only lenient ones climb (".." after their rules), or escapes
	// nested deeper than the model decodes.
	ErrAmbiguous = errors.New("urlpath: path read differently by different upstreams")
)

// Normalize returns the normal form of an escaped path (its form on the
// wire, net/url's URL.EscapedPath) and the normal form decoded, or the
// reason it has none (see the package documentation). A path already in
// normal form is returned as it is, without allocating.
func Normalize(escaped string) (normal, decoded string, err error) {
	if escaped == "" || escaped[0] != '/' {
		return "", "", ErrNotAbsolute
	}
	if IsNormal(escaped) {
		return escaped, escaped, nil // no escape: decoded is the same
	}
	norm, err := normalizePath(escaped)
	if err != nil {
		return "", "", err
	}
	dec, err := decodedPath(norm)
	if err != nil {
		return "", "", err
	}
	return norm, dec, nil
}

// normalizePath returns the normal form of an escaped path that starts
// with "/".
func normalizePath(p string) (string, error) {
	segs := make([]string, 0, strings.Count(p, "/"))
	trailing := false
	for rest := p[1:]; ; {
		seg, tail, more := strings.Cut(rest, "/")
		seg, err := normalizeSegment(seg)
		if err != nil {
			return "", err
		}
		trailing = false
		switch seg {
		case "", ".":
			trailing = !more || seg == "."
		case "..":
			if len(segs) > 0 {
				segs = segs[:len(segs)-1]
			}
			trailing = true
		default:
			segs = append(segs, seg)
		}
		if !more {
			break
		}
		rest = tail
	}
	var b strings.Builder
	b.Grow(len(p))
	for _, s := range segs {
		b.WriteByte('/')
		b.WriteString(s)
	}
	if trailing || len(segs) == 0 {
		b.WriteByte('/')
	}
	return b.String(), nil
}

// IsNormal reports whether p, an escaped path that starts with "/", is in
// normal form with nothing to check: no percent sign, no empty or dot
// segment, nothing refused. It does not allocate.
func IsNormal(p string) bool {
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '%' || c == '\\' || c < 0x20 || c == 0x7f:
			return false
		case c == '/' && i+1 < len(p):
			switch n := p[i+1]; n {
			case '/':
				return false
			case '.':
				// "/." or "/.." followed by "/" or the end is a dot segment.
				j := i + 2
				if j < len(p) && p[j] == '.' {
					j++
				}
				if j == len(p) || p[j] == '/' {
					return false
				}
			}
		}
	}
	return true
}

// normalizeSegment decodes the unreserved characters of one escaped
// segment and upper-cases the hex of the other escapes.
func normalizeSegment(s string) (string, error) {
	if strings.IndexByte(s, '%') < 0 {
		for i := 0; i < len(s); i++ {
			if err := refused(s[i]); err != nil {
				return "", err
			}
		}
		return s, nil
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if err := refused(c); err != nil {
			return "", err
		}
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
			return "", ErrEscape
		}
		d := unhex(s[i+1])<<4 | unhex(s[i+2])
		if isUnreserved(d) {
			b.WriteByte(d)
		} else {
			b.WriteByte('%')
			b.WriteByte(upperHex[d>>4])
			b.WriteByte(upperHex[d&15])
		}
		i += 2
	}
	return b.String(), nil
}

// refused returns the error of a byte the normal form refuses, or nil.
func refused(c byte) error {
	switch {
	case c == '\\':
		return ErrBackslash
	case c < 0x20 || c == 0x7f:
		return ErrControl
	}
	return nil
}

// decodedPath decodes a normalized escaped path and refuses it when the
// decoded form holds what normalization removes from escaped ones: an
// empty or dot segment (from "%2F"), a backslash or a control character.
func decodedPath(norm string) (string, error) {
	var b strings.Builder
	b.Grow(len(norm))
	for i := 0; i < len(norm); i++ {
		c := norm[i]
		if c == '%' {
			c = unhex(norm[i+1])<<4 | unhex(norm[i+2])
			i += 2
		}
		if err := refused(c); err != nil {
			return "", err
		}
		b.WriteByte(c)
	}
	d := b.String()
	if strings.Contains(d, "//") || hasDotSegment(d) {
		return "", ErrEncodedSlash
	}
	return d, nil
}

func hasDotSegment(p string) bool {
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

const upperHex = "0123456789ABCDEF"

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// isUnreserved: ALPHA / DIGIT / "-" / "." / "_" / "~" (RFC 3986, 2.3).
func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

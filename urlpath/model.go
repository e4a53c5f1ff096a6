package urlpath

import (
	"strings"
	"unicode/utf8"
)

// maxDecodes is how many times the model decodes a path's escapes: once as
// every upstream does, and twice more for applications that decode a
// decoded path again.
const maxDecodes = 3

// Path is a request path read both ways (see the package documentation).
type Path struct {
	Normal  string // the normal form, escaped: what is forwarded
	Decoded string // Normal decoded (net/url's URL.Path of it)
	Model   string // the place the most lenient common upstream reads
}

// Parse reads an escaped path (its form on the wire, net/url's
// URL.EscapedPath): its normal form and its model. A path in normal form
// whose model is itself, as most are, costs no allocation.
func Parse(escaped string) (Path, error) {
	norm, dec, err := Normalize(escaped)
	if err != nil {
		return Path{}, err
	}
	m, err := model(norm)
	if err != nil {
		return Path{}, err
	}
	return Path{Normal: norm, Decoded: dec, Model: m}, nil
}

// Model returns the model of an escaped path: the path the most lenient
// common upstream takes it for, decoded (see the package documentation).
func Model(escaped string) (string, error) {
	p, err := Parse(escaped)
	return p.Model, err
}

// model reads a path in normal form.
func model(norm string) (string, error) {
	if plain(norm) {
		return norm, nil
	}
	s := norm
	for n := 1; ; n++ {
		d := decode(s)
		if err := checkDecoded(d); err != nil {
			return "", err
		}
		s = mapFullwidth(d)
		if !hasEscape(s) {
			break
		}
		if n == maxDecodes {
			return "", ErrAmbiguous
		}
	}
	return segments(s)
}

// plain reports whether the model of a path in normal form is the path
// itself: printable ASCII without "%", ";", ":$", and no segment ends in a
// dot.
func plain(p string) bool {
	for i := 0; i < len(p); i++ {
		switch c := p[i]; c {
		case '%', ';', ' ':
			return false
		case ':':
			if i+1 < len(p) && p[i+1] == '$' {
				return false
			}
		case '.':
			if i+1 == len(p) || p[i+1] == '/' {
				return false
			}
		default:
			if c >= 0x80 {
				return false
			}
		}
	}
	return true
}

// decode decodes the escapes of s; a "%" not followed by two hex digits
// (left by an earlier decoding) stays as it is.
func decode(s string) string {
	i := strings.IndexByte(s, '%')
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	b.WriteString(s[:i])
	for ; i < len(s); i++ {
		c := s[i]
		if c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			c = unhex(s[i+1])<<4 | unhex(s[i+2])
			i += 2
		}
		b.WriteByte(c)
	}
	return b.String()
}

// hasEscape reports whether s holds a "%" and two hex digits.
func hasEscape(s string) bool {
	for i := strings.IndexByte(s, '%'); i >= 0; {
		if i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			return true
		}
		j := strings.IndexByte(s[i+1:], '%')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return false
}

// checkDecoded refuses control characters and UTF-8 that is invalid, or
// overlong (a longer encoding of a character than its shortest, which
// decoders that accept it turn into "/" or ".": RFC 3629, section 10).
func checkDecoded(s string) error {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return ErrControl
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 {
			if overlong(s[i:]) {
				return ErrOverlong
			}
			return ErrUTF8
		}
		i += size
	}
	return nil
}

// overlong reports whether s starts with the lead bytes of an overlong
// UTF-8 sequence: C0 and C1 (two bytes for what one holds), E0 followed by
// 80–9F, F0 followed by 80–8F (RFC 3629, section 4).
func overlong(s string) bool {
	switch {
	case s[0] == 0xc0 || s[0] == 0xc1:
		return true
	case len(s) < 2:
		return false
	case s[0] == 0xe0:
		return s[1] >= 0x80 && s[1] <= 0x9f
	case s[0] == 0xf0:
		return s[1] >= 0x80 && s[1] <= 0x8f
	}
	return false
}

// mapFullwidth reads the fullwidth forms of ASCII (U+FF01–U+FF5E, but the
// percent sign U+FF05) and the ideographic space U+3000 as ASCII. s is
// valid UTF-8.
func mapFullwidth(s string) string {
	// Every rune mapped starts with E3 (U+3000) or EF (U+FFxx).
	if strings.IndexByte(s, 0xef) < 0 && strings.IndexByte(s, 0xe3) < 0 {
		return s
	}
	return strings.Map(func(r rune) rune {
		switch {
		case r == 0x3000:
			return ' '
		case r >= 0xff01 && r <= 0xff5e && r != 0xff05:
			return r - 0xff01 + '!'
		}
		return r
	}, s)
}

// segments reads the segments of a decoded path: path parameters, NTFS
// stream suffixes, trailing dots and spaces go; "." and empty segments go;
// ".." is ErrAmbiguous (the normal form has none left).
func segments(s string) (string, error) {
	if unchanged(s) {
		return s, nil
	}
	var b strings.Builder
	b.Grow(len(s))
	trailing := false
	for rest := s[1:]; ; {
		i := strings.IndexAny(rest, `/\`)
		seg, more := rest, i >= 0
		if more {
			seg, rest = rest[:i], rest[i+1:]
		}
		seg, err := segment(seg)
		if err != nil {
			return "", err
		}
		if trailing = seg == ""; !trailing {
			b.WriteByte('/')
			b.WriteString(seg)
		}
		if !more {
			break
		}
	}
	if trailing || b.Len() == 0 {
		b.WriteByte('/')
	}
	return b.String(), nil
}

// segment reads one decoded segment; "" is one that goes.
func segment(seg string) (string, error) {
	if i := strings.IndexByte(seg, ';'); i >= 0 {
		seg = seg[:i] // Tomcat's path parameters
	}
	if i := strings.Index(seg, ":$"); i >= 0 {
		seg = strings.TrimRight(seg[:i], ":") // an NTFS stream
	}
	switch strings.TrimRight(seg, " ") {
	case ".":
		return "", nil
	case "..":
		return "", ErrAmbiguous
	}
	return strings.TrimRight(seg, ". "), nil
}

// unchanged reports whether segments has nothing to do on s: no backslash,
// ";" or ":$", no empty segment but the last, no segment that ends in a dot
// or a space.
func unchanged(s string) bool {
	for i := 1; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\', ';':
			return false
		case ':':
			if i+1 < len(s) && s[i+1] == '$' {
				return false
			}
		case '/', '.', ' ':
			if c == '/' && s[i-1] == '/' || c != '/' && (i+1 == len(s) || s[i+1] == '/') {
				return false
			}
		}
	}
	return true
}

// Package testgoaccess reads access-log lines as GoAccess does, for tests
// of the Combined log format: the reader the lines are written for.
package testgoaccess

import (
	"fmt"
	"strconv"
	"strings"
)

// Combined is GoAccess's COMBINED log format (--log-format=COMBINED), read
// with --date-format=%d/%b/%Y and --time-format=%H:%M:%S.
const Combined = `%h %^[%d:%t %^] "%r" %s %b "%R" "%u"`

// Split splits line as GoAccess does with format: each specifier takes the
// text up to the next character of the format, skipping the character after
// a backslash (GoAccess's parse_string). It returns the tokens by specifier
// letter, still escaped; the n-th %^ is "^n".
func Split(format, line string) (map[string]string, error) {
	tokens := map[string]string{}
	skips := 0
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			if line == "" || line[0] != format[i] {
				return nil, fmt.Errorf("want %q at %q", format[i], line)
			}
			line = line[1:]
			continue
		}
		i++
		spec, delim := string(format[i]), byte(0)
		if i+1 < len(format) {
			delim = format[i+1]
		}
		j := 0
		for j < len(line) && (delim == 0 || line[j] != delim) {
			if line[j] == '\\' {
				j++
			}
			j++
		}
		if j > len(line) || (delim != 0 && j == len(line)) {
			return nil, fmt.Errorf("%%%s: no %q after it", spec, delim)
		}
		if spec == "^" {
			skips++
			spec += strconv.Itoa(skips)
		}
		tokens[spec], line = line[:j], line[j:]
	}
	return tokens, nil
}

// Unescape decodes nginx's \xHH escapes, which GoAccess reads back.
func Unescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && s[i+1] == 'x' {
			if n, err := strconv.ParseUint(s[i+2:i+4], 16, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

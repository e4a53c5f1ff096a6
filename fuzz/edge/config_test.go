package edgefuzz

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/maatproxy/maat/edge/config"
)

// FuzzParseConfig: whatever the bytes, ParseConfig returns a
// configuration or problems, never panics; every problem is a ConfigError
// naming the file, and a line inside the file when it has one.
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{
		"sites: [{hosts: [a.example], upstream: 'http://127.0.0.1:1'}]\n",
		"sites:\n  - hosts: [a]\n    upstream: http://x\n   routes:\n     - path: /a\n",
		"sites:\n  - hosts: a.example\n    upstraem: 127.0.0.1:3000\n    max_body_bytes: lots\n",
		"x: &a {upstream: 'http://127.0.0.1:1'}\nsites: [{<<: *a, hosts: [b]}, {<<: [*a], hosts: [b]}]\n",
		"timeouts: {idle: forever}\ntrusted_proxies: [10.0.0.0/33]\nsites:\n\t- x\n",
		"divert: {t: {upstream: [http://127.0.0.1:1, 'localhost:2']}}\nlog: {fingerprints: off, client-ip: hash}\n",
		"'unclosed\n", "- a\n- b\n", "{", "",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<14 {
			return
		}
		_, err := config.Parse("f.yaml", data)
		// YAML breaks lines at \n, \r, \r\n and the Unicode breaks, in
		// the text after decoding (a file with a UTF-16 byte order mark
		// is decoded as UTF-16).
		text := string(data)
		if u16 := utf16Text(data); u16 != "" {
			text = u16
		}
		text = strings.ReplaceAll(text, "\r\n", "\n")
		lines := 1 + strings.Count(text, "\n") + strings.Count(text, "\r") + strings.Count(text, "\u0085") +
			strings.Count(text, "\u2028") + strings.Count(text, "\u2029")
		for _, e := range config.Problems(err) {
			var ce *config.Error
			if !errors.As(e, &ce) || ce.File != "f.yaml" {
				t.Fatalf("%q: not a ConfigError of f.yaml: %v", data, e)
			}
			if ce.Line < 0 || ce.Line > lines {
				t.Fatalf("%q: line %d outside the file's %d lines: %v", data, ce.Line, lines, e)
			}
		}
	})
}

// utf16Text decodes data that starts with a UTF-16 byte order mark, or
// returns "".
func utf16Text(data []byte) string {
	if len(data) < 2 {
		return ""
	}
	var order binary.ByteOrder
	switch {
	case data[0] == 0xff && data[1] == 0xfe:
		order = binary.LittleEndian
	case data[0] == 0xfe && data[1] == 0xff:
		order = binary.BigEndian
	default:
		return ""
	}
	units := make([]uint16, 0, len(data)/2)
	for i := 2; i+1 < len(data); i += 2 {
		units = append(units, order.Uint16(data[i:]))
	}
	return string(utf16.Decode(units))
}

package edgefuzz

import (
	"errors"
	"strings"
	"testing"

	"github.com/maatproxy/maat/edge"
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
		_, err := edge.ParseConfig("f.yaml", data)
		// YAML breaks lines at \n, \r, \r\n and the Unicode breaks.
		text := strings.ReplaceAll(string(data), "\r\n", "\n")
		lines := 1 + strings.Count(text, "\n") + strings.Count(text, "\r") + strings.Count(text, "\u0085") +
			strings.Count(text, "\u2028") + strings.Count(text, "\u2029")
		for _, e := range edge.Problems(err) {
			var ce *edge.ConfigError
			if !errors.As(e, &ce) || ce.File != "f.yaml" {
				t.Fatalf("%q: not a ConfigError of f.yaml: %v", data, e)
			}
			if ce.Line < 0 || ce.Line > lines {
				t.Fatalf("%q: line %d outside the file's %d lines: %v", data, ce.Line, lines, e)
			}
		}
	})
}

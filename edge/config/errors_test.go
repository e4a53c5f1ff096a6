package config

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestConfigErrorsNameFileLineKey: bad files as operators write them; each
// problem names the file, the line it is on and the key, in words.
func TestConfigErrorsNameFileLineKey(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		yaml string
		want []string // the problems, exactly, in order
	}{
		{"duplicate host, on its line",
			`sites:
  - hosts: [a.example]
    upstream: http://127.0.0.1:1
  - hosts:
      - b.example
      - a.example
    upstream: http://127.0.0.1:2
`, []string{`e.yaml:6: sites[1].hosts[1]: host "a.example" is already used by sites[0]`}},
		{"indentation: the line at fault, not the block's start",
			`listen:
  https: ":443"

sites:
  - hosts: [a.example]
    upstream: http://127.0.0.1:1

  - hosts: [b.example]
    upstream: http://127.0.0.1:2
   routes:
     - path: /a/
`, []string{`e.yaml:10: "routes:" is not indented like the lines above it: line it up with the keys it belongs to (YAML nests by spaces) [did not find expected '-' indicator]`}},
		{"a key under a value",
			`sites:
  - hosts: [a.example]
    upstream: http://127.0.0.1:1
      max_body_bytes: 3
`, []string{`e.yaml:4: "max_body_bytes: 3": a "key: value" where a plain value was expected: check this line's indentation, or quote a value that holds ": " [mapping values are not allowed in this context]`}},
		{"a tab",
			"sites:\n\t- hosts: [a.example]\n", []string{"e.yaml:2: a tab indents this line; YAML indents with spaces only"}},
		{"a string for a list",
			`sites:
  - hosts: a.example
    upstream: http://127.0.0.1:1
`, []string{`e.yaml:2: sites[0].hosts: want a list ([a, b], or one "- item" per line), got the text "a.example"`}},
		{"text for a number, a list for a string, a bool",
			`limits:
  ranges: many
policy: [a, b]
sites:
  - hosts: [a.example]
    upstream: http://127.0.0.1:1
    browse: perhaps
`, []string{
				`e.yaml:2: limits.ranges: want a whole number, got the text "many"`,
				`e.yaml:3: policy: want a single value (not a list or mapping), got a list`,
				`e.yaml:7: sites[0].browse: want true or false, got the text "perhaps"`,
			}},
		{"unknown keys with and without a likely one",
			`sites:
  - hosts: [a.example]
    upstraem: http://127.0.0.1:1
    colour: blue
chalenge: {}
`, []string{
				`e.yaml:3: sites[0].upstraem: unknown key; did you mean upstream?`,
				`e.yaml:4: sites[0].colour: unknown key (known here: hosts, upstream, upstream_tls, upstream_conns, routes, max_body_bytes, root, browse, errors, compress, canonical, redirects, hsts, security_headers, headers, maintenance, access_log, policy, dry_run)`,
				`e.yaml:5: chalenge: unknown key; did you mean challenge?`,
			}},
		{"admin_auth without a user, with a short password",
			`listen:
  admin_auth:
    user: ""
    password: secret
sites: [{hosts: [a.example], upstream: 'http://127.0.0.1:1'}]
`, []string{
				`e.yaml:3: listen.admin_auth.user: a user name is needed, without ":" (RFC 7617)`,
				`e.yaml:4: listen.admin_auth.password: a password of at least 12 characters is needed (write it as ${file:…})`,
			}},
		{"admin_auth without an admin listener",
			`listen: {admin: "", admin_auth: {user: ops, password: correct-horse-battery}}
sites: [{hosts: [a.example], upstream: 'http://127.0.0.1:1'}]
`, []string{`e.yaml:1: listen.admin_auth: listen.admin is off: there is nothing to protect`}},
		{"dash for underscore",
			"log: {client-ip: hash}\nsites: [{hosts: [a.example], upstream: 'http://127.0.0.1:1'}]\n",
			[]string{"e.yaml:1: log.client-ip: unknown key; did you mean client_ip?"}},
		{"upstream without a scheme, among others",
			`sites:
  - hosts: [a.example]
    upstream: 127.0.0.1:3000
  - hosts: [b.example]
    upstream:
      - http://127.0.0.1:3001
      - localhost:3002
timeouts: {idle: forever}
`, []string{
				`e.yaml:3: sites[0].upstream: upstream "127.0.0.1:3000" has no scheme: add http:// (or https://, or unix:/path.sock)`,
				`e.yaml:7: sites[1].upstream[1]: upstream "localhost:3002" has no scheme: add http:// (or https://, or unix:/path.sock)`,
				`e.yaml:8: timeouts.idle: want a duration such as 10s or 24h, got "forever"`,
			}},
		{"semantic errors sorted by line, a missing section last",
			`store: {kind: etcd}
listen:
  https: ":99443"
`, []string{
				`e.yaml:1: store.kind: want memory or redis, got "etcd"`,
				`e.yaml:3: listen.https: port "99443" is not a number from 0 to 65535`,
				`e.yaml: sites: at least one site is needed`,
			}},
		{"merge keys and anchors keep lines",
			`x-site: &site
  upstream: http://127.0.0.1:1
sites:
  - <<: *site
    hosts: [a.example]
  - <<: *site
    hosts: [a.example]
`, []string{`e.yaml:1: x-site: unknown key (known here: listen, tls, sites, policy, challenge, store, log, fingerprints, timeouts, limits, storm, geo, divert, trusted_proxies, dry_run, procs)`,
				`e.yaml:7: sites[1].hosts[0]: host "a.example" is already used by sites[0]`}},
		{"fingerprints' keys",
			`fingerprints: { ticket_ja4: true, ticket_ja: true }
`, []string{`e.yaml:1: fingerprints.ticket_ja: unknown key; did you mean ticket_ja4?`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse("e.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatal("no error")
			}
			var got []string
			for _, e := range Problems(err) {
				got = append(got, e.Error())
				var ce *Error
				if !errors.As(e, &ce) || !errors.Is(e, ErrInvalid) {
					t.Errorf("%q is not an Error wrapping ErrInvalid", e)
				}
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func TestSuggest(t *testing.T) {
	t.Parallel()
	known := []string{"hosts", "upstream", "routes", "canonical", "max_body_bytes", "access_log"}
	for _, tt := range []struct{ key, want string }{
		{"upsteam", "upstream"}, {"upstraem", "upstream"}, {"host", "hosts"}, {"cannonical", "canonical"},
		{"max-body-bytes", "max_body_bytes"}, {"Access_Log", "access_log"}, {"route", "routes"},
		{"colour", ""}, {"x", ""}, {"upstreams_list", ""},
	} {
		if got := suggest(tt.key, known); got != tt.want {
			t.Errorf("suggest(%q) = %q, want %q", tt.key, got, tt.want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"abc", "", 3}, {"kitten", "sitting", 3}, {"upstraem", "upstream", 1}, {"ab", "ba", 1}, {"same", "same", 0}} {
		if d := editDistance(tt.a, tt.b); d != tt.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tt.a, tt.b, d, tt.d)
		}
	}
}

// BenchmarkParse reads the example configuration: every key.
func BenchmarkParse(b *testing.B) {
	data, err := os.ReadFile("../../edge.example.yaml")
	if err != nil {
		b.Skip(err)
	}
	data = append(data, "sites: [{hosts: [a.example], upstream: 'http://127.0.0.1:1'}]\n"...)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse("edge.example.yaml", data); err != nil && !strings.Contains(err.Error(), "sites") {
			b.Fatal(err)
		}
	}
}

// BenchmarkSyntaxErrorLine places an indentation error at the end of a
// file of 1,000 lines: the worst case of the search for its line.
func BenchmarkSyntaxErrorLine(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("sites:\n")
	for i := range 333 {
		fmt.Fprintf(&sb, "  - hosts: [h%d.example]\n    upstream: http://127.0.0.1:1\n\n", i)
	}
	sb.WriteString("   routes: []\n")
	data := []byte(sb.String())
	b.ReportAllocs()
	for b.Loop() {
		_, err := Parse("big.yaml", data)
		if err == nil || !strings.Contains(err.Error(), "big.yaml:1001:") {
			b.Fatal(err)
		}
	}
}

package config

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		yaml string
		want []string // each must appear in the error
	}{
		{"unknown top-level key", "sites: [{hosts: [a.test], upstream: 'http://127.0.0.1:1'}]\nlisten_on: 1\n",
			[]string{"cfg.yaml:2: listen_on: unknown key; did you mean listen?"}},
		{"unknown nested key", "sites:\n  - hosts: [a.test]\n    upstream: http://127.0.0.1:1\n    upsteam: x\n",
			[]string{"cfg.yaml:4: sites[0].upsteam: unknown key; did you mean upstream?"}},
		{"bad upstream scheme", "sites:\n  - hosts: [a.test]\n    upstream: ftp://127.0.0.1:1\n",
			[]string{"cfg.yaml:3:", "want http://, https:// or unix:/path.sock"}},
		{"upstream without a scheme", "sites:\n  - hosts: [a.test]\n    upstream: 127.0.0.1:3000\n",
			[]string{"cfg.yaml:3:", "add http://"}},
		{"bad duration", "timeouts: {idle: forever}\nsites: [{hosts: [a.test], upstream: 'http://127.0.0.1:1'}]\n",
			[]string{"cfg.yaml:1:", "a duration"}},
		{"bad cidr", "trusted_proxies: [10.0.0.0/33]\nsites: [{hosts: [a.test], upstream: 'http://127.0.0.1:1'}]\n",
			[]string{"cfg.yaml:1:", "CIDR"}},
		{"several problems at once", "tls: {mode: magic}\nstore: {kind: etcd}\nsites: []\n",
			[]string{"tls: certs: invalid configuration: unknown mode \"magic\"", "store.kind", "sites: at least one site"}},
		{"duplicate host", "sites: [{hosts: [a.test], upstream: 'http://127.0.0.1:1'}, {hosts: [A.test.], upstream: 'http://127.0.0.1:2'}]\n",
			[]string{"sites[1].hosts[0]", "already used by sites[0]"}},
		{"route path", "sites: [{hosts: [a.test], upstream: 'http://127.0.0.1:1', routes: [{path: api, upstream: 'http://127.0.0.1:2'}, {path: /.maat/x/, upstream: 'http://127.0.0.1:2'}]}]\n",
			[]string{"sites[0].routes[0].path", "sites[0].routes[1].path: /.maat/ belongs to the edge"}},
		{"route path read otherwise", "sites: [{hosts: [a.test], upstream: 'http://127.0.0.1:1', routes: [{path: /api./, upstream: 'http://127.0.0.1:2'}, {path: '/v1;x/', upstream: 'http://127.0.0.1:2'}, {path: /x/..;/y/, upstream: 'http://127.0.0.1:2'}, {path: /API/, match_case: false, upstream: 'http://127.0.0.1:2'}]}]\n",
			[]string{`sites[0].routes[0].path: upstreams read "/api./" as "/api/"`, `sites[0].routes[1].path: upstreams read "/v1;x/" as "/v1/"`, "sites[0].routes[2].path", "read differently"}},
		{"files without files", "tls: {mode: files}\nsites: [{hosts: [a.test], upstream: 'http://127.0.0.1:1'}]\n",
			[]string{"needs cert_file and key_file"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse("cfg.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error does not wrap ErrInvalid: %v", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestParseGood(t *testing.T) {
	t.Parallel()
	cfg, err := Parse("cfg.yaml", []byte(`
listen: { https: ":8443", http: "", admin: "" }
tls: { mode: self-signed }
sites:
  - hosts: [example.org, www.example.org]
    upstream: [http://127.0.0.1:3000, "http://[::1]"]
    routes:
      - { path: /api/, upstream: http://127.0.0.1:3001 }
trusted_proxies: [10.0.0.0/8, 192.0.2.1]
timeouts: { drain: 3s }
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := len(cfg.Sites[0].Upstream); got != 2 || cfg.Sites[0].Upstream[1].Host != "[::1]:80" {
		t.Errorf("upstreams: %v", cfg.Sites[0].Upstream)
	}
	if cfg.Listen.HTTP != "" || !cfg.Listen.HTTP3Enabled() || cfg.Timeouts.Drain.D() != 3*time.Second || cfg.Timeouts.Idle.D() != 120*time.Second {
		t.Errorf("defaults and overrides: %+v", cfg)
	}
	if len(cfg.TrustedProxies) != 2 || netip.Prefix(cfg.TrustedProxies[1]).Bits() != 32 {
		t.Errorf("trusted proxies: %v", cfg.TrustedProxies)
	}
	if _, err := Parse("empty.yaml", nil); err == nil || !strings.Contains(err.Error(), "at least one site") {
		t.Errorf("an empty file: %v", err)
	}
}

// TestValidated: Load and Parse return a Config marked valid, so that the
// edge does not validate it again; Read's is marked once Check finds it
// valid; Validate marks a Config built in code, and unmarks it when it
// finds a problem.
func TestValidated(t *testing.T) {
	t.Parallel()
	const good = "tls: {mode: self-signed}\nsites: [{hosts: [a.test], upstream: 'http://127.0.0.1:1'}]\n"
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if cfg := Default(); cfg.Validated() {
		t.Error("Default() is marked valid")
	}
	if cfg, err := Parse("c.yaml", []byte(good)); err != nil || !cfg.Validated() {
		t.Errorf("Parse: %v, marked %t", err, cfg.Validated())
	}
	goodFile := write("good.yaml", good)
	if cfg, err := Load(goodFile); err != nil || !cfg.Validated() {
		t.Errorf("Load: %v, marked %t", err, cfg.Validated())
	}
	cfg, err := Read(goodFile)
	if err != nil || cfg.Validated() {
		t.Fatalf("Read: %v, marked %t before Check", err, cfg.Validated())
	}
	if err := cfg.Check(); err != nil || !cfg.Validated() {
		t.Errorf("Check: %v, marked %t", err, cfg.Validated())
	}

	for _, tt := range []struct{ name, text, want string }{
		{"invalid", "limits: {h2_streams: 0}\n" + good, "limits.h2_streams"},
		// Validate alone finds nothing: idle keeps its default.
		{"undecodable", "timeouts: {idle: forever}\n" + good, "timeouts.idle"},
	} {
		cfg, err := Read(write(tt.name+".yaml", tt.text))
		if err != nil {
			t.Fatalf("%s: Read: %v", tt.name, err)
		}
		if err := cfg.Check(); err == nil || !strings.Contains(err.Error(), tt.want) || cfg.Validated() {
			t.Errorf("%s: Check: %v, marked %t; want a problem at %s, unmarked", tt.name, err, cfg.Validated(), tt.want)
		}
	}

	built := Default()
	built.TLS.Mode = "self-signed"
	up, err := ParseUpstream("http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	built.Sites = []Site{{Hosts: []string{"a.test"}, Upstream: Upstreams{up}}}
	if err := built.Validate(); err != nil || !built.Validated() {
		t.Errorf("Validate of a good Config built in code: %v, marked %t", err, built.Validated())
	}
	built.Limits.H2Streams = 0
	if !built.Validated() {
		t.Error("a change took the mark off: only Validate sets it")
	}
	if err := built.Validate(); err == nil || built.Validated() {
		t.Errorf("Validate of a bad Config: %v, marked %t", err, built.Validated())
	}
}

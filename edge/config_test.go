package edge

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseConfigErrors(t *testing.T) {
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
		{"files without files", "tls: {mode: files}\nsites: [{hosts: [a.test], upstream: 'http://127.0.0.1:1'}]\n",
			[]string{"needs cert_file and key_file"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseConfig("cfg.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrConfig) {
				t.Errorf("error does not wrap ErrConfig: %v", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestParseConfigGood(t *testing.T) {
	t.Parallel()
	cfg, err := ParseConfig("cfg.yaml", []byte(`
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
	if cfg.Listen.HTTP != "" || !cfg.Listen.http3() || cfg.Timeouts.Drain.D() != 3*time.Second || cfg.Timeouts.Idle.D() != 120*time.Second {
		t.Errorf("defaults and overrides: %+v", cfg)
	}
	if len(cfg.TrustedProxies) != 2 || netipPrefix(cfg.TrustedProxies[1]).Bits() != 32 {
		t.Errorf("trusted proxies: %v", cfg.TrustedProxies)
	}
	if _, err := ParseConfig("empty.yaml", nil); err == nil || !strings.Contains(err.Error(), "at least one site") {
		t.Errorf("an empty file: %v", err)
	}
}

func TestClientAddr(t *testing.T) {
	t.Parallel()
	cfg, err := ParseConfig("c", []byte("trusted_proxies: [10.0.0.0/8]\nsites: [{hosts: [a.test], upstream: 'http://127.0.0.1:1'}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	var tp trustedProxies
	for _, p := range cfg.TrustedProxies {
		tp = append(tp, netipPrefix(p))
	}
	for _, tt := range []struct {
		peer string
		xff  []string
		want string
	}{
		{"203.0.113.1", []string{"1.2.3.4"}, "203.0.113.1"},             // untrusted peer: XFF ignored
		{"10.0.0.1", []string{"1.2.3.4"}, "1.2.3.4"},                    // trusted peer
		{"10.0.0.1", []string{"6.6.6.6, 1.2.3.4, 10.1.1.1"}, "1.2.3.4"}, // right-most untrusted
		{"10.0.0.1", []string{"6.6.6.6", "1.2.3.4"}, "1.2.3.4"},         // several header lines
		{"10.0.0.1", []string{"garbage, 10.2.2.2"}, "10.2.2.2"},         // stop at garbage
		{"10.0.0.1", nil, "10.0.0.1"},                                   // no header
		{"10.0.0.1", []string{"::ffff:1.2.3.4"}, "1.2.3.4"},             // mapped
	} {
		got := tp.clientAddr(peerAddr(tt.peer+":1"), tt.xff)
		if got.String() != tt.want {
			t.Errorf("clientAddr(%s, %q) = %s, want %s", tt.peer, tt.xff, got, tt.want)
		}
	}
}

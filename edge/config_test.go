package edge

import (
	"errors"
	"net/netip"
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
		{"route path read otherwise", "sites: [{hosts: [a.test], upstream: 'http://127.0.0.1:1', routes: [{path: /api./, upstream: 'http://127.0.0.1:2'}, {path: '/v1;x/', upstream: 'http://127.0.0.1:2'}, {path: /x/..;/y/, upstream: 'http://127.0.0.1:2'}, {path: /API/, match_case: false, upstream: 'http://127.0.0.1:2'}]}]\n",
			[]string{`sites[0].routes[0].path: upstreams read "/api./" as "/api/"`, `sites[0].routes[1].path: upstreams read "/v1;x/" as "/v1/"`, "sites[0].routes[2].path", "read differently"}},
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
	unknown, obf := hiddenClient("unknown").String(), hiddenClient("_hidden").String()
	for _, tt := range []struct {
		peer string
		xff  []string
		want string // "" = refused (ok false)
	}{
		{"203.0.113.1", []string{"1.2.3.4"}, "203.0.113.1"},             // untrusted peer: XFF ignored
		{"203.0.113.1", []string{"garbage"}, "203.0.113.1"},             // ... even garbage
		{"10.0.0.1", []string{"1.2.3.4"}, "1.2.3.4"},                    // trusted peer
		{"10.0.0.1", []string{"6.6.6.6, 1.2.3.4, 10.1.1.1"}, "1.2.3.4"}, // right-most untrusted
		{"10.0.0.1", []string{"6.6.6.6", "1.2.3.4"}, "1.2.3.4"},         // several header lines
		{"10.0.0.1", []string{"garbage, 1.2.3.4"}, "1.2.3.4"},           // garbage left of the client is never read
		{"10.0.0.1", nil, "10.0.0.1"},                                   // no header: the proxy's own request
		{"10.0.0.1", []string{"::ffff:1.2.3.4"}, "1.2.3.4"},             // mapped
		{"10.0.0.1", []string{"1.2.3.4:5678"}, "1.2.3.4"},               // with a port
		{"10.0.0.1", []string{"1.2.3.4:5678, 10.9.9.9:80"}, "1.2.3.4"},  // ports all along
		{"10.0.0.1", []string{"[2001:db8::7]:443"}, "2001:db8::7"},      // IPv6 with a port
		{"10.0.0.1", []string{"[2001:db8::7]"}, "2001:db8::7"},          // IPv6 in brackets
		{"10.0.0.1", []string{"2001:db8::7"}, "2001:db8::7"},            // bare IPv6
		{"10.0.0.1", []string{`"[2001:db8::7]:443"`}, "2001:db8::7"},    // quoted (RFC 7239)
		{"10.0.0.1", []string{"1.2.3.4, , 10.1.1.1"}, "1.2.3.4"},        // an empty element
		{"10.0.0.1", []string{"unknown"}, unknown},                      // hidden: counted apart
		{"10.0.0.1", []string{"UNKNOWN, 10.1.1.1"}, unknown},            // case folded
		{"10.0.0.1", []string{"_hidden"}, obf},                          // obfuscated identifier
		{"10.0.0.1", []string{"garbage"}, ""},                           // garbage: refused, never the proxy
		{"10.0.0.1", []string{"garbage, 10.2.2.2"}, ""},                 // garbage right of the trusted hops
		{"10.0.0.1", []string{"1.2.3.4:99999"}, ""},                     // a port out of range
		{"10.0.0.1", []string{"[1.2.3.4]"}, ""},                         // IPv4 in brackets
		{"10.0.0.1", []string{"fe80::1%eth0"}, ""},                      // a zone
		{"10.0.0.1", []string{"_"}, ""},                                 // an empty identifier
		{"10.0.0.1", []string{"_a/b"}, ""},                              // not an identifier
		{"10.0.0.1", []string{"1.2.3.4 5.6.7.8"}, ""},                   // no comma
	} {
		got, ok := tp.clientAddr(peerAddr(tt.peer+":1"), tt.xff)
		switch {
		case tt.want == "" && ok:
			t.Errorf("clientAddr(%s, %q) = %s, want it refused", tt.peer, tt.xff, got)
		case tt.want != "" && (!ok || got.String() != tt.want):
			t.Errorf("clientAddr(%s, %q) = %s, %t, want %s", tt.peer, tt.xff, got, ok, tt.want)
		}
	}
	if unknown == obf || !netip.MustParsePrefix("100::/64").Contains(hiddenClient("x")) {
		t.Errorf("hidden clients %s and %s: want distinct addresses in 100::/64", unknown, obf)
	}
}

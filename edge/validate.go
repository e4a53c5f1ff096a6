package edge

import (
	"maps"
	"slices"

	"encoding/base64"
	"errors"
	"fmt"
	"golang.org/x/crypto/bcrypt"

	"github.com/maatproxy/maat/static"
	"net"
	"strings"
)

// Validate reports every problem of the configuration at once.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, &ConfigError{File: c.path, Key: key, Err: fmt.Errorf(format, args...)})
	}
	checkAddr := func(key, addr string, required bool) {
		if addr == "" {
			if required {
				bad(key, "an address is required, e.g. \":443\"")
			}
			return
		}
		if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
			bad(key, "want host:port or :port, got %q", addr)
		}
	}
	checkAddr("listen.https", c.Listen.HTTPS, true)
	checkAddr("listen.http", c.Listen.HTTP, false)
	checkAddr("listen.admin", c.Listen.Admin, false)

	switch c.TLS.Mode {
	case "acme":
		if c.TLS.Cache == "" {
			bad("tls.cache", "acme needs a cache directory for certificates and keys")
		}
		if a := c.TLS.ACME; a.EABKeyID != "" {
			if _, err := decodeEABKey(a.EABKey); err != nil || a.EABKey == "" {
				bad("tls.acme.eab_hmac_key", "the CA's base64url MAC key is needed with eab_key_id")
			}
		}
	case "self-signed":
	case "files":
		if c.TLS.CertFile == "" || c.TLS.KeyFile == "" {
			bad("tls", "mode files needs cert_file and key_file")
		}
	default:
		bad("tls.mode", "want acme, self-signed or files, got %q", c.TLS.Mode)
	}

	if len(c.Sites) == 0 && !c.Demo {
		bad("sites", "at least one site is needed")
	}
	seen := map[string]int{}
	for i, s := range c.Sites {
		key := fmt.Sprintf("sites[%d]", i)
		if len(s.Hosts) == 0 && !c.Demo {
			bad(key+".hosts", "a site needs at least one host name")
		}
		for j, h := range s.Hosts {
			hk := fmt.Sprintf("%s.hosts[%d]", key, j)
			n := normalizeHost(h)
			switch {
			case n == "" || strings.ContainsAny(n, "/:@ ") && net.ParseIP(n) == nil:
				bad(hk, "not a host name: %q", h)
			case seen[n] > 0:
				bad(hk, "host %q is already used by sites[%d]", h, seen[n]-1)
			default:
				seen[n] = i + 1
			}
		}
		checkTarget(bad, key, s.Upstream, s.Root)
		if s.MaxBodyBytes < 0 {
			bad(key+".max_body_bytes", "must not be negative")
		}
		if s.Canonical != "" && !slices.Contains(normalizedHosts(s.Hosts), normalizeHost(s.Canonical)) {
			bad(key+".canonical", "%q is not one of the site's hosts", s.Canonical)
		}
		for j, r := range s.Redirects {
			rk := fmt.Sprintf("%s.redirects[%d]", key, j)
			if !strings.HasPrefix(r.From, "/") {
				bad(rk+".from", "a path starting with /, got %q", r.From)
			}
			if !strings.HasPrefix(r.To, "/") && !strings.HasPrefix(r.To, "https://") && !strings.HasPrefix(r.To, "http://") || strings.HasPrefix(r.To, "//") {
				bad(rk+".to", "a path starting with / or an http(s):// URL, got %q", r.To)
			}
			switch r.Status {
			case 0, 301, 302, 307, 308:
			default:
				bad(rk+".status", "want 301, 302, 307 or 308, got %d", r.Status)
			}
		}
		if s.HSTS != nil && s.HSTS.MaxAge < 0 {
			bad(key+".hsts.max_age", "must not be negative")
		}
		checkHeaders(bad, key+".headers", s.Headers)
		if a := s.AccessLog; a != nil {
			if a.Path == "" {
				bad(key+".access_log.path", "a file path or \"-\" is needed")
			}
			if a.Format != "" && a.Format != "combined" && a.Format != "json" {
				bad(key+".access_log.format", "want combined or json, got %q", a.Format)
			}
		}
		for j, r := range s.Routes {
			rk := fmt.Sprintf("%s.routes[%d]", key, j)
			checkHeaders(bad, rk+".headers", r.Headers)
			if a := r.BasicAuth; a != nil {
				if len(a.Users) == 0 {
					bad(rk+".basic_auth.users", "at least one user is needed")
				}
				for u, h := range a.Users {
					if u == "" || strings.Contains(u, ":") {
						bad(rk+".basic_auth.users", "bad user name %q", u)
					}
					if _, err := bcrypt.Cost([]byte(h)); err != nil {
						bad(rk+".basic_auth.users."+u, "not a bcrypt hash (make one with htpasswd -nbB user password)")
					}
				}
			}
			if !strings.HasPrefix(r.Path, "/") {
				bad(rk+".path", "a path prefix starting with /, got %q", r.Path)
			}
			if strings.HasPrefix(r.Path, "/.maat/") {
				bad(rk+".path", "/.maat/ belongs to the edge")
			}
			checkTarget(bad, rk, r.Upstream, r.Root)
		}
	}

	if c.Challenge.PassTTL <= 0 {
		bad("challenge.pass_ttl", "must be positive")
	}
	for i, b := range c.Challenge.Bind {
		if b != "ip_prefix" && b != "ja4" {
			bad(fmt.Sprintf("challenge.bind[%d]", i), "want ip_prefix or ja4, got %q", b)
		}
	}
	switch c.Store.Kind {
	case "memory":
	case "redis":
		if !strings.HasPrefix(c.Store.URL, "redis://") && !strings.HasPrefix(c.Store.URL, "rediss://") && !strings.HasPrefix(c.Store.URL, "unix://") {
			bad("store.url", "want redis://host:port/db, got %q", c.Store.URL)
		}
	default:
		bad("store.kind", "want memory or redis, got %q", c.Store.Kind)
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level", "want debug, info, warn or error, got %q", c.Log.Level)
	}
	switch c.Log.Format {
	case "", "text", "json":
	default:
		bad("log.format", "want text or json, got %q", c.Log.Format)
	}
	switch c.Log.ClientIP {
	case "full", "prefix", "hash", "none":
	default:
		bad("log.client_ip", "want full, prefix, hash or none, got %q", c.Log.ClientIP)
	}
	if c.Log.MaxSizeMB < 0 || c.Log.MaxFiles < 0 {
		bad("log", "max_size_mb and max_files must not be negative")
	}
	if c.Log.SampleAllow < 0 || c.Log.SampleAllow > 1 {
		bad("log.sample_allow", "want a share between 0 and 1")
	}
	t := c.Timeouts
	for _, d := range []struct {
		key string
		v   Duration
	}{{"handshake", t.Handshake}, {"read_header", t.ReadHeader}, {"idle", t.Idle}, {"upstream_dial", t.UpstreamDial}, {"drain", t.Drain}, {"fail_pause", t.FailPause}} {
		if d.v <= 0 {
			bad("timeouts."+d.key, "must be positive")
		}
	}
	if c.Limits.UpstreamConns < 1 {
		bad("limits.upstream_conns", "must be at least 1")
	}
	if c.Limits.UpstreamQueue <= 0 {
		bad("limits.upstream_queue", "must be positive")
	}
	return errors.Join(errs...)
}

// checkTarget: an upstream or a static root, exactly one.
func checkTarget(bad func(string, string, ...any), key string, up Upstreams, root string) {
	hasUp := len(up) > 0 && up[0] != nil
	switch {
	case hasUp && root != "":
		bad(key, "upstream and root exclude each other")
	case !hasUp && root == "":
		bad(key+".upstream", "an upstream URL (or a root directory of static files) is needed")
	case root != "":
		sc := static.Config{Root: root}
		if err := sc.Validate(); err != nil {
			bad(key+".root", "%v", err)
		}
	}
}

func checkHeaders(bad func(string, string, ...any), key string, h HeaderRules) {
	for _, ops := range []struct {
		name string
		ops  HeaderOps
	}{{"request", h.Request}, {"response", h.Response}} {
		names := slices.Collect(maps.Keys(ops.ops.Set))
		names = append(names, slices.Collect(maps.Keys(ops.ops.Add))...)
		names = append(names, ops.ops.Remove...)
		for _, n := range names {
			if !validHeaderName(n) {
				bad(key+"."+ops.name, "not a header name: %q", n)
			} else if len(n) >= 7 && strings.EqualFold(n[:7], "x-maat-") {
				bad(key+"."+ops.name, "X-Maat-* headers belong to the edge: %q", n)
			}
		}
		for _, m := range []map[string]string{ops.ops.Set, ops.ops.Add} {
			for n, v := range m {
				if strings.ContainsAny(v, "\r\n\x00") {
					bad(key+"."+ops.name, "value of %s has a line break", n)
				}
			}
		}
	}
}

func validHeaderName(n string) bool {
	if n == "" {
		return false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

func normalizedHosts(hs []string) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = normalizeHost(h)
	}
	return out
}

func decodeEABKey(s string) ([]byte, error) {
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
}

// normalizeHost lowercases a host name and drops a trailing dot.
func normalizeHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".")
}

package config

import (
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/maatproxy/maat/certs"
	"github.com/maatproxy/maat/challenge"
	"github.com/maatproxy/maat/fplog"
	"github.com/maatproxy/maat/geo"
	"github.com/maatproxy/maat/policy"
	"github.com/maatproxy/maat/static"
	"github.com/maatproxy/maat/urlpath"
)

// problems collects a configuration's errors under their YAML keys.
type problems struct {
	file string
	errs []error
}

// add records a problem of key, written as format says.
func (p *problems) add(key, format string, args ...any) {
	p.errs = append(p.errs, &Error{File: p.file, Key: key, Err: fmt.Errorf(format, args...)})
}

// leaf records what a leaf's own Validate or Parse said about key: the
// leaf owns its allowed values, the edge only says where they were written.
func (p *problems) leaf(key string, err error) {
	for _, e := range Problems(err) { // errors.Join'ed problems, one each
		p.errs = append(p.errs, &Error{File: p.file, Key: key, Err: e})
	}
}

// Validate reports every problem of the configuration at once. It marks a
// Config it finds valid (see Validated).
func (c *Config) Validate() error {
	p := &problems{file: c.File}
	c.validateListen(p)
	c.validateTLS(p)
	c.validateSites(p)
	c.validateChallenge(p)
	c.validateStore(p)
	c.validateLog(p)
	c.validateTimeouts(p)
	c.validateLimits(p)
	c.validateDivert(p)
	c.validateGeo(p)
	c.validateUpstreamTLS(p)
	c.validateUpstreamConns(p)
	c.validateStorm(p)
	c.validateProcs(p)
	c.valid = len(p.errs) == 0
	return errors.Join(p.errs...)
}

// Validated reports whether c is known to be valid: Load or Parse returned
// it, or Validate found it valid. A Config changed after that keeps the
// mark; whoever changes one validates it again (package edge's New,
// NewHandler and Reload validate only a Config without the mark, once).
func (c *Config) Validated() bool { return c.valid }

func (c *Config) validateListen(p *problems) {
	check := func(key, addr string, required bool) {
		if addr == "" {
			if required {
				p.add(key, "an address is required, e.g. \":443\"")
			}
			return
		}
		_, port, err := net.SplitHostPort(addr)
		if err != nil || port == "" {
			p.add(key, "want host:port or :port, got %q", addr)
			return
		}
		if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
			if _, err := net.LookupPort("tcp", port); err != nil {
				p.add(key, "port %q is not a number from 0 to 65535", port)
			}
		}
	}
	check("listen.https", c.Listen.HTTPS, true)
	check("listen.http", c.Listen.HTTP, false)
	check("listen.admin", c.Listen.Admin, false)
	if a := c.Listen.AdminAuth; a != nil {
		if a.User == "" || strings.ContainsAny(a.User, ":\x00\r\n") {
			p.add("listen.admin_auth.user", "a user name is needed, without \":\" (RFC 7617)")
		}
		if len(a.Password) < minAdminPassword {
			p.add("listen.admin_auth.password", "a password of at least %d characters is needed (write it as ${file:…})", minAdminPassword)
		}
		if c.Listen.Admin == "" {
			p.add("listen.admin_auth", "listen.admin is off: there is nothing to protect")
		}
	}
}

// minAdminPassword is the shortest listen.admin_auth.password.
const minAdminPassword = 12

func (c *Config) validateTLS(p *problems) {
	cc := c.Certs()
	if c.TLS.ACME.EABKeyID != "" {
		if key, err := decodeEABKey(c.TLS.ACME.EABKey); err != nil || len(key) == 0 {
			p.add("tls.acme.eab_hmac_key", "the CA's base64url MAC key is needed with eab_key_id")
		}
	}
	if c.Demo || len(c.Sites) == 0 && cc.Mode == certs.ModeACME {
		// A demo has no hosts (any name); a configuration without sites is
		// reported under sites. The stand-in is a name ACME would accept.
		cc.Hosts = []string{"stand-in.example"}
	}
	p.leaf("tls", cc.Validate())
}

func (c *Config) validateSites(p *problems) {
	if len(c.Sites) == 0 && !c.Demo {
		p.add("sites", "at least one site is needed")
	}
	seen := map[string]int{}
	for i := range c.Sites {
		s := &c.Sites[i]
		key := fmt.Sprintf("sites[%d]", i)
		if len(s.Hosts) == 0 && !c.Demo {
			p.add(key+".hosts", "a site needs at least one host name")
		}
		for j, h := range s.Hosts {
			hk := fmt.Sprintf("%s.hosts[%d]", key, j)
			n := NormalizeHost(h)
			switch {
			case n == "" || strings.ContainsAny(n, "/:@ ") && net.ParseIP(n) == nil:
				p.add(hk, "not a host name: %q", h)
			case seen[n] > 0:
				p.add(hk, "host %q is already used by sites[%d]", h, seen[n]-1)
			default:
				seen[n] = i + 1
			}
		}
		checkTarget(p, key, s.Upstream, s.Root, s.Static(c.Limits.Ranges))
		if s.MaxBodyBytes < 0 {
			p.add(key+".max_body_bytes", "must not be negative")
		}
		if s.Canonical != "" && !slices.Contains(normalizedHosts(s.Hosts), NormalizeHost(s.Canonical)) {
			p.add(key+".canonical", "%q is not one of the site's hosts", s.Canonical)
		}
		checkRedirects(p, key, s.Redirects)
		if s.HSTS != nil && s.HSTS.MaxAge < 0 {
			p.add(key+".hsts.max_age", "must not be negative")
		}
		checkHeaders(p, key+".headers", s.Headers)
		if a := s.AccessLog; a != nil {
			if a.Path == "" {
				p.add(key+".access_log.path", "a file path or \"-\" is needed")
			}
			ac := fplog.AccessConfig{Path: a.Path, Format: a.Format, ClientIP: c.Log.ClientIP, HashKey: validationKey()}
			p.leaf(key+".access_log", ac.Validate())
		}
		for j := range s.Routes {
			c.validateRoute(p, fmt.Sprintf("%s.routes[%d]", key, j), &s.Routes[j])
		}
	}
}

// validationKey stands in for the secret a hash key is derived from, which
// Validate does not read.
func validationKey() []byte { return make([]byte, 32) }

func (c *Config) validateRoute(p *problems, key string, r *Route) {
	checkHeaders(p, key+".headers", r.Headers)
	if a := r.BasicAuth; a != nil {
		if len(a.Users) == 0 {
			p.add(key+".basic_auth.users", "at least one user is needed")
		}
		for u, h := range a.Users {
			if u == "" || strings.Contains(u, ":") {
				p.add(key+".basic_auth.users", "bad user name %q", u)
			}
			if _, err := bcrypt.Cost([]byte(h)); err != nil {
				p.add(key+".basic_auth.users."+u, "not a bcrypt hash (make one with htpasswd -nbB user password)")
			}
		}
	}
	if !strings.HasPrefix(r.Path, "/") {
		p.add(key+".path", "a path prefix starting with /, got %q", r.Path)
	} else {
		// Requests match on their model (urlpath): a prefix that is not its
		// own model would never match as written.
		switch m, err := urlpath.Model((&url.URL{Path: r.Path}).EscapedPath()); {
		case err != nil:
			p.add(key+".path", "%q: %v", r.Path, err)
		case m != r.Path:
			p.add(key+".path", "upstreams read %q as %q: write that", r.Path, m)
		}
	}
	if strings.HasPrefix(r.Path, "/.maat/") {
		p.add(key+".path", "/.maat/ belongs to the edge")
	}
	checkTarget(p, key, r.Upstream, r.Root, r.Static(c.Limits.Ranges))
	if r.Root == "" && (r.StripPrefix || len(r.Errors) > 0) {
		p.add(key, "strip_prefix and errors need a root")
	}
}

func checkRedirects(p *problems, key string, rs []Redirect) {
	for j, r := range rs {
		rk := fmt.Sprintf("%s.redirects[%d]", key, j)
		if !strings.HasPrefix(r.From, "/") {
			p.add(rk+".from", "a path starting with /, got %q", r.From)
		}
		isPath := strings.HasPrefix(r.To, "/") && !strings.HasPrefix(r.To, "//")
		isURL := strings.HasPrefix(r.To, "https://") || strings.HasPrefix(r.To, "http://")
		if !isPath && !isURL || strings.ContainsAny(r.To, "\\\r\n") {
			p.add(rk+".to", "a path starting with / or an http(s):// URL, got %q", r.To)
		}
		switch r.Status {
		case 0, 301, 302, 307, 308:
		default:
			p.add(rk+".status", "want 301, 302, 307 or 308, got %d", r.Status)
		}
	}
}

func (c *Config) validateChallenge(p *problems) {
	if c.Challenge.PassTTL <= 0 {
		p.add("challenge.pass_ttl", "must be positive")
	}
	_, err := challenge.ParseBinding(c.Challenge.Bind)
	p.leaf("challenge.bind", err)
	if w := c.Challenge.Wait; w.MaxWeight < -1 {
		p.add("challenge.wait.max_weight", "want a weight, 0 (the policy's) or -1 (never), got %d", w.MaxWeight)
	}
	if d := c.Challenge.Wait.Duration.D(); d < time.Second || d > challenge.MaxWait/2 {
		p.add("challenge.wait.duration", "want 1s to %v, got %v", challenge.MaxWait/2, d)
	}
	when, err := policy.CompileCondition(c.Challenge.When)
	p.leaf("challenge.when", err)
	if when.UsesPressure() {
		for _, s := range c.StaticOnly() {
			p.add("challenge.when", "%q reads the upstream's pressure (pressure, storm or upstream), but %s has no upstream (static files only) whose pressure could be measured: give it an upstream, or challenge by another condition", c.Challenge.When, s)
		}
	}
}

// StaticOnly names the sites ("sites[1] (static.example)") that have no
// upstream, neither their own nor a route's: static files only. Their
// pressure is never measured.
func (c *Config) StaticOnly() []string {
	var out []string
	for _, i := range c.StaticOnlyIndexes() {
		s := &c.Sites[i]
		name := "*"
		if len(s.Hosts) > 0 {
			name = s.Hosts[0]
		}
		out = append(out, fmt.Sprintf("sites[%d] (%s)", i, name))
	}
	return out
}

// StaticOnlyIndexes are the indexes in sites of those StaticOnly names.
func (c *Config) StaticOnlyIndexes() []int {
	var out []int
	for i := range c.Sites {
		if !c.Sites[i].hasUpstream() {
			out = append(out, i)
		}
	}
	return out
}

// hasUpstream reports whether the site, or one of its routes, sends
// requests to an upstream.
func (s *Site) hasUpstream() bool {
	if len(s.Upstream) > 0 && s.Upstream[0] != nil {
		return true
	}
	for j := range s.Routes {
		if r := &s.Routes[j]; len(r.Upstream) > 0 && r.Upstream[0] != nil {
			return true
		}
	}
	return false
}

func (c *Config) validateDivert(p *problems) {
	for name, d := range c.Divert {
		key := "divert." + name
		if len(d.Upstream) == 0 || d.Upstream[0] == nil {
			p.add(key+".upstream", "an upstream URL is needed")
		}
		if d.MaxConcurrent < 0 || d.MaxBytes < 0 || d.MaxDuration < 0 {
			p.add(key, "max_concurrent, max_bytes and max_duration must not be negative")
		}
	}
}

// validateUpstreamTLS checks CA files and that one https:// address is not
// given two different TLS settings (the edge keeps one pool per address).
func (c *Config) validateUpstreamTLS(p *problems) {
	seen := map[string]UpstreamTLS{}
	check := func(key string, us Upstreams, ut UpstreamTLS) {
		if ut.CAFile != "" {
			if _, err := LoadRoots(ut.CAFile); err != nil {
				p.add(key+".upstream_tls.ca_file", "%v", err)
			}
		}
		for _, u := range us {
			if u == nil || u.Scheme != "https" {
				continue
			}
			if prev, ok := seen[u.Host]; ok && prev != ut {
				p.add(key+".upstream_tls", "%s is configured elsewhere with other TLS settings", u.Host)
			}
			seen[u.Host] = ut
		}
	}
	for i := range c.Sites {
		s := &c.Sites[i]
		key := fmt.Sprintf("sites[%d]", i)
		check(key, s.Upstream, s.UpstreamTLS)
		for j := range s.Routes {
			r := &s.Routes[j]
			ut := r.UpstreamTLS
			if ut == (UpstreamTLS{}) {
				ut = s.UpstreamTLS
			}
			check(fmt.Sprintf("%s.routes[%d]", key, j), r.Upstream, ut)
		}
	}
}

func (c *Config) validateGeo(p *problems) {
	gc := geo.Config{ASNDB: c.Geo.ASNDB, CountryDB: c.Geo.CountryDB}
	p.leaf("geo", gc.Validate())
}

func (c *Config) validateStore(p *problems) {
	switch c.Store.Kind {
	case "memory":
	case "redis":
		if !strings.HasPrefix(c.Store.URL, "redis://") && !strings.HasPrefix(c.Store.URL, "rediss://") && !strings.HasPrefix(c.Store.URL, "unix://") {
			p.add("store.url", "want redis://host:port/db, got %q", c.Store.URL)
		}
	default:
		p.add("store.kind", "want memory or redis, got %q", c.Store.Kind)
	}
}

func (c *Config) validateLog(p *problems) {
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		p.add("log.level", "want debug, info, warn or error, got %q", c.Log.Level)
	}
	switch c.Log.Format {
	case "", "text", "json":
	default:
		p.add("log.format", "want text or json, got %q", c.Log.Format)
	}
	fc := fplog.Config{Path: c.Log.Fingerprints, MaxSizeMB: c.Log.MaxSizeMB, MaxFiles: c.Log.MaxFiles,
		ClientIP: c.Log.ClientIP, HashKey: validationKey(), SampleAllow: c.Log.SampleAllow}
	if fc.Path == "" {
		fc.Path = "-" // off: the other settings still count for access logs
	}
	p.leaf("log", fc.Validate())
}

func (c *Config) validateTimeouts(p *problems) {
	t := c.Timeouts
	for _, d := range []struct {
		key string
		v   Duration
	}{{"handshake", t.Handshake}, {"read_header", t.ReadHeader}, {"idle", t.Idle}, {"upstream_dial", t.UpstreamDial}, {"drain", t.Drain}, {"fail_pause", t.FailPause}} {
		if d.v <= 0 {
			p.add("timeouts."+d.key, "must be positive")
		}
	}
	if t.UpstreamHeader < 0 || t.UpstreamRead < 0 {
		p.add("timeouts", "upstream_header and upstream_read must not be negative")
	}
}

func (c *Config) validateLimits(p *problems) {
	l := c.Limits
	for _, n := range []struct {
		key      string
		v, least int
	}{
		{"header_bytes", l.HeaderBytes, 4 << 10}, {"h2_streams", l.H2Streams, 1}, {"conns_per_client", l.ConnsPerClient, 1},
		{"requests_per_client", l.RequestsPerClient, 1}, {"upstream_conns", l.UpstreamConns, 1},
		{"upstream_streams", l.UpstreamStreams, 1},
		{"body_min_rate", l.BodyMinRate, 1}, {"ranges", l.Ranges, 1}, {"auth_attempts", l.AuthAttempts, 1},
		{"quic_handshakes", l.QUICHandshakes, 1},
	} {
		if n.v < n.least {
			p.add("limits."+n.key, "must be at least %d", n.least)
		}
	}
	if l.SpillBytes < 0 || l.SpillTotal < -1 {
		p.add("limits", "spill_bytes must not be negative, spill_total must be -1 (off) or more")
	}
	if l.UpstreamQueueLen < 0 {
		p.add("limits.upstream_queue_len", "must not be negative (0: 8 times upstream_conns)")
	}
	if l.UpstreamQueue <= 0 {
		p.add("limits.upstream_queue", "must be positive")
	}
	if l.BodyTimeout < 0 || l.WriteTimeout < 0 {
		p.add("limits", "body_timeout and write_timeout must not be negative")
	}
	if l.ParkAfter < 0 {
		p.add("limits.park_after", "must not be negative (0s never parks)")
	}
}

// checkTarget: an upstream or a static root, exactly one.
func checkTarget(p *problems, key string, up Upstreams, root string, sc static.Config) {
	hasUp := len(up) > 0 && up[0] != nil
	switch {
	case hasUp && root != "":
		p.add(key, "upstream and root exclude each other")
	case !hasUp && root == "":
		p.add(key+".upstream", "an upstream URL (or a root directory of static files) is needed")
	case root != "":
		p.leaf(key+".root", sc.Validate())
	}
}

func checkHeaders(p *problems, key string, h HeaderRules) {
	for _, ops := range []struct {
		name string
		ops  HeaderOps
	}{{"request", h.Request}, {"response", h.Response}} {
		names := slices.Collect(maps.Keys(ops.ops.Set))
		names = append(names, slices.Collect(maps.Keys(ops.ops.Add))...)
		names = append(names, ops.ops.Remove...)
		for _, n := range names {
			if !validHeaderName(n) {
				p.add(key+"."+ops.name, "not a header name: %q", n)
			} else if hasPrefixFold(n, "x-maat-") {
				p.add(key+"."+ops.name, "X-Maat-* headers belong to the edge: %q", n)
			}
		}
		for _, m := range []map[string]string{ops.ops.Set, ops.ops.Add} {
			for n, v := range m {
				if strings.ContainsAny(v, "\r\n\x00") {
					p.add(key+"."+ops.name, "value of %s has a line break", n)
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
		out[i] = NormalizeHost(h)
	}
	return out
}

func decodeEABKey(s string) ([]byte, error) {
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
}

// NormalizeHost lowercases a host name and drops a trailing dot: the form
// in which hosts are compared, here and where requests are routed.
func NormalizeHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".")
}

// LoadRoots reads upstream_tls.ca_file, a PEM file of CA certificates:
// Validate checks it with this, and the edge builds the upstream's TLS
// configuration from its pool.
func LoadRoots(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("edge: upstream_tls.ca_file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("edge: upstream_tls.ca_file %s holds no PEM certificate", path)
	}
	return pool, nil
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// validateUpstreamConns checks sites' and routes' upstream_conns, and that
// one address is not given two different caps (the edge keeps one line per
// address).
func (c *Config) validateUpstreamConns(p *problems) {
	seen := map[string]int{}
	check := func(key string, us Upstreams, n, own int) {
		if own < 0 {
			p.add(key+".upstream_conns", "must not be negative (0: the default)")
			return
		}
		for _, u := range us {
			if u == nil {
				continue
			}
			if prev, ok := seen[u.Host]; ok && prev != n {
				p.add(key+".upstream_conns", "%s is capped elsewhere at %d connections, here at %d: one address has one cap", u.Host, prev, n)
			}
			seen[u.Host] = n
		}
	}
	for i := range c.Sites {
		s := &c.Sites[i]
		key := fmt.Sprintf("sites[%d]", i)
		site := c.Limits.UpstreamConns
		if s.UpstreamConns > 0 {
			site = s.UpstreamConns
		}
		check(key, s.Upstream, site, s.UpstreamConns)
		for j := range s.Routes {
			r := &s.Routes[j]
			n := site
			if r.UpstreamConns > 0 {
				n = r.UpstreamConns
			}
			check(fmt.Sprintf("%s.routes[%d]", key, j), r.Upstream, n, r.UpstreamConns)
		}
	}
}

// UpstreamConns is the cap of connections of each upstream address that
// is not limits.upstream_conns (sites[].upstream_conns,
// sites[].routes[].upstream_conns), by host:port.
func (c *Config) UpstreamConns() map[string]int {
	out := map[string]int{}
	for i := range c.Sites {
		s := &c.Sites[i]
		site := c.Limits.UpstreamConns
		if s.UpstreamConns > 0 {
			site = s.UpstreamConns
		}
		for _, u := range s.Upstream {
			if u != nil && site != c.Limits.UpstreamConns {
				out[u.Host] = site
			}
		}
		for j := range s.Routes {
			n := site
			if r := &s.Routes[j]; r.UpstreamConns > 0 {
				n = r.UpstreamConns
			}
			for _, u := range s.Routes[j].Upstream {
				if u != nil && n != c.Limits.UpstreamConns {
					out[u.Host] = n
				}
			}
		}
	}
	return out
}

func (c *Config) validateStorm(p *problems) {
	s := c.Storm
	if s.On <= 0 || s.On > 1 {
		p.add("storm.on", "want a pressure above 0 and at most 1, got %v", s.On)
	}
	if s.Off < 0 || s.Off >= s.On {
		p.add("storm.off", "want a pressure from 0 to below storm.on (%v), got %v", s.On, s.Off)
	}
	if s.Hold < 0 {
		p.add("storm.hold", "must not be negative")
	}
	if s.Rise < 0 {
		p.add("storm.rise", "must not be negative")
	}
}

func (c *Config) validateProcs(p *problems) {
	switch c.Procs {
	case "", "all":
	case "adaptive":
		if !procsAdaptive {
			p.add("procs", "adaptive needs the process's CPU time (getrusage), which this system does not give: use all")
		}
	default:
		p.add("procs", "want all or adaptive, got %q", c.Procs)
	}
}

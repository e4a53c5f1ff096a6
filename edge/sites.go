package edge

import (
	"fmt"
	"slices"
	"strings"

	"github.com/maatproxy/maat/edge/config"
	"github.com/maatproxy/maat/edge/internal/basicauth"
	"github.com/maatproxy/maat/edge/internal/upstream"
	"github.com/maatproxy/maat/fplog"
	"github.com/maatproxy/maat/static"
	"github.com/maatproxy/maat/urlpath"
)

// siteTable finds the site and route of a request. It is built once per
// configuration and never changed: a reload builds a new one.
type siteTable struct {
	list     []*site // as configured: list[i] is sites[i]
	byHost   map[string]*site
	wildcard map[string]*site // "*.example.org" stored as "example.org"
	fallback *site            // the demo answers every host
}

type site struct {
	index       int
	name        string // first host name, for logs and metrics
	routes      []*route
	maxBody     int64
	canonical   string // "" = every host is served as is
	redirects   []redirect
	hsts        string // the header value; "" = none
	security    bool
	maintenance bool
	compress    bool
	access      *fplog.AccessWriter // nil: no access log
	load        *siteLoad           // the pressure of its upstreams; nil: static files only
	policy      *sitePolicy         // nil: the global policy (Handler.policyFor)
	dryRun      bool                // forward whatever the policy decides (dry_run)
}

type route struct {
	prefix  string // "" = the site's default upstream
	fold    bool   // the prefix matches in any case (match_case: false)
	pool    *upstream.Pool
	static  *static.Handler // nil: the pool's upstream
	auth    *basicauth.Auth
	reqOps  []headerOps // the site's rules, then the route's
	respOps []headerOps
}

func newSiteTable(cfg *config.Config, access func(*config.Config, *config.AccessLog) (*fplog.AccessWriter, error), up *upstream.Transport) (*siteTable, error) {
	t := &siteTable{byHost: map[string]*site{}, wildcard: map[string]*site{}}
	for i, sc := range cfg.Sites {
		s := &site{index: i, maxBody: sc.MaxBodyBytes, canonical: config.NormalizeHost(sc.Canonical),
			redirects: compileRedirects(sc.Redirects), hsts: hstsValue(&cfg.Sites[i], cfg.TLS.Mode),
			security: sc.SecurityHeaders, maintenance: sc.Maintenance, compress: sc.CompressEnabled(),
			dryRun: sc.DryRunEnabled(cfg.DryRun)}
		t.list = append(t.list, s)
		if sc.AccessLog != nil {
			w, err := access(cfg, sc.AccessLog)
			if err != nil {
				return nil, err
			}
			s.access = w
		}
		if len(sc.Hosts) > 0 {
			s.name = config.NormalizeHost(sc.Hosts[0])
		} else {
			s.name = "*"
		}
		for _, r := range sc.Routes {
			rt := &route{prefix: r.Path, fold: !matchCase(&r), pool: up.NewPool(r.Upstream),
				auth: newBasicAuth(r.BasicAuth), reqOps: opsList(sc.Headers.Request, r.Headers.Request),
				respOps: opsList(sc.Headers.Response, r.Headers.Response)}
			if err := rt.setRoot(r.Static(cfg.Limits.Ranges)); err != nil {
				return nil, err
			}
			s.routes = append(s.routes, rt)
		}
		// Longest prefix first; the default route last.
		sortRoutes(s.routes)
		def := &route{pool: up.NewPool(sc.Upstream),
			reqOps: opsList(sc.Headers.Request), respOps: opsList(sc.Headers.Response)}
		if err := def.setRoot(sc.Static(cfg.Limits.Ranges)); err != nil {
			return nil, err
		}
		s.routes = append(s.routes, def)
		s.load = newSiteLoadOf(cfg, &cfg.Sites[i], s.routes)
		for _, h := range sc.Hosts {
			if n, wild := hostKey(h); wild {
				t.wildcard[n] = s
			} else {
				t.byHost[n] = s
			}
		}
		if cfg.Demo && t.fallback == nil {
			t.fallback = s
		}
	}
	return t, nil
}

// setRoot makes the route serve static files as sc says, if it names a
// root.
func (r *route) setRoot(sc static.Config) error {
	if sc.Root == "" {
		return nil
	}
	h, err := static.New(sc)
	if err != nil {
		return fmt.Errorf("edge: static root: %w", err)
	}
	r.static = h
	return nil
}

// opsList compiles header rules to apply in order (the site's, then the
// route's), leaving out empty ones.
func opsList(hs ...config.HeaderOps) []headerOps {
	var out []headerOps
	for _, h := range hs {
		if o := compileOps(h); !o.empty() {
			out = append(out, o)
		}
	}
	return out
}

func sortRoutes(rs []*route) {
	for i := 1; i < len(rs); i++ {
		for j := i; j > 0 && len(rs[j].prefix) > len(rs[j-1].prefix); j-- {
			rs[j], rs[j-1] = rs[j-1], rs[j]
		}
	}
}

// lookup finds the site for a Host header value (with or without port).
func (t *siteTable) lookup(host string) *site {
	if s, ok := lookupHost(t.byHost, t.wildcard, host); ok {
		return s
	}
	return t.fallback
}

// hostKey is the key of a configured host name in a site table: the
// normalized name, or for a wildcard ("*.example.org") the name it covers
// ("example.org") and wild true.
func hostKey(h string) (key string, wild bool) {
	n := config.NormalizeHost(h)
	if rest, ok := strings.CutPrefix(n, "*."); ok {
		return rest, true
	}
	return n, false
}

// lookupHost finds the site of the Host header host: by its name, else by
// the longest wildcard ("*.example.org" stored as "example.org") that
// covers it.
func lookupHost[S any](byHost, wildcard map[string]S, host string) (S, bool) {
	host = config.NormalizeHost(hostOnly(host))
	if s, ok := byHost[host]; ok {
		return s, true
	}
	for h := host; ; {
		i := strings.IndexByte(h, '.')
		if i < 0 {
			break
		}
		h = h[i+1:]
		if s, ok := wildcard[h]; ok {
			return s, true
		}
	}
	var zero S
	return zero, false
}

// matchCase is a route's match_case: by default a route with basic_auth
// matches in any case (an upstream on a case-insensitive disk serves
// "/ADMIN/" as "/admin/"), and others in their case.
func matchCase(r *config.Route) bool {
	if r.MatchCase != nil {
		return *r.MatchCase
	}
	return r.BasicAuth == nil
}

// route finds the route of a request whose path reads as model (urlpath's
// model: what the most lenient common upstream takes it for): the longest
// matching prefix, each in its case or in any case.
func (s *site) route(model string) *route {
	for _, r := range s.routes {
		if urlpath.HasPrefix(model, r.prefix, r.fold) {
			return r
		}
	}
	return s.routes[len(s.routes)-1]
}

// slashRoute returns the route with basic_auth whose prefix is model and a
// final slash ("/admin/" for "/admin"), or nil. nginx redirects such a
// request to the prefix; forwarded, the site's upstream would serve
// "/admin" without the password.
func (s *site) slashRoute(model string) *route {
	for _, r := range s.routes {
		if r.auth == nil {
			continue
		}
		if rest, ok := urlpath.CutPrefix(r.prefix, model, r.fold); ok && rest == "/" {
			return r
		}
	}
	return nil
}

// newBasicAuth compiles a route's basic_auth; nil when it has none.
func newBasicAuth(a *config.BasicAuth) *basicauth.Auth {
	if a == nil {
		return nil
	}
	return basicauth.New(a.Realm, a.Users)
}

// newSiteLoadOf measures the pressure of the site's routes that send to
// an upstream; nil for a site of static files only.
func newSiteLoadOf(cfg *config.Config, sc *config.Site, routes []*route) *siteLoad {
	var pools []*upstream.Pool
	var names []string
	add := func(rt *route, us config.Upstreams) {
		if rt.static != nil || len(us) == 0 || us[0] == nil {
			return
		}
		hosts := make([]string, 0, len(us))
		for _, u := range us {
			hosts = append(hosts, config.AddrName(u.Host)) // unix:/path.sock for a socket
		}
		name := strings.Join(hosts, ",")
		// A route to the site's own addresses shares their slots (they
		// are the upstream address's): one series, not two of one name,
		// which the registry would refuse on every scrape.
		if slices.Contains(names, name) {
			return
		}
		pools = append(pools, rt.pool)
		names = append(names, name)
	}
	for _, rt := range routes {
		if rt.prefix == "" {
			add(rt, sc.Upstream)
			continue
		}
		for j := range sc.Routes {
			if r := &sc.Routes[j]; r.Path == rt.prefix {
				add(rt, r.Upstream)
				break
			}
		}
	}
	if len(pools) == 0 {
		return nil
	}
	return newSiteLoad(pools, names, cfg)
}

package edge

import (
	"fmt"
	"maps"
	"net/http"
	"os"
	"strings"

	"github.com/maatproxy/maat/edge/internal/upstream"
	"github.com/maatproxy/maat/fplog"
	"github.com/maatproxy/maat/static"
)

// siteTable finds the site and route of a request. It is built once per
// configuration and never changed: a reload builds a new one.
type siteTable struct {
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
}

type route struct {
	prefix  string // "" = the site's default upstream
	pool    *upstream.Pool
	static  *static.Handler // nil: the pool's upstream
	auth    *basicAuth
	reqOps  []headerOps // the site's rules, then the route's
	respOps []headerOps
}

func newSiteTable(cfg *Config, access func(*Config, *AccessLog) (*fplog.AccessWriter, error), up *upstream.Transport) (*siteTable, error) {
	t := &siteTable{byHost: map[string]*site{}, wildcard: map[string]*site{}}
	for i, sc := range cfg.Sites {
		s := &site{index: i, maxBody: sc.MaxBodyBytes, canonical: normalizeHost(sc.Canonical),
			redirects: compileRedirects(sc.Redirects), hsts: hstsValue(&cfg.Sites[i], cfg.TLS.Mode),
			security: sc.SecurityHeaders, maintenance: sc.Maintenance, compress: sc.compress()}
		if sc.AccessLog != nil {
			w, err := access(cfg, sc.AccessLog)
			if err != nil {
				return nil, err
			}
			s.access = w
		}
		if len(sc.Hosts) > 0 {
			s.name = normalizeHost(sc.Hosts[0])
		} else {
			s.name = "*"
		}
		for _, r := range sc.Routes {
			rt := &route{prefix: r.Path, pool: up.NewPool(r.Upstream),
				auth: newBasicAuth(r.BasicAuth), reqOps: opsList(sc.Headers.Request, r.Headers.Request),
				respOps: opsList(sc.Headers.Response, r.Headers.Response)}
			if err := rt.setRoot(cfg, r.Root, r.Browse, r.StripPrefix, r.Errors); err != nil {
				return nil, err
			}
			s.routes = append(s.routes, rt)
		}
		// Longest prefix first; the default route last.
		sortRoutes(s.routes)
		def := &route{pool: up.NewPool(sc.Upstream),
			reqOps: opsList(sc.Headers.Request), respOps: opsList(sc.Headers.Response)}
		if err := def.setRoot(cfg, sc.Root, sc.Browse, false, sc.Errors); err != nil {
			return nil, err
		}
		s.routes = append(s.routes, def)
		for _, h := range sc.Hosts {
			n := normalizeHost(h)
			if rest, ok := strings.CutPrefix(n, "*."); ok {
				t.wildcard[rest] = s
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

// setRoot makes the route serve static files from root, if set.
func (r *route) setRoot(cfg *Config, root string, browse, strip bool, errors map[int]string) error {
	if root == "" {
		return nil
	}
	sc := staticConfig(cfg, r.prefix, root, browse, strip, errors)
	h, err := static.New(sc)
	if err != nil {
		return fmt.Errorf("edge: static root: %w", err)
	}
	r.static = h
	return nil
}

// staticConfig is the static.Config of a root.
func staticConfig(cfg *Config, prefix, root string, browse, strip bool, errors map[int]string) static.Config {
	sc := static.Config{Root: root, Listing: browse, Precompressed: true, ErrorPages: rootErrorPages(root, errors),
		MaxRanges: cfg.Limits.Ranges}
	if strip {
		sc.StripPrefix = prefix
	}
	return sc
}

// notFoundPage answers a static root's 404s when errors: names no page for
// them and the root has it at its top (nginx users write error_page 404
// /404.html; static site generators make the file).
const notFoundPage = "404.html"

// rootErrorPages returns the error pages of a static root: errors, and
// notFoundPage for 404 if errors names none and the root holds it as a
// regular file. It is looked for through os.Root, as static opens every
// file: a symbolic link out of the root is not used. A file made after
// the configuration loaded is used from the next reload on.
func rootErrorPages(root string, errors map[int]string) map[int]string {
	if _, ok := errors[http.StatusNotFound]; ok || root == "" {
		return errors
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return errors // static.Config.Validate says why
	}
	defer r.Close()
	if fi, err := r.Stat(notFoundPage); err != nil || !fi.Mode().IsRegular() {
		return errors
	}
	out := maps.Clone(errors)
	if out == nil {
		out = make(map[int]string, 1)
	}
	out[http.StatusNotFound] = notFoundPage
	return out
}

// opsList compiles header rules to apply in order (the site's, then the
// route's), leaving out empty ones.
func opsList(hs ...HeaderOps) []headerOps {
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
	host = normalizeHost(hostOnly(host))
	if s, ok := t.byHost[host]; ok {
		return s
	}
	for h := host; ; {
		i := strings.IndexByte(h, '.')
		if i < 0 {
			break
		}
		h = h[i+1:]
		if s, ok := t.wildcard[h]; ok {
			return s
		}
	}
	return t.fallback
}

// route finds the route of a path: the longest matching prefix.
func (s *site) route(path string) *route {
	for _, r := range s.routes {
		if strings.HasPrefix(path, r.prefix) {
			return r
		}
	}
	return s.routes[len(s.routes)-1]
}

// hosts lists every configured host name (for the ACME host policy).
func (cfg *Config) hosts() []string {
	var hs []string
	for _, s := range cfg.Sites {
		for _, h := range s.Hosts {
			if !strings.HasPrefix(h, "*.") {
				hs = append(hs, normalizeHost(h))
			}
		}
	}
	return hs
}

package edge

import (
	"github.com/maatproxy/maat/edge/config"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/maatproxy/maat/urlpath"
)

// What a site needs beyond forwarding, compiled from its configuration:
// canonical host, redirects, HSTS and security headers, header rules,
// maintenance, basic authentication (package basicauth).

type redirect struct {
	from, to string
	prefix   bool
	status   int
}

// compileRedirects keeps the configured order; the first match wins.
func compileRedirects(rs []config.Redirect) []redirect {
	out := make([]redirect, 0, len(rs))
	for _, r := range rs {
		st := r.Status
		if st == 0 {
			st = http.StatusMovedPermanently
		}
		out = append(out, redirect{from: r.From, to: r.To, prefix: strings.HasSuffix(r.From, "/"), status: st})
	}
	return out
}

// match returns the target of a request for u (its path normalized) whose
// path reads as model (urlpath): from matches u's path or, failing that,
// the model, in any case when fold; the rest of a prefix is kept, escaped
// again, and the query. A redirect to the request's own path (a model or a
// case that from matches, redirected to the path it reads as) is no
// redirect. The result is always a path on the site or the operator's
// absolute URL (safeLocation).
func (r *redirect) match(u *url.URL, model string, fold bool) (string, bool) {
	rest, ok := r.cut(u.Path, fold)
	if !ok {
		rest, ok = r.cut(model, fold)
	}
	if !ok {
		return "", false
	}
	to := r.to
	if r.prefix {
		rest = (&url.URL{Path: rest}).EscapedPath()
		to = r.to + rest
		if !strings.HasSuffix(r.to, "/") && rest != "" {
			to = r.to + "/" + rest
		}
	}
	if to == u.EscapedPath() {
		return "", false
	}
	if u.RawQuery != "" {
		to += "?" + u.RawQuery
	}
	return safeLocation(to), true
}

// cut returns what of path follows a prefix redirect's from, or whether
// path is an exact one's.
func (r *redirect) cut(path string, fold bool) (string, bool) {
	if r.prefix {
		return urlpath.CutPrefix(path, r.from, fold)
	}
	return "", urlpath.Equal(path, r.from, fold)
}

// safeLocation keeps a redirect target a path on the site when it starts
// with "/": no concatenation may make it scheme-relative ("//host") or a
// backslash URL ("/\host", which browsers read as "//host"), and no line
// break may split the header.
func safeLocation(loc string) string {
	if strings.ContainsAny(loc, "\r\n\x00") {
		return "/"
	}
	if strings.HasPrefix(loc, "/") {
		rest := strings.TrimLeft(loc, "/\\")
		loc = "/" + strings.ReplaceAll(rest, "\\", "%5C")
	}
	return loc
}

func hstsValue(site *config.Site, mode string) string {
	h := site.HSTS
	if h == nil {
		if mode != "acme" {
			return ""
		}
		return "max-age=31536000"
	}
	if h.MaxAge.D() <= 0 {
		return ""
	}
	v := "max-age=" + strconv.FormatInt(int64(h.MaxAge.D().Seconds()), 10)
	if h.IncludeSubdomains {
		v += "; includeSubDomains"
	}
	if h.Preload {
		v += "; preload"
	}
	return v
}

// headerOps is HeaderOps with canonical names, applied remove, set, add.
type headerOps struct {
	remove []string
	set    [][2]string
	add    [][2]string
}

func (o *headerOps) empty() bool { return len(o.remove)+len(o.set)+len(o.add) == 0 }

func compileOps(h config.HeaderOps) headerOps {
	var o headerOps
	for _, n := range h.Remove {
		o.remove = append(o.remove, http.CanonicalHeaderKey(n))
	}
	for n, v := range h.Set {
		o.set = append(o.set, [2]string{http.CanonicalHeaderKey(n), v})
	}
	for n, v := range h.Add {
		o.add = append(o.add, [2]string{http.CanonicalHeaderKey(n), v})
	}
	return o
}

func (o *headerOps) apply(h http.Header) {
	for _, n := range o.remove {
		delete(h, n)
	}
	for _, kv := range o.set {
		h[kv[0]] = []string{kv[1]}
	}
	for _, kv := range o.add {
		h[kv[0]] = append(h[kv[0]], kv[1])
	}
}

func joinHostPort(host, port string) string { return net.JoinHostPort(host, port) }

// hostOnly drops the port of a Host header value, if it has one.
func hostOnly(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		return host
	}
	return h
}

package config

import (
	"maps"
	"net/http"
	"os"
	"strings"

	"github.com/maatproxy/maat/certs"
	"github.com/maatproxy/maat/static"
)

// The configurations of the leaves, as the edge builds them from a Config:
// Validate asks each leaf's own Validate about them (DESIGN.md: the edge
// never re-spells a leaf's allowed values), and the edge serves with the
// same values.

// Certs returns the certificates' configuration: tls and the sites' host
// names. OnEvent and Cache are the caller's to set.
func (c *Config) Certs() certs.Config {
	cc := certs.Config{
		Mode:         c.TLS.Mode,
		CacheDir:     c.TLS.Cache,
		Hosts:        c.Hosts(),
		Email:        c.TLS.ACME.Email,
		DirectoryURL: c.TLS.ACME.Directory,
		CARootsFile:  c.TLS.ACME.CARoots,
		CertFile:     c.TLS.CertFile,
		KeyFile:      c.TLS.KeyFile,
	}
	if c.TLS.ACME.EABKeyID != "" {
		key, _ := decodeEABKey(c.TLS.ACME.EABKey) // Validate checked it
		cc.EAB = &certs.EAB{KeyID: c.TLS.ACME.EABKeyID, HMACKey: key}
	}
	if c.Demo {
		cc.AnyHost = true
	}
	return cc
}

// Hosts lists every configured host name, normalized (NormalizeHost),
// but the wildcards (*.example.org): the names certificates are had for.
func (c *Config) Hosts() []string {
	var hs []string
	for _, s := range c.Sites {
		for _, h := range s.Hosts {
			if !strings.HasPrefix(h, "*.") {
				hs = append(hs, NormalizeHost(h))
			}
		}
	}
	return hs
}

// Static returns the static.Config of the site's root (Root), with at most
// maxRanges byte ranges a request (limits.ranges).
func (s *Site) Static(maxRanges int) static.Config {
	r := Route{Root: s.Root, Browse: s.Browse, Errors: s.Errors}
	return r.Static(maxRanges)
}

// Static returns the static.Config of the route's root (Root), with at
// most maxRanges byte ranges a request (limits.ranges).
func (r *Route) Static(maxRanges int) static.Config {
	sc := static.Config{Root: r.Root, Listing: r.Browse, Precompressed: true, ErrorPages: rootErrorPages(r.Root, r.Errors),
		MaxRanges: maxRanges}
	if r.StripPrefix {
		sc.StripPrefix = r.Path
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

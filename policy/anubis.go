package policy

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// What Anubis policy files hold that Maat reads differently or not at all
// (TecharoHQ/anubis lib/config): sections that warn, the checks Anubis
// makes of them, so that a file Anubis refuses is refused here too, and
// its embedded (data)/ lists.

// actionDenyAndReroute is Anubis's action that redirects instead of
// denying; it decides DENY with Decision.RerouteTo.
const actionDenyAndReroute = "DENY_AND_REROUTE"

// anubisOnly are top-level sections of Anubis policy files that Maat does
// not use; each gives one warning, after the checks Anubis makes of it
// (anubisSection). dnsbl: true is refused instead (anubisSection).
var anubisOnly = map[string]string{
	"openGraph": "Open Graph passthrough is not supported",
	"honeypot":  "the honeypot (Anubis v1.24.0) is not served; Anubis's rule honeypot/network (WEIGH +30 for the networks that walked its maze) never fires",
	"impressum": "the imprint page and footer (Anubis v1.20.0) are not served",
	"logging":   "logging is configured in edge.yaml (log:)",
	"metrics":   "metrics are configured in edge.yaml (listen.admin)",
	"store":     "the store is configured in edge.yaml (store:)",
	"dnsbl":     "DroneBL lookups are off, as here",
	"dns_ttl":   "DNS answers (crawler verification, verifyFCrDNS) are cached for an hour",
	"geoip":     "geo databases are configured in edge.yaml (geo: {asn_db, country_db})",
}

// anubisSection checks an Anubis-only section as Anubis does, so that a
// file Anubis refuses is not accepted here with a warning.
func anubisSection(name, key string, v *yaml.Node) error {
	var errs []error
	bad := func(n *yaml.Node, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s: %s: %s", ErrInvalid, at(name, n), key, fmt.Sprintf(format, args...)))
	}
	get := func(m *yaml.Node, k string) *yaml.Node {
		if m.Kind != yaml.MappingNode {
			return nil
		}
		for i := 0; i+1 < len(m.Content); i += 2 {
			if m.Content[i].Value == k {
				return m.Content[i+1]
			}
		}
		return nil
	}
	switch key {
	case "dnsbl":
		if v.Value == "true" {
			bad(v, "true: Anubis's DroneBL lookup of every client address (the key dnsbl, Anubis v1.16.0) is not supported; remove it or set it to false")
		}
	case "honeypot":
		if n := get(v, "enabled"); n != nil && n.Value == "false" {
			break // Anubis's honeypot is on unless switched off
		}
		if n := get(v, "implementation"); n == nil || n.Value != "naive" {
			got := ""
			if n != nil {
				got = n.Value
			}
			bad(v, "implementation: %q is not one of Anubis's (naive)", got)
		}
	case "impressum":
		if n := get(v, "footer"); n == nil || n.Value == "" {
			bad(v, "footer: missing (the imprint's footer text)")
		}
		page := get(v, "page")
		for _, k := range []string{"title", "body"} {
			if page == nil || get(page, k) == nil || get(page, k).Value == "" {
				bad(v, "page: %s: missing", k)
			}
		}
	case "store":
		switch backend := get(v, "backend"); {
		case backend == nil || backend.Value == "":
			bad(v, "backend: missing (memory, bbolt, valkey, s3api)")
		case backend.Value == "memory":
		case backend.Value == "bbolt":
			if p := get(v, "parameters"); p == nil || get(p, "path") == nil || get(p, "path").Value == "" {
				bad(backend, "bbolt needs parameters: {path: FILE}")
			}
		case backend.Value == "valkey":
			if p := get(v, "parameters"); p == nil || (get(p, "url") == nil || get(p, "url").Value == "") && get(p, "sentinel") == nil {
				bad(backend, "valkey needs parameters: {url: URL} or {sentinel: …}")
			}
		case backend.Value == "s3api":
			if p := get(v, "parameters"); p == nil || get(p, "bucketName") == nil || get(p, "bucketName").Value == "" {
				bad(backend, "s3api needs parameters: {bucketName: NAME}")
			}
		default:
			bad(backend, "unknown backend %q (memory, bbolt, valkey, s3api)", backend.Value)
		}
	case "dns_ttl":
		for _, k := range []string{"forward", "reverse"} {
			if n := get(v, k); n != nil && (n.Tag != "!!int" || strings.HasPrefix(n.Value, "-")) {
				bad(n, "%s: %q is not a whole number of seconds", k, n.Value)
			}
		}
	case "openGraph":
		if n := get(v, "enabled"); n == nil || n.Value != "true" {
			break
		}
		if n := get(v, "ttl"); n == nil {
			bad(v, "ttl: missing (a duration such as 24h)")
		} else if _, err := time.ParseDuration(n.Value); err != nil {
			bad(n, "ttl: %q is not a duration such as 24h", n.Value)
		}
		if n := get(v, "default"); n != nil && len(n.Content) > 0 && get(n, "og:title") == nil {
			bad(n, "default: lacks og:title")
		}
	case "logging":
		switch sink := get(v, "sink"); {
		case sink == nil || sink.Value == "stdio":
		case sink.Value == "file":
			if p := get(v, "parameters"); p == nil || get(p, "file") == nil {
				bad(sink, "sink file needs parameters: {file: PATH}")
			}
		default:
			bad(sink, "unknown sink %q (stdio, file)", sink.Value)
		}
	case "metrics":
		if get(v, "bind") == nil {
			bad(v, "bind: missing")
		}
		switch network := get(v, "network"); {
		case network == nil:
			bad(v, "network: missing")
		case network.Value == "tcp" || network.Value == "tcp4" || network.Value == "tcp6":
		case network.Value == "unix":
			if m := get(v, "socketMode"); m == nil {
				bad(network, "unix sockets need socketMode")
			} else if _, err := strconv.ParseUint(m.Value, 8, 32); err != nil {
				bad(m, "socketMode %q is not an octal mode", m.Value)
			}
		default:
			bad(network, "unknown network %q (tcp, tcp4, tcp6, unix)", network.Value)
		}
	}
	return errors.Join(errs...)
}

// anubisDataPrefix names Anubis's embedded files in its imports.
const anubisDataPrefix = "(data)/"

// anubisDataDir is where the copy of Anubis's policy tree lives in the
// embedded files (see anubisdata/SOURCE).
const anubisDataDir = "anubisdata/data"

// AnubisVersion returns the version of Anubis whose policy tree Maat ships
// (imported as (data)/…), as anubisdata/SOURCE records it: "v1.27.0".
func AnubisVersion() string {
	src, _ := embedded.ReadFile("anubisdata/SOURCE")
	for line := range strings.Lines(string(src)) {
		if v, ok := strings.CutPrefix(line, "version: "); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// importAnubisData reads an import of Anubis's policy tree: "(data)/name"
// or a glob, "(data)/bots/*.yaml", from the copy of Anubis's data/ that
// Maat embeds, as Anubis reads it from its own.
func (l *loader) importAnubisData(from string, v *yaml.Node, depth int) error {
	name := strings.TrimPrefix(v.Value, anubisDataPrefix)
	names := []string{name}
	if strings.ContainsAny(name, "*?[") {
		m, err := fs.Glob(embedded, path.Join(anubisDataDir, name))
		if err != nil {
			return fmt.Errorf("%w: %s: %s: %v", ErrImport, at(from, v), v.Value, err)
		}
		if len(m) == 0 {
			return fmt.Errorf("%w: %s: %s matches none of the files of Anubis %s's policy tree", ErrImport, at(from, v), v.Value, AnubisVersion())
		}
		names = names[:0]
		for _, f := range m {
			names = append(names, strings.TrimPrefix(f, anubisDataDir+"/"))
		}
		sortNatural(names)
	}
	var errs []error
	for _, n := range names {
		data, err := readAnubisData(n)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: %s: %w", ErrImport, at(from, v), err))
			continue
		}
		errs = append(errs, l.importOne(from, v, anubisDataPrefix+n, data, depth))
	}
	return errors.Join(errs...)
}

// readAnubisData reads one file of Anubis's policy tree.
func readAnubisData(name string) ([]byte, error) {
	data, err := fs.ReadFile(embedded, path.Join(anubisDataDir, name))
	if err != nil || !fs.ValidPath(name) {
		return nil, fmt.Errorf("%s%s is not a file of Anubis %s's policy tree (its directories: %s)",
			anubisDataPrefix, name, AnubisVersion(), strings.Join(anubisDataDirs(), ", "))
	}
	return data, nil
}

// anubisDataDirs lists the top-level entries of Anubis's policy tree, for
// errors: "apps/", "botPolicies.yaml", "bots/", …
func anubisDataDirs() []string {
	ents, _ := fs.ReadDir(embedded, anubisDataDir)
	out := make([]string, 0, len(ents))
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() {
			n += "/"
		}
		out = append(out, anubisDataPrefix+n)
	}
	return out
}

// AnubisData lists the files of Anubis's policy tree that Maat ships, as
// policy files import them: "(data)/bots/ai-catchall.yaml", …, in order.
func AnubisData() []string {
	var out []string
	_ = fs.WalkDir(embedded, anubisDataDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, anubisDataPrefix+strings.TrimPrefix(p, anubisDataDir+"/"))
		}
		return nil
	})
	return out
}

// sortNatural sorts names as Anubis sorts the files a glob import matches
// (github.com/fvbommel/sortorder's natural order): runs of digits compare
// by their value, so that rule2.yaml comes before rule10.yaml.
func sortNatural(names []string) {
	slices.SortStableFunc(names, func(a, b string) int {
		switch {
		case naturalLess(a, b):
			return -1
		case naturalLess(b, a):
			return 1
		}
		return 0
	})
}

// naturalLess is sortorder.NaturalLess (fvbommel/sortorder v1.1.0, MIT):
// digits sort before other bytes; digit runs compare by value, then by
// fewer leading zeros; other bytes compare bytewise.
func naturalLess(a, b string) bool {
	isDigit := func(c byte) bool { return '0' <= c && c <= '9' }
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		da, db := isDigit(a[i]), isDigit(b[j])
		switch {
		case da != db:
			return da
		case !da:
			if a[i] != b[j] {
				return a[i] < b[j]
			}
			i++
			j++
			continue
		}
		for i < len(a) && a[i] == '0' {
			i++
		}
		for j < len(b) && b[j] == '0' {
			j++
		}
		nzA, nzB := i, j
		for i < len(a) && isDigit(a[i]) {
			i++
		}
		for j < len(b) && isDigit(b[j]) {
			j++
		}
		if la, lb := i-nzA, j-nzB; la != lb {
			return la < lb
		}
		if na, nb := a[nzA:i], b[nzB:j]; na != nb {
			return na < nb
		}
		if nzA != nzB {
			return nzA < nzB
		}
	}
	return len(a) < len(b)
}

// anubisSectionInert reports an Anubis-only section that asks for nothing
// Maat leaves out: dnsbl: false, a disabled honeypot or Open Graph.
func anubisSectionInert(key string, v *yaml.Node) bool {
	switch key {
	case "dnsbl":
		return v.Value == "false"
	case "honeypot", "openGraph":
		for i := 0; i+1 < len(v.Content); i += 2 {
			if v.Content[i].Value == "enabled" {
				return v.Content[i+1].Value == "false"
			}
		}
	}
	return false
}

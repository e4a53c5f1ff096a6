package policy

import (
	"errors"
	"fmt"
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
// not use; each gives one warning.
var anubisOnly = map[string]string{
	"openGraph": "Open Graph passthrough is not supported",
	"honeypot":  "honeypots are not supported",
	"impressum": "the imprint is not supported",
	"logging":   "logging is configured in edge.yaml (log:)",
	"metrics":   "metrics are configured in edge.yaml (listen.admin)",
	"store":     "the store is configured in edge.yaml (store:)",
	"dnsbl":     "DNSBL lookups are not supported",
	"dns_ttl":   "crawler verification caches DNS answers for an hour",
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

// anubisData maps Anubis's embedded lists (TecharoHQ/anubis data/) to the
// built-in list of Maat's that serves the same purpose. The rules differ;
// each import gives a warning that says so.
var anubisData = []struct{ prefix, builtin string }{
	{"(data)/common/keep-internet-working.yaml", "keep-internet-working.yaml"},
	{"(data)/crawlers/_allow-good.yaml", "crawlers.yaml"},
	{"(data)/bots/", "ai-crawlers.yaml"}, // the deny lists: AI crawlers, scrapers, headless browsers
	{"(data)/meta/ai-block-", "ai-crawlers.yaml"},
	{"(data)/clients/git.yaml", "honest-clients.yaml"},
}

// anubisDataBuiltin returns the built-in import that stands for an Anubis
// (data)/ import, and whether there is one.
func anubisDataBuiltin(pattern string) (string, bool) {
	for _, d := range anubisData {
		if pattern == d.prefix || strings.HasSuffix(d.prefix, "/") && strings.HasPrefix(pattern, d.prefix) ||
			strings.HasSuffix(d.prefix, "-") && strings.HasPrefix(pattern, d.prefix) {
			return builtinPrefix + d.builtin, true
		}
	}
	return "", false
}

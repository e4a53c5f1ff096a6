package edge

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/maatproxy/maat/edge/config"
)

// NewLogger returns the edge's logger: text for a human on a terminal, JSON
// otherwise (or as cfg.Format says).
func NewLogger(w io.Writer, cfg config.LogConfig) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.Level))
	opts := &slog.HandlerOptions{Level: level}
	format := cfg.Format
	if format == "" {
		format = "json"
		if f, ok := w.(*os.File); ok {
			if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
				format = "text"
			}
		}
	}
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// makeLogDir makes the directory of a log file when it is missing (mode
// 0750, as systemd's LogsDirectory= does), so that the default fingerprint
// log works without a step by hand. "-" is standard output.
func makeLogDir(path string) error {
	if path == "-" {
		return nil
	}
	dir := filepath.Dir(path)
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("log directory: %w", err)
	}
	return nil
}

// logStartup says what the Server is about to serve: the build, one line
// per site (hosts, upstreams or root, routes, TLS mode), the policy and
// its rule count, and where the logs go.
func (s *Server) logStartup(ctx context.Context) {
	h := s.Handler()
	cfg := &h.cfg
	b := ReadBuildInfo()
	s.log.LogAttrs(ctx, slog.LevelInfo, "starting", slog.String("version", b.Version), slog.String("commit", b.Commit),
		slog.String("go", b.GoVersion), slog.String("config", cfg.File))
	for i := range cfg.Sites {
		s.log.LogAttrs(ctx, slog.LevelInfo, "site", siteAttrs(cfg, i)...)
	}
	s.log.LogAttrs(ctx, slog.LevelInfo, "policy", policyAttrs(h, "")...)
	access := []string{}
	for _, st := range cfg.Sites {
		if st.AccessLog != nil && !slices.Contains(access, st.AccessLog.Path) {
			access = append(access, st.AccessLog.Path)
		}
	}
	s.log.LogAttrs(ctx, slog.LevelInfo, "logs", slog.String("fingerprints", orString(cfg.Log.Fingerprints, config.FingerprintsOff)),
		slog.Any("access", access), slog.String("client_ip", cfg.Log.ClientIP), slog.String("level", cfg.Log.Level))
}

// siteAttrs describes site i of cfg.
func siteAttrs(cfg *config.Config, i int) []slog.Attr {
	st := &cfg.Sites[i]
	attrs := []slog.Attr{slog.Int("index", i), slog.Any("hosts", st.Hosts)}
	if st.Root != "" {
		attrs = append(attrs, slog.String("root", st.Root))
	} else {
		attrs = append(attrs, slog.Any("upstreams", upstreamStrings(st.Upstream)))
	}
	routes := make([]string, 0, len(st.Routes))
	for _, r := range st.Routes {
		to := r.Root
		if to == "" {
			to = strings.Join(upstreamStrings(r.Upstream), " ")
		}
		routes = append(routes, r.Path+" → "+to)
	}
	tls := cfg.TLS.Mode
	if cfg.Demo {
		tls += " (any host)"
	}
	attrs = append(attrs, slog.Any("routes", routes), slog.String("tls", tls))
	if st.Policy != "" {
		attrs = append(attrs, slog.String("policy", st.Policy))
	}
	if st.DryRunEnabled(cfg.DryRun) {
		attrs = append(attrs, slog.Bool("dry_run", true)) // decides, logs, and forwards everything
	}
	return attrs
}

func upstreamStrings(us config.Upstreams) []string {
	out := make([]string, 0, len(us))
	for _, u := range us {
		if u != nil {
			out = append(out, config.UpstreamName(u))
		}
	}
	return out
}

// policyAttrs describes the Handler's policy, its keys prefixed.
func policyAttrs(h *Handler, prefix string) []slog.Attr {
	return []slog.Attr{slog.String(prefix+"file", orString(h.cfg.Policy, "(built-in default)")),
		slog.Int(prefix+"rules", len(h.global.policy.Rules())), slog.String(prefix+"version", h.global.policy.Version())}
}

// logReload says what a reload changed: the sites added, removed and
// changed (by their first host name) and whether the policy changed.
func (s *Server) logReload(ctx context.Context, old, cur *Handler) {
	name := func(st *config.Site) string {
		if len(st.Hosts) == 0 {
			return "*"
		}
		return config.NormalizeHost(st.Hosts[0])
	}
	before := map[string]*config.Site{}
	for i := range old.cfg.Sites {
		before[name(&old.cfg.Sites[i])] = &old.cfg.Sites[i]
	}
	added, changed := []string{}, []string{}
	for i := range cur.cfg.Sites {
		st := &cur.cfg.Sites[i]
		n := name(st)
		prev, ok := before[n]
		switch {
		case !ok:
			added = append(added, n)
		case !reflect.DeepEqual(prev, st):
			changed = append(changed, n)
		}
		delete(before, n)
	}
	removed := slices.Sorted(maps.Keys(before))
	attrs := []slog.Attr{slog.String("config", cur.cfg.File),
		slog.Any("sites_added", added), slog.Any("sites_removed", removed), slog.Any("sites_changed", changed),
		slog.Bool("policy_changed", old.global.policy.Version() != cur.global.policy.Version() || old.cfg.Policy != cur.cfg.Policy)}
	attrs = append(attrs, policyAttrs(cur, "policy_")...)
	s.log.LogAttrs(ctx, slog.LevelInfo, "reloaded", attrs...)
}

func orString(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

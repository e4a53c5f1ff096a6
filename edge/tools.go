package edge

import (
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/maatproxy/maat/fplog"
	"github.com/maatproxy/maat/policy"
	"github.com/maatproxy/maat/tlsfp"
)

// The offline tools of the command line (DESIGN.md, "Command line"): thin
// passes to the leaves, so that cmd/edge imports edge alone.

// CheckPolicy validates a policy file, ours or Anubis's, and returns its
// warnings. Errors name file:line.
func CheckPolicy(path string) (warnings []string, err error) {
	p, err := policy.Load(path, policy.Options{})
	if err != nil {
		return nil, err
	}
	return p.Warnings(), nil
}

// ExplainRequest is a request described on the command line.
type ExplainRequest struct {
	UA, Path, IP, JA4, Method, Host, Proto string
	Headers                                []string // "Key: value"
}

// ExplainPolicy says which rules of the configured policy match a request,
// its weight and the decision.
func ExplainPolicy(cfg Config, er ExplainRequest) (string, error) {
	p, err := loadPolicy(&cfg)
	if err != nil {
		return "", err
	}
	r := policy.Request{
		Method: orString(er.Method, http.MethodGet), Path: orString(er.Path, "/"),
		Host: er.Host, Proto: orString(er.Proto, "HTTP/2.0"), TLS: true,
		Header: http.Header{}, JA4: er.JA4,
	}
	if er.IP != "" {
		a, err := netip.ParseAddr(er.IP)
		if err != nil {
			return "", fmt.Errorf("edge: -ip: %w", err)
		}
		r.RemoteAddr = a
	} else {
		r.RemoteAddr = netip.MustParseAddr("192.0.2.1")
	}
	if q := strings.IndexByte(r.Path, '?'); q >= 0 {
		r.Path, r.RawQuery = r.Path[:q], r.Path[q+1:]
	}
	for _, h := range er.Headers {
		k, v, ok := strings.Cut(h, ":")
		if !ok || strings.TrimSpace(k) == "" {
			return "", fmt.Errorf("edge: -header %q: want Key:value", h)
		}
		r.Header.Add(strings.TrimSpace(k), strings.TrimSpace(v))
		r.HeaderOrder = append(r.HeaderOrder, strings.ToLower(strings.TrimSpace(k)))
	}
	if er.UA != "" {
		r.Header.Set("User-Agent", er.UA)
	}
	if c, ok := tlsfp.LookupClient(er.JA4); ok {
		r.ClientFamily, r.ClientVersions = c.Family, c.Versions
	}
	return p.Explain(&r), nil
}

func orString(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// RobotsToPolicy converts robots.txt to policy YAML.
func RobotsToPolicy(r io.Reader) ([]byte, error) { return policy.RobotsToPolicy(r) }

// FPTopOptions are the flags of `edge fp top`.
type FPTopOptions struct {
	By    string
	Since time.Duration // 0 = all
	Limit int
	JSON  bool
	Now   time.Time
}

// FPTop summarizes fingerprint log files (plain or gzip) into w.
func FPTop(w io.Writer, files []string, o FPTopOptions) error {
	opts := fplog.TopOptions{By: o.By, Limit: o.Limit}
	if o.Since > 0 {
		now := o.Now
		if now.IsZero() {
			now = time.Now()
		}
		opts.Since = now.Add(-o.Since)
	}
	rows, err := fplog.Top(files, opts)
	if err != nil {
		return err
	}
	if o.JSON {
		return fplog.WriteTopJSON(w, rows)
	}
	return fplog.WriteTopTable(w, rows)
}

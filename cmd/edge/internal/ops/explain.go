package ops

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/maatproxy/maat/edge"
	"github.com/maatproxy/maat/edge/config"
	"github.com/maatproxy/maat/fplog"
	"github.com/maatproxy/maat/geo"
	"github.com/maatproxy/maat/httpfp"
	"github.com/maatproxy/maat/policy"
	"github.com/maatproxy/maat/tlsfp"
	"github.com/maatproxy/maat/urlpath"
)

// ExplainRequest is a request described on the command line, or read from
// a line of the fingerprint log (ExplainRequestFromLog).
type ExplainRequest struct {
	UA, Path, IP, JA4, Method, Host, Proto string
	// HFP and H2FP are the request's header and HTTP/2 fingerprints.
	HFP, H2FP string
	// Headers are "Key: value" in wire order; a log line gives names only
	// ("Key:").
	Headers []string
	// ASN, ASOrg and Country are what a log line says of the address;
	// when the configuration has geo databases, they are looked up again.
	ASN     uint32
	ASOrg   string
	Country string
}

// ExplainOptions choose the policy that explains and how its checks run.
type ExplainOptions struct {
	// Config supplies the policy with its geo databases (opened to look
	// the address up) and divert targets: the policy of the site of the
	// request's Host (sites[].policy), or the global one. If nil, Policy
	// is used.
	Config *config.Config
	// Policy is a policy file to explain with, without a configuration.
	// If it and Config are empty, the built-in default policy is.
	Policy string
	// Resolver answers the DNS queries of crawler verification. If nil,
	// the system's resolver: the same queries the live edge makes.
	Resolver policy.Resolver
	// NoDNS skips crawler verification; the explanation says so.
	NoDNS bool
}

// crawlerTimeout bounds crawler verification, as the live edge bounds it.
const crawlerTimeout = 2 * time.Second

// ExplainPolicy says which checks ran, which rules of the policy match the
// request, its weight and the decision. It runs what the live edge runs
// before the policy (crawler verification by DNS or published ranges, the
// geo lookup when the configuration has databases), so that its decision is
// the live one, and names each check it skipped.
func ExplainPolicy(ctx context.Context, er ExplainRequest, o ExplainOptions) (string, error) {
	text, _, _, err := explain(ctx, er, o)
	return text, err
}

// explain is ExplainPolicy, with the decision and the policy that made it.
func explain(ctx context.Context, er ExplainRequest, o ExplainOptions) (string, policy.Decision, *policy.Policy, error) {
	p, db, err := explainPolicy(&o, er.Host)
	if err != nil {
		return "", policy.Decision{}, nil, err
	}
	r, err := er.policyRequest()
	if err != nil {
		return "", policy.Decision{}, nil, err
	}
	var ran policy.Checks
	if db != nil {
		info := db.Lookup(r.RemoteAddr)
		r.ASN, r.ASOrg, r.Country = info.ASN, info.ASOrg, info.Country
		ran.Geo = true
	} else if er.ASN != 0 || er.Country != "" {
		r.ASN, r.ASOrg, r.Country = er.ASN, er.ASOrg, er.Country
		ran.Geo = true // the live lookup, as the log line recorded it
	}
	v, err := policy.NewVerifier(policy.VerifierConfig{Resolver: o.Resolver})
	if err != nil {
		return "", policy.Decision{}, nil, fmt.Errorf("edge: crawler verifier: %w", err)
	}
	if ua := headerValue(r.Header, "User-Agent"); policy.ClaimedCrawler(ua) != "" && !o.NoDNS {
		vctx, cancel := context.WithTimeout(ctx, crawlerTimeout)
		r.CrawlerVerified = v.Verify(vctx, ua, r.RemoteAddr)
		cancel()
		ran.Crawler = true
	}
	d := p.Evaluate(&r)
	if d.NeedFCrDNS && !o.NoDNS { // as decide does live
		vctx, cancel := context.WithTimeout(ctx, crawlerTimeout)
		r.FCrDNS = v.FCrDNS(vctx, r.RemoteAddr)
		cancel()
		ran.FCrDNS = true
		d = p.Evaluate(&r)
	}
	return p.ExplainChecks(&r, ran), d, p, nil
}

func headerValue(h http.Header, k string) string {
	if v := h[k]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// explainPolicy loads the policy of o (with a configuration, the policy of
// the site of host), and its geo databases.
func explainPolicy(o *ExplainOptions, host string) (*policy.Policy, *geo.DB, error) {
	switch {
	case o.Config != nil && o.Policy != "":
		return nil, nil, errors.New("edge: explain with a configuration or a policy file, not both")
	case o.Config != nil:
		p, key, err := edge.LoadPolicyForHost(o.Config, host)
		if err != nil {
			return nil, nil, o.Config.Locate(&config.Error{File: o.Config.File, Key: key, Err: err})
		}
		g := o.Config.Geo
		if g == (config.GeoConfig{}) {
			return p, nil, nil
		}
		db, err := geo.Open(geo.Config{ASNDB: g.ASNDB, CountryDB: g.CountryDB})
		if err != nil {
			return nil, nil, o.Config.Locate(&config.Error{File: o.Config.File, Key: "geo", Err: err})
		}
		return p, db, nil
	case o.Policy != "":
		p, err := policy.Load(o.Policy, policy.Options{})
		return p, nil, err
	}
	p, err := policy.LoadDefault(policy.Options{})
	return p, nil, err
}

// policyRequest is what the policy sees of er, as the live edge builds it
// from a request over TLS.
func (er *ExplainRequest) policyRequest() (policy.Request, error) {
	r := policy.Request{
		Method: cmp.Or(er.Method, http.MethodGet), Path: cmp.Or(er.Path, "/"),
		Host: er.Host, Proto: cmp.Or(er.Proto, "HTTP/2.0"), TLS: true,
		Header: http.Header{}, JA4: er.JA4, HFP: er.HFP, H2FP: er.H2FP,
	}
	r.RemoteAddr = netip.MustParseAddr("192.0.2.1") // TEST-NET-1: nobody's
	if er.IP != "" {
		a, err := netip.ParseAddr(er.IP)
		if err != nil {
			return r, fmt.Errorf("edge: -ip: %w", err)
		}
		r.RemoteAddr = a.Unmap()
	}
	if q := strings.IndexByte(r.Path, '?'); q >= 0 {
		r.Path, r.RawQuery = r.Path[:q], r.Path[q+1:]
	}
	// The policy sees the path's model, as the live edge gives it
	// (edge/hygiene.go): a path the edge refuses with a 400 never reaches
	// the policy.
	p, err := urlpath.Parse(r.Path)
	if err != nil {
		return r, fmt.Errorf("edge: -path %q: the edge answers it with 400 before the policy: %w", r.Path, err)
	}
	r.Path = p.Model
	for _, h := range er.Headers {
		i := strings.IndexByte(strings.TrimPrefix(h, ":"), ':') // ":method:" is a pseudo-header without a value
		if i >= 0 && strings.HasPrefix(h, ":") {
			i++
		}
		k, v := strings.TrimSpace(h[:max(i, 0)]), ""
		if i >= 0 {
			v = h[i+1:]
		}
		if i < 0 || k == "" || k == ":" {
			return r, fmt.Errorf("edge: -header %q: want Key:value", h)
		}
		r.HeaderOrder = append(r.HeaderOrder, strings.ToLower(k))
		if !strings.HasPrefix(k, ":") { // a pseudo-header is no header
			r.Header.Add(k, strings.TrimSpace(v))
		}
	}
	if er.UA != "" {
		r.Header.Set("User-Agent", er.UA)
	}
	if c, ok := tlsfp.LookupClient(er.JA4); ok {
		r.ClientFamily, r.ClientVersions = c.Family, c.Versions
	}
	if c, ok := httpfp.LookupClient(er.H2FP); ok {
		r.H2Family = c.Family
	}
	return r, nil
}

// ExplainRequestFromLog reads one line of the fingerprint log: the
// address (unless the log hashes or truncates it), host, method, path,
// protocol, User-Agent, JA4, header and HTTP/2 fingerprints, the header
// names in wire order (hfp_r: without values, cookie or referer) and what
// geo said.
func ExplainRequestFromLog(line []byte) (ExplainRequest, error) {
	rec, err := fplog.ParseLine(line)
	if err != nil {
		return ExplainRequest{}, fmt.Errorf("edge: -from-log: %w", err)
	}
	return explainRequestFromRecord(&rec), nil
}

// explainRequestFromRecord is ExplainRequestFromLog of a parsed line.
func explainRequestFromRecord(rec *fplog.Record) ExplainRequest {
	// A resumed session's request was judged by ja4_session, the JA4 of
	// its full handshake.
	er := ExplainRequest{
		UA: rec.UserAgent, Path: rec.Path, JA4: cmp.Or(rec.JA4Session, rec.JA4), Method: rec.Method, Host: rec.Host,
		Proto: rec.Proto, HFP: rec.HFP, H2FP: rec.H2FP, ASN: rec.ASN, ASOrg: rec.ASOrg, Country: rec.Country,
	}
	if a, err := netip.ParseAddr(rec.ClientIP); err == nil {
		er.IP = a.String()
	}
	if rec.HFPR != "" {
		for name := range strings.SplitSeq(rec.HFPR, ",") {
			er.Headers = append(er.Headers, name+":")
		}
	}
	return er
}

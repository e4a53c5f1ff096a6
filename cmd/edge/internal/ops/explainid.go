package ops

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/maatproxy/maat/edge/config"
	"github.com/maatproxy/maat/fplog"
	"github.com/maatproxy/maat/policy"
)

// ExplainIDOptions are the flags of `edge explain -id`.
type ExplainIDOptions struct {
	// ID is the request ID, as the deny or challenge page shows it.
	ID string
	// Log is the fingerprint log to search, with its rotated files. If
	// empty, the log of Explain.Config, or config.DefaultFingerprintLog.
	Log string
	// Explain chooses the policy the request is explained with again.
	Explain ExplainOptions
}

// ErrBadRequestID is returned for an ID the edge would never have given.
var ErrBadRequestID = errors.New("not a request ID: want the 1 to 128 printable characters after \"Request ID\" on the page, without spaces or quotes")

// logPath is the fingerprint log o searches.
func (o *ExplainIDOptions) logPath() (string, error) {
	if o.Log != "" {
		return o.Log, nil
	}
	c := o.Explain.Config
	if c == nil {
		return config.DefaultFingerprintLog, nil
	}
	switch c.Log.Fingerprints {
	case "", config.FingerprintsOff:
		return "", fmt.Errorf("edge: %s: log.fingerprints is off: there is no fingerprint log to search; give -log FILE", c.File)
	case "-":
		return "", fmt.Errorf("edge: %s: log.fingerprints is the standard output: give -log with the file it goes to", c.File)
	}
	return c.Log.Fingerprints, nil
}

// validRequestID is the edge's rule for request IDs (edge/request.go):
// 1 to 128 printable ASCII characters, no spaces, quotes or backslashes.
func validRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// ExplainID finds the request o.ID in the fingerprint log (the current file,
// then the rotated ones, gzipped or not, the newest first) and writes to w
// what the log says of it (when, what, the decision, the rules and the
// weight), the policy's explanation of it today, and what would have let it
// through. Warnings (bad lines skipped, files gone) go to warn.
func ExplainID(ctx context.Context, w, warn io.Writer, o ExplainIDOptions) error {
	id := strings.TrimSpace(o.ID)
	if !validRequestID(id) {
		return fmt.Errorf("edge: -id %q: %w", o.ID, ErrBadRequestID)
	}
	path, err := o.logPath()
	if err != nil {
		return err
	}
	files, err := fplog.Files(path)
	if err != nil {
		return fmt.Errorf("edge: -log: %w", err)
	}
	found, err := fplog.Find(ctx, files, id)
	if found.Bad > 0 {
		fmt.Fprintf(warn, "edge: warning: skipped %d lines of %s that are not log records (corrupt or cut)\n", found.Bad, path)
	}
	if found.Missing > 0 {
		fmt.Fprintf(warn, "edge: warning: %d rotated files went away while searching (rotation pruned them)\n", found.Missing)
	}
	if errors.Is(err, fplog.ErrNotFound) {
		oldest := files[len(files)-1]
		return fmt.Errorf("edge: request ID %q is not in %s or its %d rotated files (the oldest: %s): a typo, another node's log, or older than the log keeps (log.max_files): %w",
			id, path, len(files)-1, oldest, err)
	}
	if err != nil {
		return fmt.Errorf("edge: %w", err)
	}
	rec := &found.Record
	er := explainRequestFromRecord(rec)
	if er.IP == "" {
		fmt.Fprintf(warn, "edge: warning: the log's remote_ip %q is not an address (log.client_ip hides it): explaining as 192.0.2.1\n", rec.ClientIP)
	}
	text, d, p, err := explain(ctx, er, o.Explain)
	if err != nil {
		return err
	}
	var b strings.Builder
	writeLogged(&b, rec, found)
	b.WriteString("\nexplained again with the policy now in force:\n")
	for line := range strings.Lines(text) {
		b.WriteString("  " + line)
	}
	b.WriteString("\nwhat would have let it through:\n")
	for _, line := range letThrough(rec, &d, p) {
		b.WriteString("  - " + line + "\n")
	}
	_, err = io.WriteString(w, b.String())
	return err
}

// writeLogged writes what the log says of the request.
func writeLogged(b *strings.Builder, rec *fplog.Record, f fplog.Found) {
	fmt.Fprintf(b, "request %s: %s, line %d\n", rec.RequestID, f.File, f.Line)
	if !rec.Time.IsZero() {
		fmt.Fprintf(b, "time: %s\n", rec.Time.UTC().Format(time.RFC3339Nano))
	}
	fmt.Fprintf(b, "request: %s %s%s %s from %s\n", orDash(rec.Method), rec.Host, orDash(rec.Path), orDash(rec.Proto), orDash(rec.ClientIP))
	if rec.UserAgent != "" {
		fmt.Fprintf(b, "user agent: %s\n", rec.UserAgent)
	}
	if rec.JA4 != "" || rec.ClientFamily != "" {
		fmt.Fprintf(b, "ja4: %s (client family %s)\n", orDash(rec.JA4), orDash(rec.ClientFamily))
	}
	fmt.Fprintf(b, "logged decision: %s weight=%d", orDash(rec.Action), rec.Weight)
	if rec.Reason != "" {
		fmt.Fprintf(b, " reason=%s", rec.Reason)
	}
	if rec.Status != 0 {
		fmt.Fprintf(b, " status=%d", rec.Status)
	}
	b.WriteByte('\n')
	fmt.Fprintf(b, "logged rules and signals: %s\n", orDash(strings.Join(rec.Rules, ", ")))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// letThrough says what would have let the request through: for a
// decision of the policy, which rule or threshold to get past and how;
// for one of the edge itself (a reason), what was wrong with the request.
func letThrough(rec *fplog.Record, d *policy.Decision, p *policy.Policy) []string {
	var out []string
	if rec.Action == fplog.ActionPass {
		return []string{"nothing: its pass cookie (a challenge solved before) let it through"}
	}
	if rec.Action != "" && rec.Action != d.Action.String() && rec.Reason == "" {
		out = append(out, fmt.Sprintf("note: the log says %s, the policy now in force says %s (the policy or the checks' answers changed since); what follows is for %s",
			rec.Action, d.Action, d.Action))
	}
	switch {
	case rec.Reason != "":
		return append(out, fmt.Sprintf("nothing in the policy: the edge refused the request itself (reason %s) before any rule ran; the same request without that fault would have been decided by the policy, as above", rec.Reason))
	case d.Action == policy.ALLOW:
		if rec.Status >= 400 {
			return append(out, fmt.Sprintf("nothing: the policy lets it through; the status %d came from the site", rec.Status))
		}
		return append(out, "nothing: the policy lets it through")
	case d.Action == policy.DIVERT:
		return append(out, fmt.Sprintf("it was not blocked: it is sent to the divert target %s; a request the deciding rule %s does not match goes to the site", d.DivertTo, d.Rule))
	}
	isRule := slices.ContainsFunc(p.Rules(), func(r policy.RuleInfo) bool { return r.Name == d.Rule && r.Action != policy.WEIGH })
	switch {
	case d.Rule == "":
	case isRule:
		out = append(out, fmt.Sprintf("the rule %s decided it, whatever the weight: a request it does not match, or one an ALLOW rule before it matches (by ip, ja4, user_agent, path…), is let through", d.Rule))
	default:
		out = append(out, fmt.Sprintf("the threshold %s decided it at weight %d: a lower weight would have passed it", d.Rule, d.Weight))
		var weighed []string
		for name := range d.Rules {
			weighed = append(weighed, name)
		}
		for s := range d.Signals.All {
			weighed = append(weighed, "signal "+s.String())
		}
		if len(weighed) > 0 {
			out = append(out, "the weight came from: "+strings.Join(weighed, ", ")+" (their weights are above)")
		}
	}
	switch d.Action {
	case policy.CHALLENGE:
		out = append(out, "solving the challenge: a browser with JavaScript (or the no-JS wait, when offered) gets a pass cookie, and its next requests PASS")
	case policy.RATE:
		out = append(out, fmt.Sprintf("fewer requests: the key %s may make %g a second, with bursts of %d", d.Rate.Key, d.Rate.Rate, d.Rate.Burst))
	case policy.DENY:
		if d.RerouteTo != "" {
			out = append(out, "it was redirected to "+d.RerouteTo)
		}
	}
	return out
}

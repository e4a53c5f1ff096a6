package testattack

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// The gate attacks (issue 33) try to get past the edge's gate rather than
// to wear it down: another spelling of a guarded path, a cookie replayed
// where it was not earned, a parrot, a forged forwarding chain, a
// redirect to another host, headers leaking to a tarpit, TRACE. Each case
// is a GateCase run against a GateTarget, an edge configured with
// GatePolicy, GateTrustedProxies and GateWait (bench/attack writes that
// configuration); each try is a row of a GateOutcome: how often it got
// through, or, for an honest client's try, how often the edge wrongly
// refused it.

// The edge's configuration the gate attacks expect, beside a site for
// Target.Host whose upstream is Target.Upstream, with a route on AuthPath
// behind basic auth (user AuthUser) to the same upstream, a port-80
// listener (GateTarget.HTTP), a fingerprint log (GateTarget.FPLog) and a
// divert target named "tarpit" (GateTarget.Tarpit).
const (
	// GatePolicy is the policy: its rules, then the default policy.
	GatePolicy = `bots:
  - {name: gate-tarpit, user_agent_regex: GPTBot, action: DIVERT, divert_to: tarpit}
  - {name: gate-hard, path_regex: ^/gate/hard/, action: CHALLENGE, challenge: {algorithm: fast, difficulty: 7}}
  - {name: gate-easy, path_regex: ^/gate/easy/, action: CHALLENGE, challenge: {algorithm: fast, difficulty: 4}}
  - {name: gate-pass, path_regex: ^/gate/pass/, action: CHALLENGE, challenge: {algorithm: fast, bits: 12}}
  - import: (builtin)/default.yaml
`
	// GateTrustedProxies is trusted_proxies: the forwarded case's proxy
	// addresses alone.
	GateTrustedProxies = "127.34.0.0/16"
	// GateWait is challenge.wait.duration.
	GateWait = 2 * time.Second
	// GateAlias is the site's second host name, whose requests the edge
	// redirects to Target.Host (the site's canonical: Target.Host).
	GateAlias = "www.localhost"
)

// Blocks of the gate attackers' addresses (127.block.x.y), one per case.
const (
	blockGatePaths = 30 + iota
	blockGateWait
	blockGateTransport
	blockGateParrot
	blockGateProxy // inside GateTrustedProxies
	blockGateLocation
	blockGateDivert
	blockGateTrace
	blockGateResume
)

// GateTarget is an edge configured for the gate attacks.
type GateTarget struct {
	Target
	HTTP   string    // host:port of the port-80 listener
	Tarpit *Upstream // the divert target "tarpit"
	FPLog  string    // the edge's fingerprint log file
	// Chromium is a Chromium binary whose fingerprint log line the
	// parrots are compared with; "" = the Chrome emulation's.
	Chromium string
}

// GateCase is one hole of issue 33, tried.
type GateCase struct {
	Name  string // for selection: "gate/paths"
	Title string // for the table
	Run   func(ctx context.Context, t GateTarget, out *GateOutcome) error
}

// GateCases returns the cases of issue 33.
func GateCases() []GateCase {
	return []GateCase{
		{"gate/paths", "basic_auth on /admin/, spelled otherwise", gatePaths},
		{"gate/wait", "the no-JS wait vs a 28-bit rule", gateWait},
		{"gate/transport", "a pass earned over QUIC, replayed over TCP", gateTransport},
		{"gate/parrot", "a Chrome parrot over Go's HTTP/2", gateParrot},
		{"gate/forwarded", "X-Forwarded-For behind trusted_proxies", gateForwarded},
		{"gate/location", "Location to another host", gateLocation},
		{"gate/divert", "what a diverted request carries to the tarpit", gateDivert},
		{"gate/trace", "TRACE", gateTrace},
		{"gate/resume", "a resumed TLS session keeps the pass", gateResume},
	}
}

// GateOutcome collects a case's rows.
type GateOutcome struct {
	mu   sync.Mutex
	rows []*GateRow
}

// Attack adds a row for a bypass try; expected is the answer the edge
// should give.
func (o *GateOutcome) Attack(try, expected string) *GateRow {
	return o.add(&GateRow{Try: try, Expected: expected})
}

// Honest adds a row for an honest client's try, which must pass.
func (o *GateOutcome) Honest(try, expected string) *GateRow {
	return o.add(&GateRow{Try: try, Expected: expected, Honest: true})
}

func (o *GateOutcome) add(r *GateRow) *GateRow {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.rows = append(o.rows, r)
	return r
}

// Rows returns the rows, in the order added.
func (o *GateOutcome) Rows() []*GateRow {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.rows)
}

// GateRow is one bypass try on the protocols it applies to, or an honest
// client's try.
type GateRow struct {
	Try      string
	Expected string
	Honest   bool // an honest try: Bad counts refusals, not bypasses

	mu      sync.Mutex
	protos  []string // in the order first tried
	tries   int
	bad     int      // attack: got through; honest: refused
	badOn   []string // the protocols of the bad tries, each once
	answers Tally
	notes   []string
}

// Add records a try over proto answered answer, and whether it was bad:
// for an attack, that it got through; for an honest try, that it was
// refused.
func (r *GateRow) Add(proto, answer string, bad bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !slices.Contains(r.protos, proto) {
		r.protos = append(r.protos, proto)
	}
	r.tries++
	if bad {
		r.bad++
		if !slices.Contains(r.badOn, proto) {
			r.badOn = append(r.badOn, proto)
		}
	}
	r.answers.Add(proto+" "+answer, 1)
}

// Note adds a remark to the row.
func (r *GateRow) Note(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

// GateCounts are a row's counts.
type GateCounts struct {
	Protos  []string
	Tries   int
	Bad     int
	BadOn   []string
	Answers string
	Notes   []string
}

// Counts returns the row's counts.
func (r *GateRow) Counts() GateCounts {
	r.mu.Lock()
	defer r.mu.Unlock()
	return GateCounts{Protos: slices.Clone(r.protos), Tries: r.tries, Bad: r.bad, BadOn: slices.Clone(r.badOn),
		Answers: r.answers.String(), Notes: slices.Clone(r.notes)}
}

// Verdict is the row's figure for a table: "3/3 (h1, h2, h3)", "0/3",
// or "not tried" when nothing was.
func (c GateCounts) Verdict() string {
	if c.Tries == 0 {
		return "not tried"
	}
	s := fmt.Sprintf("%d/%d", c.Bad, c.Tries)
	if c.Bad > 0 && len(c.Protos) > 1 {
		s += " (" + strings.Join(c.BadOn, ", ") + ")"
	}
	return s
}

// sendAndJudge sends r, records the answer in row (an error by its kind)
// and reports it; bad judges an answer.
func (t Target) sendAndJudge(ctx context.Context, row *GateRow, r GateRequest, bad func(Answer) bool) (Answer, error) {
	a, err := t.Send(ctx, r)
	if err != nil {
		row.Add(r.Proto, gateErrKind(err), row.Honest)
		return a, err
	}
	row.Add(r.Proto, a.kind(), bad(a))
	return a, nil
}

// gateErrKind names an error for a row's answers: an HTTP/2 reset by its
// code, others as errKind does.
func gateErrKind(err error) string {
	if re, ok := errors.AsType[h2ResetError](err); ok {
		return "reset " + re.code.String()
	}
	return errKind(err)
}

// FPLine is one line of the edge's fingerprint log.
type FPLine map[string]any

// Str returns field k as a string ("" if absent; arrays joined with ",").
func (l FPLine) Str(k string) string {
	switch v := l[k].(type) {
	case nil:
		return ""
	case string:
		return v
	case []any:
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = fmt.Sprint(x)
		}
		return strings.Join(parts, ",")
	case map[string]any:
		b, _ := json.Marshal(v)
		return string(b)
	default:
		return fmt.Sprint(v)
	}
}

// fpLine waits, for up to 10 s, for the line of the request for path in
// the fingerprint log file (the edge writes its lines a little late).
func fpLine(ctx context.Context, file, path string) (FPLine, error) {
	if file == "" {
		return nil, errors.New("testattack: the edge keeps no fingerprint log")
	}
	var found FPLine
	ok := waitUntil(ctx, 10*time.Second, func() bool {
		found = findFPLine(file, path)
		return found != nil
	})
	if !ok {
		return nil, fmt.Errorf("testattack: no fingerprint log line for %s", path)
	}
	return found, nil
}

// findFPLine returns the last line for path in file, or nil.
func findFPLine(file, path string) FPLine {
	f, err := os.Open(file)
	if err != nil {
		return nil
	}
	defer f.Close()
	var found FPLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if !strings.Contains(sc.Text(), path) {
			continue
		}
		var l FPLine
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Str("path") == path {
			found = l
		}
	}
	return found
}

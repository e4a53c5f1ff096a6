package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/maatproxy/maat/cmd/edge/internal/ops"
	"github.com/maatproxy/maat/edge/config"
)

func policyCheckCommand() *command {
	return &command{
		name: "policy check", args: "FILE", minArgs: 1, maxArgs: 1, summary: "Validate a policy file (ours or Anubis's)",
		doc: `Compiles the policy FILE and its imports; errors name file:line. Sections
of an Anubis policy that this edge does not use are warnings. The last line
says whether Maat's own signals add weight under the policy: a signals:
section turns them on, and an Anubis policy turns them on with one line
under bots:, "- import: (builtin)/maat-signals.yaml".

With -strict (for CI), an unknown key (a section, a rule's key, a
status_codes: key) is an error, and the exit status 1, instead of a
warning.`,
		flags: func(fs *flag.FlagSet) func(context.Context, stdio, []string) error {
			strict := fs.Bool("strict", false, "unknown keys are errors, not warnings")
			return func(_ context.Context, s stdio, args []string) error {
				warnings, signals, err := ops.CheckPolicy(args[0], *strict)
				if err != nil {
					return err
				}
				for _, w := range warnings {
					fmt.Fprintln(s.err, "edge: warning:", w)
				}
				fmt.Fprintf(s.out, "%s: ok; %s\n", args[0], signals)
				return nil
			}
		},
	}
}

func policyExplainCommand() *command {
	return &command{
		name: "policy explain", summary: "Say which rules match a request, its weight and the decision",
		doc: `Describes a request with flags, or with one line of the fingerprint log
(-from-log LINE, or -from-log - to read it from standard input; flags given
as well override the line's fields), and explains it with the policy of
-config FILE (the policy of the site of -host, sites[].policy, or the
global one), of -policy FILE alone, or the built-in default.

It runs the checks the live edge runs before the policy: crawler
verification for a User-Agent that claims a known crawler (reverse and
forward DNS, as live; -no-dns skips it), and the geo lookup when the
configuration has databases. The output says which checks ran.`,
		flags: func(fs *flag.FlagSet) func(context.Context, stdio, []string) error {
			cfgPath := fs.String("config", "", "configuration whose policy, geo databases and divert targets to use")
			polPath := fs.String("policy", "", "a policy file to use without a configuration")
			fromLog := fs.String("from-log", "", `one line of the fingerprint log ("-" = read it from standard input)`)
			noDNS := fs.Bool("no-dns", false, "skip crawler verification (offline)")
			var er ops.ExplainRequest
			fs.StringVar(&er.UA, "ua", "", "User-Agent")
			fs.StringVar(&er.Path, "path", "", "request path, with query (default /)")
			fs.StringVar(&er.IP, "ip", "", "client address (default 192.0.2.1)")
			fs.StringVar(&er.JA4, "ja4", "", "JA4 fingerprint of the client's TLS hello")
			fs.StringVar(&er.Method, "method", "", "request method (default GET)")
			fs.StringVar(&er.Host, "host", "", "Host header")
			fs.StringVar(&er.Proto, "proto", "", "HTTP/1.1, HTTP/2.0 or HTTP/3.0 (default HTTP/2.0)")
			fs.Func("header", "a request header Key:value (repeatable, in wire order)", func(h string) error {
				er.Headers = append(er.Headers, h)
				return nil
			})
			return func(ctx context.Context, s stdio, _ []string) error {
				if *fromLog != "" {
					base, err := explainFromLog(*fromLog, s.in)
					if err != nil {
						return err
					}
					set := map[string]bool{}
					fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
					er = mergeExplain(base, er, set)
					if er.IP == "" {
						fmt.Fprintln(s.err, "edge: warning: the log line's remote_ip is not an address (log.client_ip hides it): explaining as 192.0.2.1; give -ip to choose")
					}
				}
				o := ops.ExplainOptions{Policy: *polPath, NoDNS: *noDNS}
				if *cfgPath != "" {
					if *polPath != "" {
						return usageError("policy explain", "give -config or -policy, not both")
					}
					cfg, err := config.Load(*cfgPath)
					if err != nil {
						return err
					}
					o.Config = &cfg
				}
				out, err := ops.ExplainPolicy(ctx, er, o)
				if err != nil {
					return err
				}
				fmt.Fprint(s.out, out)
				if !strings.HasSuffix(out, "\n") {
					fmt.Fprintln(s.out)
				}
				return nil
			}
		},
	}
}

func explainCommand() *command {
	return &command{
		name: "explain", summary: "Say why the edge decided as it did on a request, by its ID",
		doc: `Finds the request -id (the ID the deny and challenge pages show, and
X-Request-Id upstream) in the fingerprint log, in the current file and then
in the rotated ones (gzipped or not), the newest first, and prints what the
log says of it (decision, rules, weight), the policy's explanation of it as
"edge policy explain" gives it, and what would have let it through.

The log is -log FILE, else the log.fingerprints of -config, else
` + config.DefaultFingerprintLog + `. The policy is that of -config, of -policy
FILE, or the built-in default. Lines of the log that are not records are
skipped, and counted in a warning.`,
		flags: func(fs *flag.FlagSet) func(context.Context, stdio, []string) error {
			var o ops.ExplainIDOptions
			fs.StringVar(&o.ID, "id", "", "the request ID (required)")
			fs.StringVar(&o.Log, "log", "", "the fingerprint log file (its rotated files are searched too)")
			cfgPath := fs.String("config", "", "configuration whose log, policy and geo databases to use")
			fs.StringVar(&o.Explain.Policy, "policy", "", "a policy file to explain with, without a configuration")
			fs.BoolVar(&o.Explain.NoDNS, "no-dns", false, "skip crawler verification (offline)")
			return func(ctx context.Context, s stdio, _ []string) error {
				if o.ID == "" {
					return usageError("explain", "-id REQUEST_ID is required")
				}
				if *cfgPath != "" {
					if o.Explain.Policy != "" {
						return usageError("explain", "give -config or -policy, not both")
					}
					cfg, err := config.Load(*cfgPath)
					if err != nil {
						return err
					}
					o.Explain.Config = &cfg
				}
				return ops.ExplainID(ctx, s.out, s.err, o)
			}
		},
	}
}

// explainFromLog reads the -from-log line: the flag's value, or one line
// of in for "-".
func explainFromLog(v string, in io.Reader) (ops.ExplainRequest, error) {
	if v == "-" {
		b, err := io.ReadAll(io.LimitReader(in, 1<<20))
		if err != nil {
			return ops.ExplainRequest{}, fmt.Errorf("read -from-log: %w", err)
		}
		v, _, _ = strings.Cut(strings.TrimSpace(string(b)), "\n")
	}
	return ops.ExplainRequestFromLog([]byte(strings.TrimSpace(v)))
}

// mergeExplain takes the log line's request and the flags the user set.
func mergeExplain(base, flags ops.ExplainRequest, set map[string]bool) ops.ExplainRequest {
	pick := func(name string, dst *string, v string) {
		if set[name] {
			*dst = v
		}
	}
	pick("ua", &base.UA, flags.UA)
	pick("path", &base.Path, flags.Path)
	pick("ip", &base.IP, flags.IP)
	pick("ja4", &base.JA4, flags.JA4)
	pick("method", &base.Method, flags.Method)
	pick("host", &base.Host, flags.Host)
	pick("proto", &base.Proto, flags.Proto)
	if set["header"] {
		base.Headers = flags.Headers
	}
	return base
}

func robotsCommand() *command {
	return &command{
		name: "robots2policy", args: "[FILE]", maxArgs: 1, summary: "Turn robots.txt into a policy that imports the default",
		doc: `Reads robots.txt from FILE, or standard input when FILE is absent or "-",
and writes policy YAML: Disallow paths are denied to crawlers, Crawl-delay
becomes a RATE rule, and the default policy is imported for the rest. Honest
clients (git, curl, feed readers) stay allowed on Disallow paths unless
-disallow-honest-clients.`,
		flags: func(fs *flag.FlagSet) func(context.Context, stdio, []string) error {
			var o ops.RobotsOptions
			fs.BoolVar(&o.DisallowHonestClients, "disallow-honest-clients", false, "deny Disallow paths to honest clients too")
			return func(_ context.Context, s stdio, args []string) error {
				in := s.in
				if len(args) == 1 && args[0] != "-" {
					f, err := os.Open(args[0])
					if err != nil {
						return err
					}
					defer f.Close()
					in = f
				}
				out, err := ops.RobotsToPolicy(in, o)
				if err != nil {
					return err
				}
				_, err = s.out.Write(out)
				return err
			}
		},
	}
}

func fpTopCommand() *command {
	return &command{
		name: "fp top", args: "FILE…", minArgs: 1, maxArgs: -1, summary: "Summarize fingerprint logs",
		doc: `Counts the values of one field over fingerprint log files (plain or .gz;
"-" reads standard input), the most frequent first, with the actions taken.
-by takes: ` + strings.Join(ops.FPTopFields(), ", ") + `.
-site, -action and -since count only the records of that host, that action
(` + strings.Join(ops.FPTopActions(), ", ") + `) and that age.`,
		flags: func(fs *flag.FlagSet) func(context.Context, stdio, []string) error {
			var o ops.FPTopOptions
			fs.StringVar(&o.By, "by", "ja4", "the field to count (see above)")
			fs.StringVar(&o.Since, "since", "", "only records newer than this: 90m, 12h, 1d, 2w")
			fs.StringVar(&o.Site, "site", "", "only records of this host (the request's Host, without case or port)")
			fs.StringVar(&o.Action, "action", "", "only records of this action: ALLOW, CHALLENGE, DENY, RATE, DIVERT or PASS")
			fs.IntVar(&o.Limit, "n", 20, "rows to show (negative: all)")
			fs.BoolVar(&o.JSON, "json", false, "JSON for machines")
			return func(_ context.Context, s stdio, args []string) error {
				if err := o.Validate(); err != nil {
					return usageError("fp top", "%v", err)
				}
				o.Stdin = s.in
				return ops.FPTop(s.out, args, o)
			}
		},
	}
}

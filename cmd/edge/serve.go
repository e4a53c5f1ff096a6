package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/maatproxy/maat/cmd/edge/internal/ops"
	"github.com/maatproxy/maat/edge"
	"github.com/maatproxy/maat/edge/config"
)

func demoCommand() *command {
	return &command{
		name: "demo", summary: "HTTPS, HTTP/2 and HTTP/3 on https://localhost:8443 in front of a demo app",
		doc: `The embedded default: a self-signed certificate for any name, the default
policy, and a built-in upstream page that shows what the edge saw of you.
The fingerprint log goes to ./edge-fp.jsonl. Ctrl-C stops it.`,
		flags: func(fs *flag.FlagSet) func(context.Context, stdio, []string) error {
			addr := fs.String("addr", "localhost:8443", "address for HTTPS (TCP) and HTTP/3 (UDP)")
			upstream := fs.String("upstream", "", "protect your own app at this http:// URL instead of the demo one")
			fpLog := fs.String("fp-log", "./edge-fp.jsonl", `fingerprint log file ("-" = stdout, "off" = none)`)
			return func(ctx context.Context, s stdio, _ []string) error {
				return runDemo(ctx, s, *addr, *upstream, *fpLog)
			}
		},
	}
}

func runDemo(ctx context.Context, s stdio, addr, upstream, fpLog string) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	up := upstream
	if up == "" {
		u, err := ops.StartDemoUpstream(ctx)
		if err != nil {
			return err
		}
		up = u
	}
	off := fpLog == "" || fpLog == config.FingerprintsOff
	cfg, err := edge.DemoConfig(edge.DemoOptions{Addr: addr, Upstream: up, FPLog: fpLog})
	if err != nil {
		return err
	}
	if off {
		cfg.Log.Fingerprints, fpLog = "", "off"
	}
	log := edge.NewLogger(s.err, cfg.Log)
	srv, err := edge.New(cfg, log)
	if err != nil {
		return err
	}
	if err := srv.Start(); err != nil {
		return err
	}
	fmt.Fprintf(s.out, `Maat demo is running.

  Open  https://%s/   (self-signed certificate: accept it, or curl -k)
  Upstream: %s
  Fingerprint log: %s

Try:
  curl -k https://%[1]s/
  curl -k --http2 -A "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36" https://%[1]s/
  curl -k --http3 https://%[1]s/        (if your curl speaks HTTP/3)

Ctrl-C stops it.
`, displayAddr(addr, srv.Addrs().HTTPS), up, fpLog)
	<-ctx.Done()
	return srv.Shutdown(context.Background())
}

// displayAddr shows the address the user asked for when it has a name.
func displayAddr(asked, bound string) string {
	if len(asked) > 0 && asked[0] != ':' && asked[0] != '[' && !(asked[0] >= '0' && asked[0] <= '9') {
		return asked
	}
	return bound
}

func runCommand() *command {
	return &command{
		name: "run", args: "FILE", maxArgs: 1, summary: "Serve a configuration (SIGHUP reloads, SIGTERM drains)",
		doc: `Serves the configuration FILE (or -config FILE) until SIGTERM or SIGINT,
then lets requests in flight finish for timeouts.drain. SIGHUP reads the
file again and applies sites, routes and policy at once; a bad file keeps
the running configuration, and the log says why. Logs go to standard error:
JSON, or text on a terminal.`,
		flags: func(fs *flag.FlagSet) func(context.Context, stdio, []string) error {
			cfgFlag := fs.String("config", "", "configuration file (YAML); the same as the FILE argument")
			return func(ctx context.Context, s stdio, args []string) error {
				path, err := configArg("run", *cfgFlag, args, "")
				if err != nil {
					return err
				}
				return serve(ctx, s, path)
			}
		},
	}
}

func serve(ctx context.Context, s stdio, path string) error {
	cfg, err := config.Load(path)
	if err != nil {
		return err
	}
	log := edge.NewLogger(s.err, cfg.Log)
	srv, err := edge.New(cfg, log)
	if err != nil {
		return cfg.Locate(err)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	done := make(chan struct{})
	defer func() { <-done }()
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				srv.ReloadFile(ctx, path)
			}
		}
	}()
	err = srv.Serve(ctx)
	stop() // ends the reload loop when Serve failed on its own
	return err
}

func configCheckCommand() *command {
	return &command{
		name: "config check", args: "FILE", maxArgs: 1, summary: "Check a configuration as run would, short of listening",
		doc: `Reads and validates FILE (or -config FILE), compiles its policy, opens the
geo databases, the certificate files and tls.cache, builds the static roots
and templates, resolves the listen addresses, and checks that the logs and
the state directory can be written, as the user running the check (run it
as the user the edge runs as). It writes nothing. Every problem is reported,
each with file, line and key; the exit status is 1 if there is any.

It also pings the shared Redis (store.kind: redis) and fetches the ACME
directory (tls.mode: acme), each within 5 seconds; what does not answer is
a warning, since run starts without them. With -offline (for CI) it touches
no network at all: no DNS lookup, no Redis, no ACME CA; it checks all the
rest, and lists what it skipped after "skipped:".`,
		flags: func(fs *flag.FlagSet) func(context.Context, stdio, []string) error {
			cfgFlag := fs.String("config", "", "configuration file (YAML); the same as the FILE argument")
			offline := fs.Bool("offline", false, "touch no network (DNS, Redis, ACME); list what is skipped")
			return func(ctx context.Context, s stdio, args []string) error {
				path, err := configArg("config check", *cfgFlag, args, "")
				if err != nil {
					return err
				}
				rep, err := ops.CheckConfig(ctx, path, ops.CheckOptions{Offline: *offline})
				for _, w := range rep.Warnings {
					fmt.Fprintln(s.err, "edge: warning:", w)
				}
				if len(rep.Skipped) > 0 {
					fmt.Fprintln(s.out, "skipped:")
					for _, sk := range rep.Skipped {
						fmt.Fprintln(s.out, "  "+sk)
					}
				}
				if err != nil {
					return err
				}
				fmt.Fprintf(s.out, "%s: ok\n", path)
				return nil
			}
		},
	}
}

func versionCommand() *command {
	return &command{
		name: "version", summary: "Print the version, commit and Go version",
		doc: `Also edge --version. The version comes from the binary's build information:
the module version for go install …@version, the VCS commit for a build in a
clone.`,
		flags: func(*flag.FlagSet) func(context.Context, stdio, []string) error {
			return func(_ context.Context, s stdio, _ []string) error {
				fmt.Fprintln(s.out, edge.ReadBuildInfo())
				return nil
			}
		},
	}
}

// Command edge is Maat's edge proxy: see DESIGN.md for its subcommands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/maatproxy/maat/edge"
)

func main() {
	if err := run(context.Background(), os.Args, os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "edge:", err)
		}
		os.Exit(exitCode(err))
	}
}

// errUsage marks a command-line mistake (exit code 2).
var errUsage = errors.New("usage")

func exitCode(err error) int {
	if errors.Is(err, errUsage) || errors.Is(err, flag.ErrHelp) {
		return 2
	}
	return 1
}

const usage = `usage: edge <command> [flags]

commands:
  demo                      HTTPS, HTTP/2 and HTTP/3 on https://localhost:8443 with a demo upstream
  run -config FILE          serve a configuration (SIGHUP reloads, SIGTERM drains)
  config check FILE         validate a configuration
  policy check FILE         validate a policy (ours or Anubis's)
  policy explain -config FILE [-ua S] [-path P] [-ip A] [-ja4 F] [-header K:V]...
  robots2policy [FILE]      robots.txt to policy YAML
  fp top [-by KEY] FILE...  summarize fingerprint logs
  version
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) < 2 {
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("%w: no command", errUsage)
	}
	cmd, rest := args[1], args[2:]
	switch cmd {
	case "demo":
		return runDemo(ctx, rest, stdout, stderr)
	case "run":
		return runServe(ctx, rest, stderr)
	case "config":
		return runConfig(rest, stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, version())
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	case "policy":
		return runPolicy(ctx, rest, stdout, stderr)
	case "robots2policy":
		return runRobots(ctx, rest, stdout, stderr)
	case "fp":
		return runFP(ctx, rest, stdout, stderr)
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("%w: unknown command %q", errUsage, cmd)
}

func version() string {
	v := "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		v = bi.Main.Version
	}
	return "edge " + v
}

func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("edge "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return nil
}

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("demo", stderr)
	addr := fs.String("addr", "localhost:8443", "address for HTTPS (TCP) and HTTP/3 (UDP)")
	upstream := fs.String("upstream", "", "protect your own app at this http:// URL instead of the demo one")
	fpLog := fs.String("fp-log", "./edge-fp.jsonl", `fingerprint log file ("-" = stdout, "" = off)`)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	up := *upstream
	if up == "" {
		u, err := edge.StartDemoUpstream(ctx)
		if err != nil {
			return err
		}
		up = u
	}
	cfg, err := edge.DemoConfig(edge.DemoOptions{Addr: *addr, Upstream: up, FPLog: *fpLog})
	if err != nil {
		return err
	}
	log := edge.NewLogger(stderr, cfg.Log)
	s, err := edge.New(cfg, log)
	if err != nil {
		return err
	}
	if err := s.Start(); err != nil {
		return err
	}
	a := s.Addrs()
	fmt.Fprintf(stdout, `Maat demo is running.

  Open  https://%s/   (self-signed certificate: accept it, or curl -k)
  Upstream: %s
  Fingerprint log: %s

Try:
  curl -k https://%[1]s/
  curl -k --http2 -A "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36" https://%[1]s/
  curl -k --http3 https://%[1]s/        (if your curl speaks HTTP/3)

Ctrl-C stops it.
`, displayAddr(*addr, a.HTTPS), up, *fpLog)
	<-ctx.Done()
	return s.Shutdown(context.Background())
}

// displayAddr shows the address the user asked for when it has a name.
func displayAddr(asked, bound string) string {
	if len(asked) > 0 && asked[0] != ':' && asked[0] != '[' && !(asked[0] >= '0' && asked[0] <= '9') {
		return asked
	}
	return bound
}

func runServe(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newFlags("run", stderr)
	path := fs.String("config", "", "configuration file (YAML)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *path == "" {
		return fmt.Errorf("%w: edge run needs -config FILE", errUsage)
	}
	cfg, err := edge.LoadConfig(*path)
	if err != nil {
		return err
	}
	log := edge.NewLogger(stderr, cfg.Log)
	s, err := edge.New(cfg, log)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				s.ReloadFile(ctx, *path)
			}
		}
	}()
	return s.Serve(ctx)
}

func runConfig(args []string, stdout, stderr io.Writer) error {
	if len(args) != 2 || args[0] != "check" {
		return fmt.Errorf("%w: edge config check FILE", errUsage)
	}
	if _, err := edge.LoadConfig(args[1]); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: ok\n", args[1])
	return nil
}

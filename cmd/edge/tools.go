package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/maatproxy/maat/edge"
)

func runPolicy(_ context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: edge policy check FILE | edge policy explain -config FILE …", errUsage)
	}
	switch args[0] {
	case "check":
		if len(args) != 2 {
			return fmt.Errorf("%w: edge policy check FILE", errUsage)
		}
		warnings, err := edge.CheckPolicy(args[1])
		if err != nil {
			return err
		}
		for _, w := range warnings {
			fmt.Fprintln(stderr, "warning:", w)
		}
		fmt.Fprintf(stdout, "%s: ok\n", args[1])
		return nil
	case "explain":
		fs := newFlags("policy explain", stderr)
		cfgPath := fs.String("config", "", "configuration file whose policy to use (empty: the built-in default)")
		var er edge.ExplainRequest
		fs.StringVar(&er.UA, "ua", "", "User-Agent")
		fs.StringVar(&er.Path, "path", "/", "request path (with query)")
		fs.StringVar(&er.IP, "ip", "", "client address")
		fs.StringVar(&er.JA4, "ja4", "", "JA4 fingerprint of the client's TLS hello")
		fs.StringVar(&er.Method, "method", "GET", "request method")
		fs.StringVar(&er.Host, "host", "", "Host header")
		fs.StringVar(&er.Proto, "proto", "HTTP/2.0", "HTTP/1.1, HTTP/2.0 or HTTP/3.0")
		fs.Func("header", "a request header Key:value (repeatable, in wire order)", func(s string) error {
			er.Headers = append(er.Headers, s)
			return nil
		})
		if err := parseFlags(fs, args[1:]); err != nil {
			return err
		}
		cfg := edge.DefaultConfig()
		if *cfgPath != "" {
			c, err := edge.LoadConfig(*cfgPath)
			if err != nil {
				return err
			}
			cfg = c
		}
		out, err := edge.ExplainPolicy(cfg, er)
		if err != nil {
			return err
		}
		fmt.Fprint(stdout, out)
		if !strings.HasSuffix(out, "\n") {
			fmt.Fprintln(stdout)
		}
		return nil
	}
	return fmt.Errorf("%w: unknown policy command %q", errUsage, args[0])
}

func runRobots(_ context.Context, args []string, stdout, _ io.Writer) error {
	var in io.Reader = os.Stdin
	switch len(args) {
	case 0:
	case 1:
		f, err := os.Open(args[0])
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	default:
		return fmt.Errorf("%w: edge robots2policy [FILE]", errUsage)
	}
	out, err := edge.RobotsToPolicy(in)
	if err != nil {
		return err
	}
	_, err = stdout.Write(out)
	return err
}

func runFP(_ context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "top" {
		return fmt.Errorf("%w: edge fp top [-by KEY] [-since DURATION] [-json] FILE…", errUsage)
	}
	fs := newFlags("fp top", stderr)
	var o edge.FPTopOptions
	fs.StringVar(&o.By, "by", "ja4", "ja4|hfp|h2fp|ua|family|ip|rule|action (also ja4_r, ja4_o, ja4_ro, hfp_r, ja4h, host, proto)")
	fs.DurationVar(&o.Since, "since", 0, "only records newer than this, e.g. 1h")
	fs.IntVar(&o.Limit, "n", 20, "rows to show (negative: all)")
	fs.BoolVar(&o.JSON, "json", false, "JSON for machines")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("%w: edge fp top needs at least one log file", errUsage)
	}
	return edge.FPTop(stdout, fs.Args(), o)
}

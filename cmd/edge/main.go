// Command edge is Maat's edge proxy. `edge help` lists its commands;
// DESIGN.md, "Command line", states their conventions: every command
// answers -h and --help on standard output; flags may come before or
// after the arguments; a usage error exits 2, any other error 1; every
// message starts with "edge: " once.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/maatproxy/maat/edge"
	"github.com/maatproxy/maat/edge/config"
)

func main() {
	err := run(context.Background(), os.Args, stdio{in: os.Stdin, out: os.Stdout, err: os.Stderr})
	printError(os.Stderr, err)
	os.Exit(exitCode(err))
}

// stdio are a command's standard streams.
type stdio struct {
	in       io.Reader
	out, err io.Writer
}

// errUsage marks a command-line mistake (exit code 2).
var errUsage = errors.New("usage")

// errHelpShown ends a command whose usage was asked for and printed
// (exit code 0, nothing more printed).
var errHelpShown = errors.New("help shown")

// usageError is a command-line mistake in command name.
func usageError(name, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if name != "" && name != "help" {
		msg = name + ": " + msg + " (see edge " + name + " -h)"
	} else {
		msg += " (see edge help)"
	}
	return fmt.Errorf("%w: %s", errUsage, msg)
}

func exitCode(err error) int {
	switch {
	case err == nil, errors.Is(err, errHelpShown):
		return 0
	case errors.Is(err, errUsage):
		return 2
	}
	return 1
}

// printError prints each problem of err on its own line, starting with
// "edge: " once: errors of the edge package carry that prefix already
// (DESIGN.md: a package prefixes the errors it creates), and the command
// adds it only to those that lack it. Further lines of one problem are
// indented under it.
func printError(w io.Writer, err error) {
	if err == nil || errors.Is(err, errHelpShown) {
		return
	}
	for _, p := range config.Problems(err) {
		msg := p.Error()
		if errors.Is(p, errUsage) {
			msg = strings.TrimPrefix(msg, errUsage.Error()+": ")
		}
		if !strings.HasPrefix(msg, "edge: ") {
			msg = "edge: " + msg
		}
		fmt.Fprintln(w, strings.ReplaceAll(strings.TrimRight(msg, "\n"), "\n", "\n  "))
	}
}

// run runs the command line args (args[0] is the program's name).
func run(ctx context.Context, args []string, s stdio) error {
	if len(args) < 2 {
		printOverview(s.err)
		return fmt.Errorf("%w: no command given (see edge help)", errUsage)
	}
	name, rest := args[1], args[2:]
	switch name {
	case "-h", "-help", "--help":
		printOverview(s.out)
		return nil
	case "-version", "--version", "-V":
		fmt.Fprintln(s.out, edge.ReadBuildInfo())
		return nil
	case "help":
		return runHelp(rest, s)
	}
	cmd, rest, err := find(name, rest)
	if err != nil {
		return err
	}
	return cmd.exec(ctx, rest, s)
}

// find looks a command up by its words: "run", or "config" then "check".
func find(name string, rest []string) (*command, []string, error) {
	if g := group(name); len(g) > 0 {
		if len(rest) == 0 {
			return nil, nil, usageError(name, "a subcommand is needed: %s", strings.Join(subNames(g), ", "))
		}
		if isHelp(rest[0]) {
			return &command{name: name, summary: "subcommands of " + name, group: g}, nil, nil
		}
		for _, c := range g {
			if c.name == name+" "+rest[0] {
				return c, rest[1:], nil
			}
		}
		return nil, nil, usageError(name, "unknown subcommand %q (want %s)", rest[0], strings.Join(subNames(g), ", "))
	}
	for _, c := range commands() {
		if c.name == name {
			return c, rest, nil
		}
	}
	return nil, nil, usageError("", "unknown command %q", name)
}

func isHelp(arg string) bool { return arg == "-h" || arg == "-help" || arg == "--help" }

// runHelp prints the usage of a command, or the overview.
func runHelp(words []string, s stdio) error {
	if len(words) == 0 || len(words) == 1 && isHelp(words[0]) {
		printOverview(s.out)
		return nil
	}
	if g := group(words[0]); len(g) > 0 && len(words) == 1 {
		words = append(words, "-h") // the group's list of subcommands
	}
	cmd, rest, err := find(words[0], words[1:])
	if err != nil {
		return err
	}
	if len(rest) > 0 && cmd.group == nil {
		return usageError("help", "unexpected %q", strings.Join(rest, " "))
	}
	cmd.printUsage(s.out)
	return nil
}

// printOverview is the usage of edge itself.
func printOverview(w io.Writer) {
	fmt.Fprint(w, "usage: edge <command> [flags] [arguments]\n\nMaat's edge proxy: TLS, HTTP/3, fingerprints and a bot policy in front of your sites.\n\ncommands:\n")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-28s  %s\n", c.name+" "+c.synopsisShort(), c.summary)
	}
	fmt.Fprintf(w, "  %-28s  %s\n", "help [COMMAND]", "Describe a command, or list them")
	fmt.Fprint(w, "\nedge help COMMAND (or edge COMMAND -h) describes a command and its flags.\nFlags may come before or after arguments. Exit status: 0 ok, 1 failure, 2 usage error.\n")
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// command is one command of the binary: its words, its flags and what it
// does with them.
type command struct {
	name    string // the words typed: "run", "config check"
	args    string // the positional arguments in the synopsis: "FILE", "[FILE]…"
	summary string // one line, for the overview
	doc     string // paragraphs for -h
	// minArgs and maxArgs bound the positional arguments; maxArgs < 0: any.
	minArgs, maxArgs int
	// flags defines the command's flags on fs and returns the function
	// that runs it with them.
	flags func(fs *flag.FlagSet) func(ctx context.Context, s stdio, args []string) error
	group []*command // a command with subcommands (config, policy, fp)
}

// commands is the table of every command, in the order the overview
// lists them.
func commands() []*command {
	return []*command{
		demoCommand(), runCommand(), configCheckCommand(), policyCheckCommand(), policyExplainCommand(), explainCommand(),
		robotsCommand(), fpTopCommand(), hashPasswordCommand(), trustCommand(), completionCommand(), healthCommand(), versionCommand(),
	}
}

// group returns the subcommands of a first word such as "config".
func group(word string) []*command {
	var g []*command
	for _, c := range commands() {
		if first, _, ok := strings.Cut(c.name, " "); ok && first == word {
			g = append(g, c)
		}
	}
	return g
}

func subNames(g []*command) []string {
	names := make([]string, len(g))
	for i, c := range g {
		_, names[i], _ = strings.Cut(c.name, " ")
	}
	return names
}

// newFlagSet is a FlagSet that reports nothing itself: exec does.
func (c *command) newFlagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("edge "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// exec parses args, flags anywhere among the arguments, and runs c.
func (c *command) exec(ctx context.Context, args []string, s stdio) error {
	if c.group != nil { // "edge config -h"
		c.printUsage(s.out)
		return errHelpShown
	}
	fs := c.newFlagSet()
	runFn := c.flags(fs)
	pos, err := parseInterspersed(fs, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		c.printUsage(s.out)
		return errHelpShown
	case err != nil:
		return usageError(c.name, "%v", err)
	case len(pos) < c.minArgs:
		return usageError(c.name, "missing %s", c.args)
	case c.maxArgs >= 0 && len(pos) > c.maxArgs:
		return usageError(c.name, "unexpected argument %q", pos[c.maxArgs])
	}
	return runFn(ctx, s, pos)
}

// parseInterspersed parses flags wherever they stand among the positional
// arguments (fp top FILE -n 5), as GNU getopt does; "--" ends the flags.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// synopsisShort is the synopsis without the flags' details.
func (c *command) synopsisShort() string {
	if c.flags == nil || !hasFlags(c) {
		return c.args
	}
	return strings.TrimSpace("[flags] " + c.args)
}

func hasFlags(c *command) bool {
	fs := c.newFlagSet()
	c.flags(fs)
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// printUsage prints c's usage: synopsis, description and flags.
func (c *command) printUsage(w io.Writer) {
	if c.group != nil {
		fmt.Fprintf(w, "usage: edge %s <subcommand> [flags] [arguments]\n\nsubcommands:\n", c.name)
		for _, sub := range c.group {
			fmt.Fprintf(w, "  %-28s  %s\n", sub.name+" "+sub.synopsisShort(), sub.summary)
		}
		fmt.Fprintf(w, "\nedge %s SUBCOMMAND -h describes one.\n", c.name)
		return
	}
	fmt.Fprintf(w, "usage: edge %s %s\n\n%s\n", c.name, c.synopsisShort(), c.summary)
	if c.doc != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.doc))
	}
	fs := c.newFlagSet()
	c.flags(fs)
	if hasFlags(c) {
		fmt.Fprint(w, "\nflags:\n")
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
}

// flagNames lists the flags of c as -name, for completion.
func (c *command) flagNames() []string {
	fs := c.newFlagSet()
	c.flags(fs)
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, "-"+f.Name) })
	return names
}

// configArg is the configuration file of run, config check and trust: the
// argument FILE or -config FILE, one of them.
func configArg(name, flagValue string, args []string, def string) (string, error) {
	switch {
	case flagValue != "" && len(args) > 0:
		return "", usageError(name, "give the configuration as -config FILE or as FILE, not both")
	case flagValue != "":
		return flagValue, nil
	case len(args) > 0:
		return args[0], nil
	case def != "":
		return def, nil
	}
	return "", usageError(name, "missing the configuration FILE")
}

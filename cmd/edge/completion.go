package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/maatproxy/maat/cmd/edge/internal/ops"
)

func completionCommand() *command {
	return &command{
		name: "completion", args: "bash|zsh|fish", minArgs: 1, maxArgs: 1, summary: "Print a shell completion script",
		doc: `Prints a completion script for bash, zsh or fish, made from the commands
and flags of this binary. Install it with, for bash:

    edge completion bash > /etc/bash_completion.d/edge     (or: source <(edge completion bash))

and for zsh, into a directory of $fpath:

    edge completion zsh > "${fpath[1]}/_edge"               (or: source <(edge completion zsh))

and for fish:

    edge completion fish > ~/.config/fish/completions/edge.fish

The Debian package installs all three where each shell looks for them.`,
		flags: func(*flag.FlagSet) func(context.Context, stdio, []string) error {
			return func(_ context.Context, s stdio, args []string) error {
				switch args[0] {
				case "bash":
					writeBashCompletion(s.out)
				case "zsh":
					writeZshCompletion(s.out)
				case "fish":
					writeFishCompletion(s.out)
				default:
					return usageError("completion", "unknown shell %q (want bash, zsh or fish)", args[0])
				}
				return nil
			}
		},
	}
}

// fileFlags take a file name; the other flags take free text.
var fileFlags = []string{"-config", "-policy", "-fp-log", "-root"}

// topWords are the first words of the commands, in the overview's order.
func topWords() []string {
	var words []string
	for _, c := range commands() {
		first, _, _ := strings.Cut(c.name, " ")
		if !slices.Contains(words, first) {
			words = append(words, first)
		}
	}
	return append(words, "help")
}

func writeBashCompletion(w io.Writer) {
	fmt.Fprintf(w, `# bash completion for edge (Maat), made by: edge completion bash
_edge() {
    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"
    local cmd="${COMP_WORDS[1]}" sub="" first=2
    if [[ $COMP_CWORD -eq 1 ]]; then
        COMPREPLY=( $(compgen -W %q -- "$cur") )
        return
    fi
    case "$cmd" in
`, strings.Join(topWords(), " "))
	for _, word := range topWords() {
		if g := group(word); len(g) > 0 {
			fmt.Fprintf(w, `    %s)
        if [[ $COMP_CWORD -eq 2 ]]; then
            COMPREPLY=( $(compgen -W %q -- "$cur") )
            return
        fi
        sub="${COMP_WORDS[2]}" first=3 ;;
`, word, strings.Join(subNames(g), " "))
		}
	}
	fmt.Fprintf(w, `    help)
        COMPREPLY=( $(compgen -W %q -- "$cur") )
        return ;;
    esac
    case "$prev" in
        -by) COMPREPLY=( $(compgen -W %q -- "$cur") ); return ;;
        %s) COMPREPLY=( $(compgen -f -- "$cur") ); return ;;
    esac
    case "$cmd${sub:+ $sub}" in
`, strings.Join(topWords()[:len(topWords())-1], " "), strings.Join(ops.FPTopFields(), " "), strings.Join(fileFlags, "|"))
	for _, c := range commands() {
		flags := append(c.flagNames(), "-h")
		args := `COMPREPLY=( $(compgen -f -- "$cur") )`
		switch {
		case c.name == "completion":
			args = `COMPREPLY=( $(compgen -W "bash zsh fish" -- "$cur") )`
		case c.maxArgs == 0:
			args = "COMPREPLY=()"
		}
		fmt.Fprintf(w, `        %q)
            if [[ "$cur" == -* ]]; then COMPREPLY=( $(compgen -W %q -- "$cur") ); else %s; fi ;;
`, c.name, strings.Join(flags, " "), args)
	}
	fmt.Fprint(w, `    esac
    : "$first"
}
complete -o filenames -o bashdefault -F _edge edge
`)
}

// zshQuote makes text safe inside a zsh _arguments or _describe spec.
func zshQuote(s string) string {
	r := strings.NewReplacer("'", "’", "[", "(", "]", ")", "\\", "")
	return r.Replace(s)
}

func writeZshCompletion(w io.Writer) {
	fmt.Fprint(w, "#compdef edge\n# zsh completion for edge (Maat), made by: edge completion zsh\n\n_edge() {\n  local -a top\n  top=(\n")
	for _, word := range topWords() {
		summary := "describe a command"
		if g := group(word); len(g) > 0 {
			summary = strings.Join(subNames(g), ", ")
		} else if word != "help" {
			cmd, _, _ := find(word, nil)
			summary = cmd.summary
		}
		fmt.Fprintf(w, "    '%s:%s'\n", word, zshQuote(summary))
	}
	fmt.Fprint(w, "  )\n  if (( CURRENT == 2 )); then\n    _describe -t commands 'edge command' top\n    return\n  fi\n  local cmd=$words[2]\n  shift words; (( CURRENT-- ))\n  case $cmd in\n")
	for _, word := range topWords() {
		g := group(word)
		if len(g) == 0 {
			continue
		}
		fmt.Fprintf(w, "    %s)\n      local -a subs\n      subs=(\n", word)
		for _, c := range g {
			_, sub, _ := strings.Cut(c.name, " ")
			fmt.Fprintf(w, "        '%s:%s'\n", sub, zshQuote(c.summary))
		}
		fmt.Fprint(w, "      )\n      if (( CURRENT == 2 )); then\n        _describe -t commands \"edge $cmd subcommand\" subs\n        return\n      fi\n      cmd=\"$cmd $words[2]\"\n      shift words; (( CURRENT-- )) ;;\n")
	}
	fmt.Fprint(w, "  esac\n  case $cmd in\n")
	for _, c := range commands() {
		fmt.Fprintf(w, "    '%s')\n      _arguments -S \\\n", c.name)
		fs := c.newFlagSet()
		c.flags(fs)
		fs.VisitAll(func(f *flag.Flag) {
			spec := fmt.Sprintf("'-%s[%s]", f.Name, zshQuote(f.Usage))
			switch {
			case slices.Contains(fileFlags, "-"+f.Name):
				spec += ":file:_files"
			case f.Name == "by":
				spec += ":field:(" + strings.Join(ops.FPTopFields(), " ") + ")"
			case isBoolFlag(f):
			default:
				spec += ":value: "
			}
			fmt.Fprintf(w, "        %s' \\\n", spec)
		})
		fmt.Fprint(w, "        '-h[print the command’s usage]'")
		switch {
		case c.name == "completion":
			fmt.Fprint(w, " \\\n        '1:shell:(bash zsh fish)'")
		case c.name == "hash-password":
			fmt.Fprint(w, " \\\n        '::user: '")
		case c.maxArgs != 0:
			fmt.Fprint(w, " \\\n        '*:file:_files'")
		}
		fmt.Fprint(w, " ;;\n")
	}
	fmt.Fprint(w, "    help)\n      _describe -t commands 'edge command' top ;;\n  esac\n}\n\nif [[ $zsh_eval_context[-1] == loadautofunc ]]; then\n  _edge \"$@\"\nelse\n  compdef _edge edge\nfi\n")
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// fishQuote makes text one single-quoted fish word.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(s) + "'"
}

// writeFishCompletion writes complete(1) lines: the first words, the
// subcommands of each group, then each command's flags (old-style -name
// options, as the flag package parses them) and its arguments.
func writeFishCompletion(w io.Writer) {
	fmt.Fprint(w, "# fish completion for edge (Maat), made by: edge completion fish\n")
	fmt.Fprint(w, "complete -c edge -f\n")
	top := topWords()
	for _, word := range top {
		summary := "describe a command"
		if g := group(word); len(g) > 0 {
			summary = strings.Join(subNames(g), ", ")
		} else if word != "help" {
			cmd, _, _ := find(word, nil)
			summary = cmd.summary
		}
		fmt.Fprintf(w, "complete -c edge -n %s -a %s -d %s\n",
			fishQuote("not __fish_seen_subcommand_from "+strings.Join(top, " ")), word, fishQuote(summary))
	}
	for _, word := range top {
		g := group(word)
		if len(g) == 0 {
			continue
		}
		subs := subNames(g)
		for _, c := range g {
			_, sub, _ := strings.Cut(c.name, " ")
			fmt.Fprintf(w, "complete -c edge -n %s -a %s -d %s\n",
				fishQuote("__fish_seen_subcommand_from "+word+"; and not __fish_seen_subcommand_from "+strings.Join(subs, " ")),
				sub, fishQuote(c.summary))
		}
	}
	fmt.Fprintf(w, "complete -c edge -n %s -a %s\n", fishQuote("__fish_seen_subcommand_from help"), fishQuote(strings.Join(top[:len(top)-1], " ")))
	for _, c := range commands() {
		first, sub, _ := strings.Cut(c.name, " ")
		cond := "__fish_seen_subcommand_from " + first
		if sub != "" {
			cond += "; and __fish_seen_subcommand_from " + sub
		}
		fs := c.newFlagSet()
		c.flags(fs)
		fs.VisitAll(func(f *flag.Flag) {
			line := fmt.Sprintf("complete -c edge -n %s -o %s -d %s", fishQuote(cond), f.Name, fishQuote(f.Usage))
			switch {
			case slices.Contains(fileFlags, "-"+f.Name):
				line += " -r -F"
			case f.Name == "by":
				line += " -x -a " + fishQuote(strings.Join(ops.FPTopFields(), " "))
			case isBoolFlag(f):
			default:
				line += " -x"
			}
			fmt.Fprintln(w, line)
		})
		switch {
		case c.name == "completion":
			fmt.Fprintf(w, "complete -c edge -n %s -a %s\n", fishQuote(cond), fishQuote("bash zsh fish"))
		case c.maxArgs != 0 && c.name != "hash-password":
			fmt.Fprintf(w, "complete -c edge -n %s -F\n", fishQuote(cond))
		}
	}
}

// Command man writes the manual page edge(1) from the edge command's own
// help, so that the page says what the binary says: it runs `edge help`
// for the usage and the list of commands, `edge help CMD` for each command
// that has a help of its own, and `edge version` for the page's footer, and
// writes roff (man(7) macros) with no tool besides Go. `make deb` runs it:
//
//	go run ./dist/man -edge bin/deb/edge -o bin/deb/edge.1.gz
//
// A name ending in .gz is gzipped with a fixed header, so that the same
// binary gives the same bytes.
package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "man:", err)
		os.Exit(1)
	}
}

func run(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("man", flag.ContinueOnError)
	fs.SetOutput(stderr)
	edge := fs.String("edge", "edge", "the edge binary whose help to read")
	out := fs.String("o", "-", `output file ("-" = stdout; a name ending in .gz is gzipped)`)
	if err := fs.Parse(args); err != nil {
		return err
	}
	page, err := generate(edgeRunner(*edge))
	if err != nil {
		return err
	}
	if strings.HasSuffix(*out, ".gz") {
		page, err = gzipped(page)
		if err != nil {
			return err
		}
	}
	if *out == "-" {
		_, err = os.Stdout.Write(page)
		return err
	}
	return os.WriteFile(*out, page, 0o644)
}

// runner runs the edge command with arguments and returns its standard
// output, or an error when it does not exit 0.
type runner func(args ...string) (string, error)

// edgeRunner runs the binary at path, each call bounded in time.
func edgeRunner(path string) runner {
	return func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, path, args...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("%s %s: %w: %s", path, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
		}
		return stdout.String(), nil
	}
}

// command is one entry of the help's command list.
type command struct {
	name     string // the words that name it: "config check"
	synopsis string // as the help writes it: "config check FILE"
	summary  string // what it does; may be empty
	help     string // its own `edge help NAME`, if that differs from the top help
}

// usage is the top-level help, read.
type usage struct {
	lines    []string // the usage lines before the command list: "usage: edge <command> [flags]"
	intro    []string // other lines before it: what edge is
	commands []command
	notes    []string // lines after the command list
	indent   int      // of the first entry; deeper lines continue a summary
}

// parseHelp reads the help `edge help` prints: usage lines, a line
// "commands:", then one indented line per command, the synopsis and its
// summary separated by two or more spaces (a more deeply indented line
// continues the summary above it), then anything else.
func parseHelp(text string) (usage, error) {
	var u usage
	state := 0 // 0: before the list, 1: in it, 2: after it
	for line := range strings.Lines(text) {
		line = strings.TrimRight(line, " \t\r\n")
		switch {
		case state == 0 && strings.EqualFold(strings.TrimSpace(line), "commands:"):
			state = 1
		case state == 0 && strings.HasPrefix(strings.ToLower(line), "usage:"):
			u.lines = append(u.lines, line)
		case state == 0:
			if line != "" || len(u.intro) > 0 {
				u.intro = append(u.intro, line)
			}
		case state == 1 && line == "":
			if len(u.commands) > 0 {
				state = 2
			}
		case state == 1 && strings.HasPrefix(line, "  "):
			u.addEntry(line)
		case state == 1:
			state = 2
			u.notes = append(u.notes, line)
		default:
			u.notes = append(u.notes, line)
		}
	}
	if len(u.commands) == 0 {
		return u, errors.New(`the help lists no commands (want a line "commands:" and indented entries)`)
	}
	u.intro, u.notes = trimBlank(u.intro), trimBlank(u.notes)
	return u, nil
}

// trimBlank drops the empty lines at the ends of lines.
func trimBlank(lines []string) []string {
	for len(lines) > 0 && lines[0] == "" {
		lines = lines[1:]
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// addEntry reads one indented line of the command list.
func (u *usage) addEntry(line string) {
	indent := len(line) - len(strings.TrimLeft(line, " "))
	body := strings.TrimSpace(line)
	if n := len(u.commands); n > 0 && indent > u.indent+2 {
		// A wrapped summary, aligned under the summaries.
		c := &u.commands[n-1]
		c.summary = strings.TrimSpace(c.summary + " " + body)
		return
	}
	if len(u.commands) == 0 {
		u.indent = indent
	}
	synopsis, summary := body, ""
	if i := strings.Index(body, "  "); i > 0 {
		synopsis, summary = body[:i], strings.TrimSpace(body[i:])
	}
	u.commands = append(u.commands, command{name: commandName(synopsis), synopsis: synopsis, summary: summary})
}

// commandName is the leading words of a synopsis that name the command:
// lower-case words ("config check", "hash-password"), up to the first
// flag, placeholder or alternative.
func commandName(synopsis string) string {
	var words []string
	for w := range strings.FieldsSeq(synopsis) {
		if !isWord(w) {
			break
		}
		words = append(words, w)
	}
	return strings.Join(words, " ")
}

func isWord(w string) bool {
	if w == "" || w[0] < 'a' || w[0] > 'z' {
		return false
	}
	for i := 0; i < len(w); i++ {
		c := w[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// generate reads the help through run and returns the page.
func generate(run runner) ([]byte, error) {
	top, err := run("help")
	if err != nil {
		return nil, err
	}
	u, err := parseHelp(top)
	if err != nil {
		return nil, err
	}
	version, err := run("version")
	if err != nil {
		return nil, err
	}
	version, _, _ = strings.Cut(strings.TrimSpace(version), "\n")
	for i := range u.commands {
		c := &u.commands[i]
		if c.name == "" || c.name == "help" {
			continue
		}
		// `edge help CMD`, never `edge CMD -h`: a command that did not
		// know -h would run (demo would start listening).
		h, err := run(append([]string{"help"}, strings.Fields(c.name)...)...)
		if err == nil && strings.TrimSpace(h) != "" && strings.TrimSpace(h) != strings.TrimSpace(top) {
			c.help = strings.TrimRight(h, "\n")
		}
	}
	return render(u, version), nil
}

// render writes the page in man(7) macros.
func render(u usage, version string) []byte {
	var b bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w(".\\\" Generated by dist/man from the output of `edge help`; do not edit.\n")
	w(".TH EDGE 1 \"\" %s \"User Commands\"\n", quote(version))
	w(".SH NAME\nedge \\- Maat's edge proxy, which weighs every request\n")
	w(".SH SYNOPSIS\n")
	preformatted(&b, u.lines)
	w(".SH DESCRIPTION\n")
	for _, l := range u.intro {
		if l == "" {
			w(".PP\n")
			continue
		}
		w("%s\n", escape(l))
	}
	if len(u.intro) > 0 {
		w(".PP\n")
	}
	w("%s\n", escape("edge stands in front of websites as their only front proxy. It terminates TLS and HTTP/3 with automatic ACME certificates, fingerprints every client (JA4, the order of HTTP header names, the HTTP/2 fingerprint), weighs those signals with a policy and allows, denies, rate-limits or challenges each request with a proof of work or a short wait, then proxies what it allows to the site's upstream."))
	w(".SH COMMANDS\n")
	for _, c := range u.commands {
		w(".TP\n.B %s\n", quote(c.synopsis))
		if c.summary != "" {
			w("%s\n", escape(c.summary))
		}
	}
	for _, c := range u.commands {
		if c.help == "" {
			continue
		}
		w(".SS %s\n", quote("edge "+c.name))
		preformatted(&b, strings.Split(c.help, "\n"))
	}
	if len(u.notes) > 0 {
		w(".SH NOTES\n")
		preformatted(&b, u.notes)
	}
	w(`.SH FILES
.TP
.I /etc/edge/edge.yaml
The configuration of the packaged service; every key, with its default, is in the file as shipped.
.TP
.I /var/lib/edge
Certificates, the ACME account and the challenge secret (the state directory of the systemd unit).
.TP
.I /var/log/edge
The fingerprint log and access logs, rotated by edge itself.
.TP
.I /usr/share/doc/edge/docs/
Configuration, policy, fingerprints, operations and the FAQ.
.SH SIGNALS
.TP
.B SIGHUP
Reload the configuration and the policy atomically; a bad file keeps the running configuration, and the log says why. Logs are reopened.
.TP
.B SIGTERM
Stop accepting, drain requests in flight for at most timeouts.drain, and exit 0.
.SH EXIT STATUS
0 on success, 1 on a runtime error, 2 on a usage error.
.SH SEE ALSO
.BR systemctl (1),
.BR journalctl (1),
.BR systemd.exec (5)
`)
	return b.Bytes()
}

// preformatted writes lines as they are, in a no-fill block.
func preformatted(b *bytes.Buffer, lines []string) {
	b.WriteString(".PP\n.nf\n")
	for _, l := range lines {
		if l == "" {
			b.WriteString(".sp\n")
			continue
		}
		b.WriteString(escape(l) + "\n")
	}
	b.WriteString(".fi\n")
}

// escape makes text safe in roff: backslashes are written \e, hyphens \-
// (so that a copied command keeps its ASCII minus), and a line that starts
// with a control character (. or ') is guarded with \&.
func escape(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

// quote writes a macro argument in double quotes (a literal quote is "").
func quote(s string) string {
	return `"` + strings.ReplaceAll(escape(s), `"`, `""`) + `"`
}

// gzipped compresses the page with no name and no time in its header.
func gzipped(page []byte) ([]byte, error) {
	var b bytes.Buffer
	zw, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(page); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

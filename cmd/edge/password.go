package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"

	"github.com/maatproxy/maat/cmd/edge/internal/ops"
)

func hashPasswordCommand() *command {
	return &command{
		name: "hash-password", args: "[USER]", maxArgs: 1, summary: "Hash a password with bcrypt for basic_auth.users",
		doc: `Reads a password and prints its bcrypt hash, or, with USER, the line to
paste under basic_auth.users. On a terminal it asks twice and turns echo off
with stty while you type (if stty is missing it says so, and your typing
shows); otherwise it reads the first line of standard input:

    printf '%s\n' "$PASSWORD" | edge hash-password alice`,
		flags: func(*flag.FlagSet) func(context.Context, stdio, []string) error {
			return func(ctx context.Context, s stdio, args []string) error {
				pw, err := readPassword(ctx, s)
				if err != nil {
					return err
				}
				hash, err := ops.HashPassword(pw)
				if err != nil {
					return err
				}
				if len(args) == 1 {
					if args[0] == "" || strings.ContainsAny(args[0], ":\n") {
						return usageError("hash-password", "bad user name %q", args[0])
					}
					fmt.Fprintf(s.out, "%s: '%s'\n", args[0], hash)
					return nil
				}
				fmt.Fprintln(s.out, hash)
				return nil
			}
		},
	}
}

// readPassword reads the password: from the terminal, twice and without
// echo, when standard input is one; else the first line of standard input.
func readPassword(ctx context.Context, s stdio) ([]byte, error) {
	f, ok := s.in.(*os.File)
	if !ok || !isTerminal(f) {
		return readLine(s.in)
	}
	restore := noEcho(ctx, f, s.err)
	defer restore()
	// Ctrl-C while echo is off: turn it back on before dying.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	defer signal.Stop(sig)
	type answer struct {
		b   []byte
		err error
	}
	in := bufio.NewReader(f)
	ask := func(prompt string) ([]byte, error) {
		fmt.Fprint(s.err, prompt)
		ch := make(chan answer, 1)
		go func() { b, err := readLine(in); ch <- answer{b, err} }()
		select {
		case a := <-ch:
			fmt.Fprintln(s.err)
			return a.b, a.err
		case <-sig:
			restore()
			fmt.Fprintln(s.err)
			return nil, errors.New("interrupted")
		}
	}
	first, err := ask("Password: ")
	if err != nil {
		return nil, err
	}
	again, err := ask("Again: ")
	if err != nil {
		return nil, err
	}
	if string(first) != string(again) {
		return nil, errors.New("the passwords differ")
	}
	return first, nil
}

// readLine reads one line (at most 4 KiB) without its line end.
func readLine(r io.Reader) ([]byte, error) {
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, 4096)
	}
	line, err := br.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		return nil, errors.New("password line longer than 4 KiB")
	case err != nil && !errors.Is(err, io.EOF):
		return nil, fmt.Errorf("read password: %w", err)
	case err != nil && len(line) == 0:
		return nil, errors.New("no password on standard input")
	}
	return []byte(strings.TrimRight(string(line), "\r\n")), nil
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// noEcho turns the terminal's echo off with stty, and returns what turns
// it on again (once). Without stty it says the typing will show.
func noEcho(ctx context.Context, tty *os.File, stderr io.Writer) func() {
	stty := func(arg string) error {
		c := exec.CommandContext(ctx, "stty", arg)
		c.Stdin = tty
		return c.Run()
	}
	if err := stty("-echo"); err != nil {
		fmt.Fprintln(stderr, "edge: warning: cannot turn echo off (stty: "+err.Error()+"): your typing will show")
		return func() {}
	}
	done := false
	return func() {
		if !done {
			done = true
			_ = stty("echo")
		}
	}
}

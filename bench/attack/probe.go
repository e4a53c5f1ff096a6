package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/maatproxy/maat/internal/testattack"
)

// The honest client runs in a process of its own (this program, as
// "attack probe"): in the attackers' process, two thousand QUIC clients'
// goroutines delayed its requests in that process's own scheduler, and the
// table blamed the edge for it.

// probeMain is "attack probe": the honest client against -https (and -h3),
// trusting -ca (or anything, when it is ""), until its stdin closes; then it
// writes what it saw as JSON on stdout.
func probeMain(args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	https := fs.String("https", "", "host:port of the edge's TCP listener")
	h3 := fs.String("h3", "", "host:port of its UDP listener, \"\" for none")
	ca := fs.String("ca", "", "PEM file of the CA that signed the edge's certificate")
	host := fs.String("host", "localhost", "the site's host name")
	every := fs.Duration("every", 40*time.Millisecond, "interval between requests")
	if err := fs.Parse(args); err != nil {
		return err
	}
	conf := &tls.Config{ServerName: *host, InsecureSkipVerify: *ca == ""}
	if *ca != "" {
		pem, err := os.ReadFile(*ca)
		if err != nil {
			return err
		}
		conf.RootCAs = x509.NewCertPool()
		if !conf.RootCAs.AppendCertsFromPEM(pem) {
			return fmt.Errorf("%s: no certificate", *ca)
		}
	}
	p := testattack.StartProber(testattack.Target{HTTPS: *https, HTTP3: *h3, TLS: conf, Host: *host}, *every)
	_, _ = io.Copy(io.Discard, stdin) // until the parent closes it (or exits)
	return json.NewEncoder(stdout).Encode(p.Stop())
}

// probeProc is the honest client's process.
type probeProc struct{ *child }

// startProbe starts the honest client's process against e.
func (e *edgeProc) startProbe(every time.Duration) (*probeProc, error) {
	ca := filepath.Join(e.dir, "cache", "maat-local-ca.pem")
	if e.tls.InsecureSkipVerify {
		ca = ""
	}
	c, err := startChild("probe", "-https", e.https, "-h3", e.https, "-ca", ca,
		"-host", "localhost", "-every", every.String())
	if err != nil {
		return nil, err
	}
	return &probeProc{c}, nil
}

// Stop ends the honest client and returns what it saw.
func (p *probeProc) Stop() (testattack.Latency, error) {
	var l testattack.Latency
	out, err := p.stop()
	if err != nil {
		return l, fmt.Errorf("the honest client: %w", err)
	}
	if err := json.Unmarshal(out, &l); err != nil {
		return l, fmt.Errorf("the honest client's report %q: %w", out, err)
	}
	return l, nil
}

// child is this program run as one of its subcommands, in a process of
// its own, until its stdin closes.
type child struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader // its stdout
}

// startChild starts this program with args.
func startChild(args ...string) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	c := &child{cmd: exec.Command(self, args...)}
	c.cmd.Stderr = os.Stderr
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	c.out = bufio.NewReader(out)
	if c.in, err = c.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		return nil, err
	}
	return c, nil
}

// stop closes the child's stdin, which ends it, and returns the rest of
// what it wrote on stdout.
func (c *child) stop() ([]byte, error) {
	c.in.Close()
	out, rerr := io.ReadAll(c.out)
	return out, errors.Join(c.cmd.Wait(), rerr)
}

package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
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
type probeProc struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out bytes.Buffer
}

// startProbe starts the honest client's process against e.
func (e *edgeProc) startProbe(every time.Duration) (*probeProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	ca := filepath.Join(e.dir, "cache", "maat-local-ca.pem")
	if e.tls.InsecureSkipVerify {
		ca = ""
	}
	p := &probeProc{cmd: exec.Command(self, "probe", "-https", e.https, "-h3", e.https, "-ca", ca,
		"-host", "localhost", "-every", every.String())}
	p.cmd.Stdout, p.cmd.Stderr = &p.out, os.Stderr
	if p.in, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	return p, nil
}

// Stop ends the honest client and returns what it saw.
func (p *probeProc) Stop() (testattack.Latency, error) {
	p.in.Close()
	var l testattack.Latency
	if err := p.cmd.Wait(); err != nil {
		return l, fmt.Errorf("the honest client: %w", err)
	}
	if err := json.Unmarshal(p.out.Bytes(), &l); err != nil {
		return l, fmt.Errorf("the honest client's report %q: %w", p.out.Bytes(), err)
	}
	return l, nil
}

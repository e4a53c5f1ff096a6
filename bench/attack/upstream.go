package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/maatproxy/maat/internal/testattack"
)

// The site's upstream runs in a process of its own too (this program, as
// "attack upstream"): it answers the honest client's requests, and in the
// attackers' process their goroutines delayed those answers.

// upstreamMain is "attack upstream": a testattack.Upstream whose large
// answer is -big bytes, with its StatsHandler on a second port. It writes
// "URL STATS-URL" on a line of stdout and serves until its stdin closes.
func upstreamMain(args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("upstream", flag.ContinueOnError)
	big := fs.Int64("big", 50<<20, "size of the large answer, bytes")
	if err := fs.Parse(args); err != nil {
		return err
	}
	up, err := testattack.NewUpstream(*big)
	if err != nil {
		return err
	}
	defer up.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	stats := &http.Server{Handler: up.StatsHandler()}
	go func() { _ = stats.Serve(ln) }() // ends with stats.Close
	defer stats.Close()
	fmt.Fprintf(stdout, "%s http://%s/\n", up.URL, ln.Addr())
	_, _ = io.Copy(io.Discard, stdin)
	return nil
}

// upstreamProc is the upstream's process.
type upstreamProc struct {
	*child
	*testattack.Upstream
}

// startUpstream starts the upstream's process, whose large answer is big
// bytes.
func startUpstream(big int64) (*upstreamProc, error) {
	c, err := startChild("upstream", "-big", fmt.Sprint(big))
	if err != nil {
		return nil, err
	}
	p := &upstreamProc{child: c}
	line, err := c.out.ReadString('\n')
	url, stats, ok := strings.Cut(strings.TrimSpace(line), " ")
	if err != nil || !ok {
		p.Close()
		return nil, errors.Join(fmt.Errorf("the upstream's process said %q", line), err)
	}
	p.Upstream = testattack.RemoteUpstream(url, stats, big)
	return p, nil
}

// Close ends the upstream's process.
func (p *upstreamProc) Close() error {
	_, err := p.stop()
	return err
}

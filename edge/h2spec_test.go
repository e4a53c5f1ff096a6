package edge

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/maatproxy/maat/edge/config"
	"github.com/maatproxy/maat/internal/testenv"
	"golang.org/x/net/http2"
)

// h2specKnown are the h2spec cases that x/net's HTTP/2 server fails by
// itself, each with the upstream issue that records why. TestH2Spec checks
// that each still fails against a plain http2.Server too, and that each
// still fails at all (an x/net that passes one should drop it from here).
var h2specKnown = map[string]string{
	// (http2/4.2/3, a ~20 KB HEADERS frame, fails against x/net's
	// default SETTINGS_MAX_FRAME_SIZE of 1 MiB, a bug of the case:
	// https://github.com/summerwind/h2spec/issues/102. The edge reads
	// frames of at most 16 KiB, and passes it.)
	// x/net hangs up (GOAWAY PROTOCOL_ERROR) on a SETTINGS frame that
	// repeats a parameter, instead of applying the values in order.
	"http2/6.5.3/1": "https://github.com/golang/go/issues/56760",
	// x/net answers a request with connection-specific fields
	// (Connection, Keep-Alive, …) or "TE: gzip" with 400, not with a
	// stream error of type PROTOCOL_ERROR.
	"http2/8.1.2.2/1": "https://github.com/golang/go/issues/26321",
	"http2/8.1.2.2/2": "https://github.com/golang/go/issues/26321",
}

// h2specCases is the number of cases h2spec v2.2.1 runs without its
// strict ones (-S): a run that reports fewer was cut short.
const h2specCases = 145

// h2specTimeout is how long h2spec waits for each answer. x/net closes a
// connection one second after a GOAWAY with an error (goAwayTimeout), and
// the cases that expect the close must outwait it on a busy machine.
const h2specTimeout = "3"

// TestH2Spec runs h2spec, the HTTP/2 conformance suite (its generic group,
// RFC 7540/9113 and RFC 7541 HPACK), against an edge over TLS on loopback,
// and against a plain x/net http2.Server beside it: a case the edge fails
// is ours unless the plain server fails it too and h2specKnown names its
// upstream issue. The edge's HTTP/2 path is x/net's server behind the
// httpfp frame tap, the limits and the handler, so this is the check that
// the tap and what follows it keep the server conformant.
//
// h2spec is a Go tool of the module (go.mod's tool line), run as its own
// process: it prints to stdout, calls os.Exit when it cannot connect, and
// keeps its output state in package variables, none of which a test
// process should share.

func TestH2Spec(t *testing.T) {
	t.Parallel()
	h2spec(t)
}

func h2spec(t *testing.T) {
	bin := h2specBinary(t)

	up := httptest.NewServer(http.HandlerFunc(h2specAnswer))
	t.Cleanup(up.Close)
	pol := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(pol, []byte("bots:\n  - {name: everyone, path_regex: ., action: ALLOW}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("test.yaml", []byte(edgeConfigText("", "policy: "+pol+"\nsites: [{hosts: [127.0.0.1], upstream: "+up.URL+"}]\n")))
	if err != nil {
		t.Fatal(err)
	}
	e := startEdgeConfig(t, cfg, io.Discard)
	plain := plainH2Server(t)

	// Both run at once: each case mostly waits on its timeout, not the CPU.
	type run struct {
		cases []h2specCase
		err   error
	}
	edgeDone, plainDone := make(chan run, 1), make(chan run, 1)
	go func() { c, err := runH2Spec(t, bin, e.Addrs().HTTPS); edgeDone <- run{c, err} }()
	go func() { c, err := runH2Spec(t, bin, plain); plainDone <- run{c, err} }()
	edgeRun, plainRun := <-edgeDone, <-plainDone
	if edgeRun.err != nil {
		t.Fatalf("h2spec against the edge: %v", edgeRun.err)
	}
	if plainRun.err != nil {
		t.Fatalf("h2spec against x/net's server: %v", plainRun.err)
	}

	plainFailed := map[string]bool{}
	for _, c := range plainRun.cases {
		if c.failed() {
			plainFailed[c.id] = true
		}
	}
	passed, known := 0, 0
	for _, c := range edgeRun.cases {
		issue, listed := h2specKnown[c.id]
		switch {
		case c.skipped:
			t.Errorf("%s %s: skipped against the edge: h2spec found no way to run it", c.id, c.desc)
		case !c.failed():
			passed++
			if listed {
				t.Errorf("%s %s: passes against the edge now; remove it from h2specKnown (%s)", c.id, c.desc, issue)
			}
		case listed && plainFailed[c.id]:
			known++
			t.Logf("known x/net failure %s %s (%s)", c.id, c.desc, issue)
		case plainFailed[c.id]:
			t.Errorf("%s %s: fails, and against a plain x/net server too; if x/net means it, add its upstream issue to h2specKnown\n%s",
				c.id, c.desc, c.detail)
		default:
			t.Errorf("%s %s: fails against the edge only\n%s", c.id, c.desc, c.detail)
		}
	}
	t.Logf("h2spec against the edge: %d cases, %d passed, %d known x/net failures; against x/net alone: %d failed",
		len(edgeRun.cases), passed, known, len(plainFailed))
	if len(edgeRun.cases) != h2specCases || len(plainRun.cases) != h2specCases {
		t.Errorf("h2spec ran %d cases against the edge and %d against x/net alone; want %d each",
			len(edgeRun.cases), len(plainRun.cases), h2specCases)
	}
}

// h2specAnswer is the upstream behind the edge and the handler of the plain
// server: it reads the request body and answers a short text, long enough
// for h2spec's flow-control cases (which skip a server whose answer to GET /
// has fewer than 5 bytes of body).
func h2specAnswer(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "text/plain")
	_, _ = io.WriteString(w, "h2spec's answer\n")
}

// h2specBinary builds h2spec (go.mod's tool line), once per build cache,
// and returns its path.
func h2specBinary(t *testing.T) string {
	t.Helper()
	goCmd := testenv.NeedCommand(t, "go")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, goCmd, "tool", "-n", "h2spec").Output()
	if err != nil {
		var stderr []byte
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		t.Fatalf("go tool -n h2spec: %v\n%s", err, stderr)
	}
	return strings.TrimSpace(string(out))
}

// plainH2Server starts net/http's HTTP/2 server alone, behind TLS on
// loopback, and returns its address.
func plainH2Server(t *testing.T) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(h2specAnswer))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the connection errors h2spec provokes on purpose
	// x/net's server, as the edge's (server.go says why it is not Go
	// 1.26's net/http one).
	//lint:ignore SA1019 the same server as the edge's on purpose
	if err := http2.ConfigureServer(srv.Config, &http2.Server{}); err != nil {
		t.Fatal(err)
	}
	srv.TLS = srv.Config.TLSConfig
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// h2specCase is one case of an h2spec run.
type h2specCase struct {
	id      string // "http2/6.9.1/2": group, section, sequence, as h2spec numbers them
	desc    string
	detail  string // what h2spec expected and saw, when it failed
	skipped bool   // h2spec could not set the case up against this server
}

func (c h2specCase) failed() bool { return c.detail != "" }

// runH2Spec runs the whole h2spec suite against addr over TLS and returns
// its cases from the JUnit report it writes.
func runH2Spec(t *testing.T, bin, addr string) ([]h2specCase, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	report := filepath.Join(t.TempDir(), "report.xml")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--tls", "--insecure", "--host", host, "--port", port,
		"--timeout", h2specTimeout, "--junit-report", report)
	out, err := cmd.CombinedOutput()
	// h2spec exits 1 when a case fails and when it cannot connect at all;
	// only the first writes the report.
	body, rerr := os.ReadFile(report)
	if rerr != nil {
		return nil, fmt.Errorf("no report (%v, exit: %v):\n%s", rerr, err, out)
	}
	cases, perr := parseH2SpecReport(body)
	if perr != nil {
		return nil, fmt.Errorf("%w; h2spec said:\n%s", perr, out)
	}
	if slices.ContainsFunc(cases, h2specCase.failed) != (err != nil) {
		return nil, fmt.Errorf("exit %v disagrees with the report:\n%s", err, out)
	}
	return cases, nil
}

// parseH2SpecReport reads h2spec's JUnit report: one testsuite per
// section, whose testcases are in h2spec's order (the sequence number).
// h2spec writes what it expected and saw into <failure> and <error>
// unescaped (reporter.JUnitFailure's Content is innerxml), and what it saw
// may hold a frame's raw bytes (a PING's opaque data, NUL included): that
// text is escaped first.
func parseH2SpecReport(b []byte) ([]h2specCase, error) {
	b = escapeElementText(b, "failure")
	b = escapeElementText(b, "error")
	var rep struct {
		Suites []struct {
			Package string `xml:"package,attr"`
			Cases   []struct {
				Class   string  `xml:"classname,attr"`
				Failure *string `xml:"failure"`
				Error   *string `xml:"error"`
				Skipped *string `xml:"skipped"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("h2spec report: %w", err)
	}
	var cases []h2specCase
	for _, s := range rep.Suites {
		for i, c := range s.Cases {
			hc := h2specCase{id: s.Package + "/" + strconv.Itoa(i+1), desc: c.Class}
			switch {
			case c.Failure != nil:
				hc.detail = strings.TrimSpace(*c.Failure)
			case c.Error != nil:
				hc.detail = strings.TrimSpace(*c.Error)
			case c.Skipped != nil:
				hc.skipped = true
			}
			cases = append(cases, hc)
		}
	}
	return cases, nil
}

// escapeElementText escapes, as XML character data, the text of every
// <name>…</name> element of b (the first closing tag ends it), with the
// characters XML cannot hold replaced by U+FFFD.
func escapeElementText(b []byte, name string) []byte {
	open, end := []byte("<"+name+">"), []byte("</"+name+">")
	var out bytes.Buffer
	for {
		i := bytes.Index(b, open)
		if i < 0 {
			break
		}
		j := bytes.Index(b[i+len(open):], end)
		if j < 0 {
			break
		}
		text := b[i+len(open) : i+len(open)+j]
		out.Write(b[:i+len(open)])
		_ = xml.EscapeText(&out, text) // a bytes.Buffer does not fail
		out.Write(end)
		b = b[i+len(open)+j+len(end):]
	}
	out.Write(b)
	return out.Bytes()
}

func TestParseH2SpecReport(t *testing.T) {
	t.Parallel()
	// Reports as h2spec v2.2.1 writes them (reporter/junit_report.go): the
	// text of <error> is written as is.
	for _, tt := range []struct {
		name, report string
		want         []h2specCase
	}{
		{"pass, skip, then the next section",
			`<testsuites><testsuite package="http2/6.9.2">` +
				`<testcase package="http2/6.9.2" classname="Changes SETTINGS_INITIAL_WINDOW_SIZE"></testcase>` +
				`<testcase package="http2/6.9.2" classname="negative &amp; window"><skipped></skipped></testcase>` +
				`</testsuite><testsuite package="hpack/2.3.3"><testcase package="hpack/2.3.3" classname="index"></testcase></testsuite></testsuites>`,
			[]h2specCase{
				{id: "http2/6.9.2/1", desc: "Changes SETTINGS_INITIAL_WINDOW_SIZE"},
				{id: "http2/6.9.2/2", desc: "negative & window", skipped: true},
				{id: "hpack/2.3.3/1", desc: "index"},
			}},
		{"raw frame bytes in what h2spec saw",
			"<testsuites><testsuite package=\"http2/6.7\"><testcase package=\"http2/6.7\" classname=\"Sends a PING frame\">" +
				"<error>PING Frame (length:8, flags:0x01, stream_id:0, opaque_data:\x00<a&\x01b)\nConnection closed</error>" +
				"</testcase></testsuite></testsuites>",
			[]h2specCase{{id: "http2/6.7/1", desc: "Sends a PING frame",
				detail: "PING Frame (length:8, flags:0x01, stream_id:0, opaque_data:\uFFFD<a&\uFFFDb)\nConnection closed"}}},
		{"a failure element",
			`<testsuites><testsuite package="generic/3.1"><testcase package="generic/3.1" classname="DATA">` +
				`<failure>Expect:\nDATA Frame</failure></testcase></testsuite></testsuites>`,
			[]h2specCase{{id: "generic/3.1/1", desc: "DATA", detail: `Expect:\nDATA Frame`}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseH2SpecReport([]byte(xml.Header + tt.report))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

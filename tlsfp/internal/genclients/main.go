// Command genclients generates tlsfp's table of known clients
// (clients_table.go): JA4 fingerprint → client family, versions and
// provenance. Run it with `go generate ./tlsfp`.
//
// Rows come from three kinds of source:
//   - utls's browser parrots, whose ClientHellos are built in process and
//     fingerprinted many times (Chrome varies its padding and GREASE ECH, so
//     one parrot may give more than one JA4);
//   - the real clients installed on the machine (curl, wget, openssl
//     s_client, gnutls-cli, python3, node, java, chromium --headless and Go's
//     net/http), each run against a capture server on 127.0.0.1 behind
//     tlsfp.NewListener; a missing program is reported and skipped;
//   - the capture of internal/testcapture's HTTP clients that httpfp's
//     generator keeps (httpfp/testdata/clients.jsonl: Chromium over HTTP/2
//     and HTTP/1.1, Firefox ESR, curl, git, Node's http2, https and fetch,
//     Python's urllib and requests, Java's HttpClient over HTTP/2 and
//     HTTP/1.1, Go's net/http with and without ALPN and x/net/http2, each
//     at every version captured), whose HTTP/2 fingerprints make httpfp's
//     table: run `go generate ./httpfp` first;
//   - packet captures of real clients in testdata/tls-clienthellos.jsonl
//     (FoxIO's, ../shared/ja4), for the few whose client is known: see
//     captures.
//
// The output is sorted and carries no timestamps, so the same machine and
// module versions produce the same file. When several sources give the same
// JA4, the row names the family that comes first in familyOrder, the
// versions of that family, and every source.
package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/format"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/maatproxy/maat/internal/testcapture"
	"github.com/maatproxy/maat/internal/testclient"
	"github.com/maatproxy/maat/tlsfp"
)

// familyOrder decides which family names a JA4 that several sources share:
// browsers before the libraries they are built on.
var familyOrder = []string{
	"chrome", "edge", "firefox", "safari", "ios", "android",
	"curl", "git", "wget", "python", "node", "java", "go", "gnutls", "openssl",
}

// sample is one fingerprint seen from one source.
type sample struct {
	ja4, family, version, source string
}

func main() {
	out := flag.String("o", "clients_table.go", "output file")
	samples := flag.Int("samples", 64, "hellos built per utls parrot")
	httpCapture := flag.String("http-capture", "../httpfp/testdata/clients.jsonl", "httpfp's capture of the HTTP clients")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("genclients: ")

	rows, err := parrots(*samples)
	if err != nil {
		log.Fatal(err)
	}
	real, err := realClients()
	if err != nil {
		log.Fatal(err)
	}
	rows = append(rows, real...)
	http, err := httpClients(*httpCapture)
	if err != nil {
		log.Fatal(err)
	}
	rows = append(rows, http...)
	caps, err := captured("testdata/tls-clienthellos.jsonl")
	if err != nil {
		log.Fatal(err)
	}
	rows = append(rows, caps...)
	src, err := render(merge(rows))
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(*out, src, 0o644); err != nil {
		log.Fatal(err)
	}
}

// utlsVersion is the version of utls this command was built with.
func utlsVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/refraction-networking/utls" {
				return d.Version
			}
		}
	}
	return "(unknown version)"
}

// parrots fingerprints the utls browser parrots.
func parrots(n int) ([]sample, error) {
	uv := utlsVersion()
	var out []sample
	for _, p := range testclient.Parrots() {
		seen := map[string]bool{}
		for range n {
			msg, err := testclient.HelloMessage(p.ID, "www.example.org")
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p.Name, err)
			}
			h, err := tlsfp.ParseHandshake(msg)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p.Name, err)
			}
			ja4 := h.Fingerprint(false).JA4
			if !seen[ja4] {
				seen[ja4] = true
				out = append(out, sample{ja4, p.Family, p.Version, "utls " + uv + " " + p.Name})
			}
		}
	}
	return out, nil
}

// program is a real client run against the capture server.
type program struct {
	family  string
	name    string   // executable
	version []string // arguments printing the version
	run     func(url, dir string) []string
}

func programs() []program {
	return []program{
		{"curl", "curl", []string{"--version"}, func(url, _ string) []string {
			return []string{"-sk", "-o", "/dev/null", url}
		}},
		{"wget", "wget", []string{"--version"}, func(url, _ string) []string {
			return []string{"-q", "-O", "/dev/null", "--no-check-certificate", url}
		}},
		{"openssl", "openssl", []string{"version"}, func(url, _ string) []string {
			host := strings.TrimSuffix(strings.TrimPrefix(url, "https://"), "/")
			if strings.HasPrefix(host, "127.") {
				return []string{"s_client", "-connect", host, "-noservername"}
			}
			// s_client sends no SNI for a name without a dot unless told.
			return []string{"s_client", "-connect", host, "-servername", "localhost"}
		}},
		{"gnutls", "gnutls-cli", []string{"--version"}, func(url, _ string) []string {
			host, port, _ := net.SplitHostPort(strings.TrimSuffix(strings.TrimPrefix(url, "https://"), "/"))
			return []string{"--insecure", "-p", port, host}
		}},
		{"python", "python3", []string{"--version"}, func(url, _ string) []string {
			return []string{"-c", "import ssl, urllib.request\n" +
				"ctx = ssl.create_default_context()\nctx.check_hostname = False\nctx.verify_mode = ssl.CERT_NONE\n" +
				"urllib.request.urlopen('" + url + "', context=ctx).read()"}
		}},
		{"node", "node", []string{"--version"}, func(url, _ string) []string {
			return []string{"-e", "require('https').get('" + url + "', {rejectUnauthorized: false}, r => { r.resume(); r.on('end', () => process.exit(0)) })" +
				".on('error', e => { console.error(e); process.exit(1) })"}
		}},
		{"java", "java", []string{"-version"}, func(url, dir string) []string {
			src := filepath.Join(dir, "Get.java")
			os.WriteFile(src, []byte(testcapture.JavaGet), 0o644)
			return []string{src, url, "HTTP_2"} // HttpClient's default
		}},
		{"chrome", "chromium", []string{"--version"}, func(url, dir string) []string {
			return []string{"--headless", "--no-sandbox", "--disable-gpu", "--ignore-certificate-errors",
				"--user-data-dir=" + dir, "--dump-dom", url}
		}},
	}
}

// capture is an HTTPS server on loopback that records the fingerprint of
// every connection.
type capture struct {
	urls []string // by host name (SNI sent) and by address (no SNI)
	srv  *http.Server

	mu   sync.Mutex
	open int // connections not yet closed
	fps  map[net.Conn]*tlsfp.Fingerprint
}

func newCapture() (*capture, error) {
	conf, err := testclient.ServerConfig()
	if err != nil {
		return nil, err
	}
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := tcp.Addr().(*net.TCPAddr).Port
	c := &capture{
		urls: []string{fmt.Sprintf("https://localhost:%d/", port), fmt.Sprintf("https://127.0.0.1:%d/", port)},
		fps:  map[net.Conn]*tlsfp.Fingerprint{},
	}
	c.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			io.WriteString(w, "<html><body>ok</body></html>\n")
		}),
		ConnState: func(conn net.Conn, s http.ConnState) {
			c.mu.Lock()
			defer c.mu.Unlock()
			switch s {
			case http.StateNew:
				c.open++
				return
			case http.StateClosed, http.StateHijacked:
				c.open--
			}
			if fp := tlsfp.ConnOf(conn).Fingerprint(); fp != nil {
				c.fps[conn] = fp
			}
		},
		ErrorLog: log.New(io.Discard, "", 0),
	}
	conf.NextProtos = []string{"h2", "http/1.1"}
	go c.srv.Serve(tls.NewListener(tlsfp.NewListener(tcp, tlsfp.Config{}), conf))
	// localhost may resolve to ::1 first; serve it there too if we can.
	if tcp6, err := net.Listen("tcp", fmt.Sprintf("[::1]:%d", port)); err == nil {
		go c.srv.Serve(tls.NewListener(tlsfp.NewListener(tcp6, tlsfp.Config{}), conf))
	}
	return c, nil
}

// take returns the distinct JA4s seen since the last call, once every
// connection has closed (or after ten seconds), so that a late connection is
// not counted for the next program.
func (c *capture) take() []string {
	var out []string
	for range 200 {
		c.mu.Lock()
		done := c.open == 0
		c.mu.Unlock()
		if done {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, fp := range c.fps {
		if !slices.Contains(out, fp.JA4) {
			out = append(out, fp.JA4)
		}
	}
	clear(c.fps)
	slices.Sort(out)
	return out
}

// realClients runs each installed program against the capture server.
func realClients() ([]sample, error) {
	c, err := newCapture()
	if err != nil {
		return nil, err
	}
	defer c.srv.Close()
	osName := osRelease()
	var out []sample
	for _, p := range programs() {
		path, err := exec.LookPath(p.name)
		if err != nil {
			log.Printf("skipping %s: not installed", p.name)
			continue
		}
		version, banner := programVersion(path, p)
		for _, url := range c.urls {
			if err := runProgram(path, p, url); err != nil {
				log.Printf("%s %s: %v (fingerprint kept if seen)", p.name, url, err)
			}
			ja4s := c.take()
			if len(ja4s) == 0 {
				log.Printf("%s %s: no ClientHello seen", p.name, url)
			}
			for _, ja4 := range ja4s {
				out = append(out, sample{ja4, p.family, version, banner + ", " + osName})
			}
		}
	}
	// Go's own net/http client, in process; and with a
	// ClientSessionCache, whose full handshakes offer session_ticket and
	// psk_key_exchange_modes besides (a resumed hello adds pre_shared_key,
	// which tlsfp leaves out of JA4Session), over HTTP/2 and over HTTP/1.1
	// named by ALPN.
	gv := strings.TrimPrefix(runtime.Version(), "go")
	for _, v := range []struct {
		source string
		conf   *tls.Config
		h2     bool
	}{
		{"", &tls.Config{InsecureSkipVerify: true}, true},
		{" ClientSessionCache", &tls.Config{InsecureSkipVerify: true}, true},
		{" ClientSessionCache NextProtos http/1.1", &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}}, false},
	} {
		for _, url := range c.urls {
			conf := v.conf.Clone()
			if v.source != "" {
				conf.ClientSessionCache = tls.NewLRUClientSessionCache(1) // new each time: a full handshake
			}
			client := &http.Client{Transport: &http.Transport{TLSClientConfig: conf, ForceAttemptHTTP2: v.h2}, Timeout: 10 * time.Second}
			resp, err := client.Get(url)
			if err != nil {
				return nil, fmt.Errorf("go client: %w", err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			client.CloseIdleConnections()
			for _, ja4 := range c.take() {
				out = append(out, sample{ja4, "go", gv, "Go " + gv + " net/http" + v.source})
			}
		}
	}
	return out, nil
}

// httpClients reads the capture of internal/testcapture's HTTP clients
// that httpfp's generator wrote (run it first: `go generate ./httpfp`),
// so that both tables know the same clients at the same versions, those
// captured on other machines included.
func httpClients(file string) ([]sample, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%w (go generate ./httpfp writes it)", err)
	}
	var out []sample
	for line := range strings.Lines(string(b)) {
		var r testcapture.Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		out = append(out, sample{r.JA4, r.Family, r.Version, r.Source})
	}
	return out, nil
}

// captures are the packet captures of testdata/tls-clienthellos.jsonl
// whose client is known, with the reason it is known.
// A version is given only where the capture tells it.
var captures = []struct {
	pcap                    string
	frame                   int
	family, version, reason string
}{
	{"chrome-cloudflare-quic-with-secrets.pcapng", 4, "chrome", "", "Chrome, named by the capture"},
	{"macos_tcp_flags.pcap", 4, "ios", "", "Apple's TLS stack on macOS, Safari's and every app's that uses it"},
	{"tls12.pcap", 1, "firefox", "", "Firefox: only it asks contile.services.mozilla.com"},
}

// captured returns the samples of the known captures in file.
func captured(file string) ([]sample, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var out []sample
	for line := range strings.Lines(string(b)) {
		var v struct {
			PCAP     string `json:"pcap"`
			Frame    int    `json:"frame"`
			Expected struct {
				JA4 string `json:"ja4"`
			} `json:"expected"`
		}
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		for _, c := range captures {
			if c.pcap == v.PCAP && c.frame == v.Frame {
				out = append(out, sample{v.Expected.JA4, c.family, c.version, "capture " + c.pcap + " (FoxIO JA4+): " + c.reason})
			}
		}
	}
	if len(out) != len(captures) {
		return nil, fmt.Errorf("%s: %d of %d known captures found", file, len(out), len(captures))
	}
	return out, nil
}

// runProgram runs p against url in a fresh temporary directory.
func runProgram(path string, p program, url string) error {
	dir, err := os.MkdirTemp("", "genclients")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, p.run(url, dir)...)
	cmd.Stdin = strings.NewReader("")
	if b, err := cmd.CombinedOutput(); err != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w\n%s", err, lastLines(b, 3))
	}
	return nil
}

// programVersion returns a program's version number and its banner.
func programVersion(path string, p program) (version, banner string) {
	// The version is on stdout, or on stderr for java.
	var line string
	b, _ := exec.Command(path, p.version...).Output()
	if len(b) == 0 {
		b, _ = exec.Command(path, p.version...).CombinedOutput()
	}
	line, _, _ = strings.Cut(strings.TrimSpace(string(b)), "\n")
	for f := range strings.FieldsSeq(line) {
		f = strings.Trim(f, `"v`)
		if f != "" && f[0] >= '0' && f[0] <= '9' && strings.Contains(f, ".") {
			version = f
			break
		}
	}
	banner = p.name + " " + version
	if p.family == "curl" { // name the TLS library too
		for f := range strings.FieldsSeq(line) {
			if strings.HasPrefix(f, "OpenSSL/") || strings.HasPrefix(f, "GnuTLS/") {
				banner += " " + f
			}
		}
	}
	if p.family == "chrome" {
		banner += " --headless"
	}
	return version, banner
}

func osRelease() string {
	b, err := os.ReadFile("/etc/os-release")
	if err != nil {
		return runtime.GOOS
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "PRETTY_NAME="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return runtime.GOOS
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// merged is one row of the table.
type merged struct {
	ja4, family, versions string
	sources               []string
}

// merge groups the samples by JA4.
func merge(samples []sample) []merged {
	byJA4 := map[string][]sample{}
	for _, s := range samples {
		byJA4[s.ja4] = append(byJA4[s.ja4], s)
	}
	var out []merged
	for ja4, ss := range byJA4 {
		slices.SortStableFunc(ss, func(a, b sample) int {
			return cmp.Compare(slices.Index(familyOrder, a.family), slices.Index(familyOrder, b.family))
		})
		m := merged{ja4: ja4, family: ss[0].family}
		var versions []string
		for _, s := range ss {
			if !slices.Contains(m.sources, s.source) {
				m.sources = append(m.sources, s.source)
			}
			if s.family == m.family && s.version != "" && !slices.Contains(versions, s.version) {
				versions = append(versions, s.version)
			}
		}
		slices.SortFunc(versions, compareVersions)
		if len(versions) == 0 { // from captures that do not tell
			versions = []string{"unknown"}
		}
		m.versions = versions[0]
		if len(versions) > 1 {
			m.versions += "-" + versions[len(versions)-1]
		}
		slices.Sort(m.sources)
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b merged) int { return cmp.Compare(a.ja4, b.ja4) })
	return out
}

// compareVersions orders dotted version numbers numerically.
func compareVersions(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := range min(len(as), len(bs)) {
		x, _ := strconv.Atoi(as[i])
		y, _ := strconv.Atoi(bs[i])
		if c := cmp.Compare(x, y); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(as), len(bs))
}

func render(rows []merged) ([]byte, error) {
	var b strings.Builder
	b.WriteString("// Code generated by tlsfp/internal/genclients; DO NOT EDIT.\n\n")
	b.WriteString("package tlsfp\n\n")
	b.WriteString("// knownClients maps a JA4 fingerprint to the client that sends it. Read-only.\n")
	b.WriteString("// Sources: utls parrots (ClientHellos built in process), real clients run\n")
	b.WriteString("// against a capture listener on loopback, and packet captures of known\n")
	b.WriteString("// clients (testdata/tls-clienthellos.jsonl); Source names them per row.\n")
	b.WriteString("var knownClients = map[string]Client{\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "\t%q: {Family: %q, Versions: %q, Source: %q},\n", r.ja4, r.family, r.versions, strings.Join(r.sources, "; "))
	}
	b.WriteString("}\n")
	return format.Source([]byte(b.String()))
}

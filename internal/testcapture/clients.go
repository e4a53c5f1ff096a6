package testcapture

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"golang.org/x/net/http2"
)

// Client is a real HTTP client that Run drives against a Server.
type Client struct {
	// Name identifies the client and how it is run, e.g. "curl-h2".
	Name string
	// Family is the client family the known-client tables give it.
	Family string
	// Proto is the protocol it speaks to the server: "HTTP/2.0" or
	// "HTTP/1.1".
	Proto string
	// Program is the executable it runs; "" for Go clients run in process.
	Program string

	flags []string // shown in Source
	// lib names the library the program runs and the arguments that make
	// the program print its version ("requests", "-c", "import …"):
	// shown in Source after the program's version.
	lib []string
	run func(ctx context.Context, s *Server, dir string) error
}

// Installed reports whether the client's program is on this machine (Go's
// clients always are).
func (c Client) Installed() bool {
	if c.Program == "" {
		return true
	}
	_, err := exec.LookPath(c.Program)
	return err == nil
}

// Clients returns the real clients this package knows how to run.
func Clients() []Client {
	return []Client{
		{Name: "chromium-h2", Family: "chrome", Proto: "HTTP/2.0", Program: "chromium", flags: []string{"--headless"}, run: chromium(false)},
		{Name: "chromium-h1", Family: "chrome", Proto: "HTTP/1.1", Program: "chromium", flags: []string{"--headless", "--disable-http2"}, run: chromium(true)},
		{Name: "firefox-esr-h2", Family: "firefox", Proto: "HTTP/2.0", Program: "firefox-esr", flags: []string{"--headless"}, run: firefox},
		{Name: "curl-h2", Family: "curl", Proto: "HTTP/2.0", Program: "curl", flags: []string{"--http2"}, run: curl("--http2")},
		{Name: "curl-h1", Family: "curl", Proto: "HTTP/1.1", Program: "curl", flags: []string{"--http1.1"}, run: curl("--http1.1")},
		{Name: "node-h2", Family: "node", Proto: "HTTP/2.0", Program: "node", flags: []string{"http2.connect"}, run: nodeH2},
		{Name: "node-https", Family: "node", Proto: "HTTP/1.1", Program: "node", flags: []string{"https.get"}, run: nodeHTTPS},
		{Name: "node-fetch", Family: "node", Proto: "HTTP/1.1", Program: "node", flags: []string{"fetch"},
			lib: []string{"undici", "-p", "process.versions.undici"}, run: nodeFetch},
		// python3 on the PATH, and the system's (Debian's python3 and
		// python3-requests, which make deps installs), whose OpenSSL
		// settings differ when the PATH's is another build (pyenv's).
		{Name: "python-urllib", Family: "python", Proto: "HTTP/1.1", Program: "python3", flags: []string{"urllib.request"}, run: pythonURLLib("python3")},
		{Name: "python-requests", Family: "python", Proto: "HTTP/1.1", Program: "python3", lib: requestsVersion, run: pythonRequests("python3")},
		{Name: "python-urllib-system", Family: "python", Proto: "HTTP/1.1", Program: "/usr/bin/python3", flags: []string{"urllib.request"}, run: pythonURLLib("/usr/bin/python3")},
		{Name: "python-requests-system", Family: "python", Proto: "HTTP/1.1", Program: "/usr/bin/python3", lib: requestsVersion, run: pythonRequests("/usr/bin/python3")},
		{Name: "git", Family: "git", Proto: "HTTP/2.0", Program: "git", flags: []string{"ls-remote"}, run: gitLsRemote},
		{Name: "java-httpclient-h2", Family: "java", Proto: "HTTP/2.0", Program: "java", flags: []string{"java.net.http.HttpClient"}, run: javaHTTPClient("HTTP_2")},
		{Name: "java-httpclient-h1", Family: "java", Proto: "HTTP/1.1", Program: "java", flags: []string{"java.net.http.HttpClient", "HTTP_1_1"}, run: javaHTTPClient("HTTP_1_1")},
		{Name: "go-net-http-h2", Family: "go", Proto: "HTTP/2.0", flags: []string{"net/http"}, run: goNetHTTP(true)},
		{Name: "go-net-http-h1", Family: "go", Proto: "HTTP/1.1", flags: []string{"net/http", "HTTP/1.1"}, run: goNetHTTP(false)},
		{Name: "go-net-http-h1-alpn", Family: "go", Proto: "HTTP/1.1", flags: []string{"net/http", "HTTP/1.1", "NextProtos http/1.1"}, run: goNetHTTPH1ALPN},
		{Name: "go-x-net-http2", Family: "go", Proto: "HTTP/2.0", flags: []string{"golang.org/x/net/http2"}, run: goXNetHTTP2},
	}
}

// Lookup returns the client named name.
func Lookup(name string) (Client, bool) {
	for _, c := range Clients() {
		if c.Name == name {
			return c, true
		}
	}
	return Client{}, false
}

// version returns the client's version and its source line: program (or
// library), version, flags and the system.
func (c Client) version() (version, source string) {
	if c.Program == "" {
		version = strings.TrimPrefix(runtime.Version(), "go")
		source = "Go " + version + " " + strings.Join(c.flags, " ")
		if c.Name == "go-x-net-http2" {
			source = "Go " + version + " golang.org/x/net/http2 " + moduleVersion("golang.org/x/net")
		}
		return version, source
	}
	path, err := exec.LookPath(c.Program)
	if err != nil {
		return "", c.Program
	}
	out, _ := exec.Command(path, "--version").Output()
	version = firstVersion(string(out))
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	name := c.Program
	if c.Program == "curl" {
		for f := range strings.FieldsSeq(line) {
			if strings.HasPrefix(f, "OpenSSL/") || strings.HasPrefix(f, "GnuTLS/") || strings.HasPrefix(f, "nghttp2/") {
				name += " " + f
			}
		}
		name = strings.Replace(name, "curl", "curl "+version, 1)
	} else {
		name += " " + version
	}
	if len(c.lib) > 0 {
		out, _ := exec.Command(path, c.lib[1:]...).Output()
		name += " " + c.lib[0] + " " + strings.TrimSpace(string(out))
	}
	if len(c.flags) > 0 {
		name += " " + strings.Join(c.flags, " ")
	}
	return version, name + ", " + osRelease()
}

// firstVersion is the first dotted number of out's first line ("Python
// 3.11.7", "openjdk 17.0.15 2025-04-15", "v20.20.2").
func firstVersion(out string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(out), "\n")
	for f := range strings.FieldsSeq(line) {
		f = strings.Trim(f, `"v`)
		if f != "" && f[0] >= '0' && f[0] <= '9' && strings.Contains(f, ".") {
			return f
		}
	}
	return ""
}

// moduleVersion is the version of module path this program was built with.
func moduleVersion(path string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == path {
				return d.Version
			}
		}
	}
	return "(unknown version)"
}

// command runs a program, returning its output in the error when it fails.
func command(ctx context.Context, dir, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+dir)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		return fmt.Errorf("%s: %w\n%s", name, err, strings.Join(lines[max(0, len(lines)-5):], "\n"))
	}
	return nil
}

func chromium(h1 bool) func(ctx context.Context, s *Server, dir string) error {
	return func(ctx context.Context, s *Server, dir string) error {
		args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--ignore-certificate-errors",
			"--disable-background-networking", "--disable-component-update", "--disable-sync",
			"--user-data-dir=" + dir, "--dump-dom", s.URL}
		if h1 {
			args = append([]string{"--disable-http2"}, args...)
		}
		return command(ctx, dir, "chromium", args...)
	}
}

func curl(flag string) func(ctx context.Context, s *Server, dir string) error {
	return func(ctx context.Context, s *Server, dir string) error {
		return command(ctx, dir, "curl", "-sSk", "--max-time", "30", flag, "-o", "/dev/null", s.URL)
	}
}

// nodeH2 is Node's own HTTP/2 client (http2.connect, nghttp2 inside).
func nodeH2(ctx context.Context, s *Server, dir string) error {
	js := `const http2 = require('http2');
const c = http2.connect(process.argv[1], {rejectUnauthorized: false});
c.on('error', e => { console.error(e); process.exit(1) });
const r = c.request({':path': '/'});
r.on('data', () => {});
r.on('end', () => c.close());
r.end();`
	return command(ctx, dir, "node", "-e", js, s.URL)
}

// nodeHTTPS is Node's https.get: HTTP/1.1, no ALPN, no User-Agent.
func nodeHTTPS(ctx context.Context, s *Server, dir string) error {
	js := `require('https').get(process.argv[1], {rejectUnauthorized: false}, r => { r.resume(); r.on('end', () => process.exit(0)) })
.on('error', e => { console.error(e); process.exit(1) });`
	return command(ctx, dir, "node", "-e", js, s.URL)
}

// nodeFetch is Node's fetch (undici inside), trusting any certificate
// through a dispatcher of undici's own Agent.
func nodeFetch(ctx context.Context, s *Server, dir string) error {
	js := `process.env.NODE_TLS_REJECT_UNAUTHORIZED = '0';
process.emitWarning = () => {};
fetch(process.argv[1]).then(r => r.text()).then(() => process.exit(0), e => { console.error(e); process.exit(1) });`
	return command(ctx, dir, "node", "-e", js, s.URL)
}

// pythonURLLib is Python's urllib.request with a context that checks
// nothing.
func pythonURLLib(python string) func(ctx context.Context, s *Server, dir string) error {
	return func(ctx context.Context, s *Server, dir string) error {
		py := `import ssl, sys, urllib.request
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
urllib.request.urlopen(sys.argv[1], context=ctx).read()`
		return command(ctx, dir, python, "-c", py, s.URL)
	}
}

// requestsVersion prints the versions of requests and urllib3.
var requestsVersion = []string{"requests", "-c", "import requests, urllib3; print(requests.__version__, 'urllib3', urllib3.__version__)"}

// pythonRequests is python-requests (urllib3 inside) with verify=False.
func pythonRequests(python string) func(ctx context.Context, s *Server, dir string) error {
	return func(ctx context.Context, s *Server, dir string) error {
		py := `import sys, warnings
warnings.simplefilter("ignore")
import requests
requests.get(sys.argv[1], verify=False, timeout=30).raise_for_status()`
		return command(ctx, dir, python, "-c", py, s.URL)
	}
}

// gitLsRemote is git's smart HTTP client (git-remote-https: libcurl, on
// Debian libcurl-gnutls) asking for a repository's refs. The server's
// page is not a repository, so git fails after its request: the request
// is what is captured.
func gitLsRemote(ctx context.Context, s *Server, dir string) error {
	_ = command(ctx, dir, "git", "-c", "http.sslVerify=false", "ls-remote", s.URL+"repo.git")
	return nil
}

// javaHTTPClient is the JDK's java.net.http.HttpClient at the given
// version (HTTP_2, which offers h2 and http/1.1 by ALPN, or HTTP_1_1),
// trusting any certificate; run with java's source launcher.
func javaHTTPClient(version string) func(ctx context.Context, s *Server, dir string) error {
	return func(ctx context.Context, s *Server, dir string) error {
		src := filepath.Join(dir, "Get.java")
		if err := os.WriteFile(src, []byte(JavaGet), 0o600); err != nil {
			return err
		}
		return command(ctx, dir, "java", src, s.URL, version)
	}
}

// JavaGet is a Java program (run as `java Get.java URL VERSION`) that
// fetches URL with the JDK's HttpClient at VERSION (HTTP_2, HTTP_1_1),
// trusting any certificate, and exits 1 unless the answer is 200.
const JavaGet = `import java.net.URI;
import java.net.http.*;
import java.security.cert.X509Certificate;
import javax.net.ssl.*;

public class Get {
    public static void main(String[] args) throws Exception {
        TrustManager[] all = { new X509TrustManager() {
            public void checkClientTrusted(X509Certificate[] c, String a) {}
            public void checkServerTrusted(X509Certificate[] c, String a) {}
            public X509Certificate[] getAcceptedIssuers() { return new X509Certificate[0]; }
        } };
        SSLContext ctx = SSLContext.getInstance("TLS");
        ctx.init(null, all, null);
        HttpClient c = HttpClient.newBuilder().sslContext(ctx).version(HttpClient.Version.valueOf(args[1])).build();
        HttpResponse<Void> r = c.send(HttpRequest.newBuilder(URI.create(args[0])).build(), HttpResponse.BodyHandlers.discarding());
        if (r.statusCode() != 200) System.exit(1);
    }
}
`

// firefox runs Firefox ESR headless with a fresh profile that trusts the
// server's certificate (an exception in cert_override.txt, as the browser's
// "Accept the risk" button writes) and makes no connections of its own.
func firefox(ctx context.Context, s *Server, dir string) error {
	profile := filepath.Join(dir, "profile")
	if err := os.MkdirAll(profile, 0o700); err != nil {
		return err
	}
	sum := sha256.Sum256(s.Cert)
	hexes := make([]string, len(sum))
	for i, b := range sum {
		hexes[i] = fmt.Sprintf("%02X", b)
	}
	host := strings.TrimSuffix(strings.TrimPrefix(s.URL, "https://"), "/")
	override := "# PSM Certificate Override Settings file\n# This is a generated file!  Do not edit.\n" +
		host + ":\tOID.2.16.840.1.101.3.4.2.1\t" + strings.Join(hexes, ":") + "\t\n"
	if err := os.WriteFile(filepath.Join(profile, "cert_override.txt"), []byte(override), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(profile, "user.js"), []byte(firefoxPrefs), 0o600); err != nil {
		return err
	}
	return command(ctx, dir, "firefox-esr", "--headless", "--no-remote", "--profile", profile,
		"--screenshot", filepath.Join(dir, "page.png"), s.URL)
}

// firefoxPrefs keep a test profile from connecting anywhere but the page.
const firefoxPrefs = `user_pref("app.normandy.enabled", false);
user_pref("app.update.auto", false);
user_pref("app.update.enabled", false);
user_pref("browser.aboutwelcome.enabled", false);
user_pref("browser.newtabpage.enabled", false);
user_pref("browser.safebrowsing.blockedURIs.enabled", false);
user_pref("browser.safebrowsing.downloads.enabled", false);
user_pref("browser.safebrowsing.malware.enabled", false);
user_pref("browser.safebrowsing.phishing.enabled", false);
user_pref("browser.shell.checkDefaultBrowser", false);
user_pref("browser.startup.homepage_override.mstone", "ignore");
user_pref("browser.startup.page", 0);
user_pref("datareporting.healthreport.uploadEnabled", false);
user_pref("datareporting.policy.dataSubmissionEnabled", false);
user_pref("extensions.update.enabled", false);
user_pref("network.captive-portal-service.enabled", false);
user_pref("network.connectivity-service.enabled", false);
user_pref("network.dns.disablePrefetch", true);
user_pref("network.http.speculative-parallel-limit", 0);
user_pref("network.prefetch-next", false);
user_pref("network.trr.mode", 5);
user_pref("services.settings.server", "https://127.0.0.1:1/");
user_pref("toolkit.telemetry.enabled", false);
user_pref("toolkit.telemetry.reportingpolicy.firstRun", false);
`

func goNetHTTP(h2 bool) func(ctx context.Context, s *Server, dir string) error {
	return func(ctx context.Context, s *Server, _ string) error {
		tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: h2}
		defer tr.CloseIdleConnections()
		return goGet(ctx, tr, s.URL)
	}
}

// goNetHTTPH1ALPN is net/http's Transport over a tls.Config that offers
// http/1.1 by ALPN (NextProtos): a Go client that names its protocol, as
// many scrapers do. (Transport.Protocols with HTTP/1 alone offers no ALPN:
// that is go-net-http-h1's hello.)
func goNetHTTPH1ALPN(ctx context.Context, s *Server, _ string) error {
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}}}
	defer tr.CloseIdleConnections()
	return goGet(ctx, tr, s.URL)
}

func goXNetHTTP2(ctx context.Context, s *Server, _ string) error {
	//lint:ignore SA1019 x/net's transport is the one parrots put over utls
	tr := &http2.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	//lint:ignore SA1019 as above
	defer tr.CloseIdleConnections()
	return goGet(ctx, tr, s.URL)
}

func goGet(ctx context.Context, rt http.RoundTripper, url string) error {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return err
	}
	res, err := rt.RoundTrip(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	_, err = io.Copy(io.Discard, res.Body)
	if res.StatusCode != http.StatusOK {
		err = errors.Join(err, fmt.Errorf("status %d", res.StatusCode))
	}
	return err
}

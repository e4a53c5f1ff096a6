package policy

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test -update rewrites it):\n%s", name, got)
	}
}

func TestRobotsGolden(t *testing.T) {
	t.Parallel()
	in, err := os.ReadFile("testdata/golden/robots.txt")
	if err != nil {
		t.Fatal(err)
	}
	out, err := RobotsToPolicy(bytes.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "robots.yaml", out)
}

// TestExplainGolden records what the default policy says about the clients
// of the acceptance list.
func TestExplainGolden(t *testing.T) {
	t.Parallel()
	p := mustDefault(t)
	python := curlRequest(uaFirefox)
	python.ClientFamily, python.Proto = "python", "HTTP/1.1"
	python.HeaderOrder = []string{"Host", "User-Agent", "Accept-Encoding", "Accept", "Connection"}
	gobot := curlRequest(uaGooglebot)
	gobot.ClientFamily, gobot.CrawlerVerified = "go", CrawlerFailed
	headless := chromeRequest()
	headless.Header.Set("User-Agent", uaHeadless)
	headless.Header.Del("Accept-Language")
	feed := curlRequest(uaMiniflux)
	feed.Path, feed.ClientFamily = "/feed.xml", "go"
	cases := []struct {
		name string
		r    *Request
	}{
		{"chrome", chromeRequest()},
		{"curl", curlRequest("curl/8.5.0")},
		{"curl with a Chrome UA", curlRequest(uaChrome)},
		{"python with a Firefox UA", python},
		{"go with a Googlebot UA", gobot},
		{"GPTBot", curlRequest(uaGPTBot)},
		{"headless chromium", headless},
		{"feed reader", feed},
	}
	var b strings.Builder
	for _, c := range cases {
		b.WriteString("== " + c.name + "\n")
		b.WriteString(strings.Replace(p.Explain(c.r), "policy "+p.Version(), "policy (version)", 1))
	}
	golden(t, "explain-default.txt", []byte(b.String()))
}

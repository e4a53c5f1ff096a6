package edge

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// combinedLine is GoAccess's COMBINED format (%h %^[%d:%t %^] "%r" %s %b
// "%R" "%u", date %d/%b/%Y, time %H:%M:%S) as a regular expression.
var combinedLine = regexp.MustCompile(`^(\S+) \S+ (\S+) \[(\d{2}/[A-Z][a-z]{2}/\d{4}):(\d{2}:\d{2}:\d{2}) [+-]\d{4}\] "((?:[^"\\]|\\.)*)" (\d{3}) (\d+|-) "((?:[^"\\]|\\.)*)" "((?:[^"\\]|\\.)*)"$`)

func TestAccessLogCombined(t *testing.T) {
	t.Parallel()
	up := echoUpstream(t, "a")
	file := filepath.Join(t.TempDir(), "access.log")
	h := newTestHandler(t, "sites: [{hosts: [localhost], upstream: "+up.URL+", access_log: {path: "+file+"}}]\n")
	c := handlerClient(h, "h1")
	get(t, c, handlerURL("/a?x=1"), "User-Agent", "plain/1.0", "Referer", "https://ref.example/")
	get(t, c, handlerURL("/b"), "User-Agent", `evil "agent" \ with quotes`)
	get(t, handlerClient(h, "h2"), handlerURL("/missing/.maat-not"), "User-Agent", "h2client")

	var lines []string
	deadline := time.Now().Add(10 * time.Second)
	for len(lines) < 3 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		f, err := os.Open(file)
		if err != nil {
			continue
		}
		lines = lines[:0]
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		f.Close()
	}
	if len(lines) != 3 {
		t.Fatalf("%d access log lines: %q", len(lines), lines)
	}
	for i, want := range []struct{ req, ua, ref string }{
		{"GET /a?x=1 HTTP/1.1", "plain/1.0", "https://ref.example/"},
		{"GET /b HTTP/1.1", `evil \x22agent\x22 \x5C with quotes`, "-"}, // escaped as nginx does
		{"GET /missing/.maat-not HTTP/2.0", "h2client", "-"},
	} {
		m := combinedLine.FindStringSubmatch(lines[i])
		if m == nil {
			t.Errorf("line %d does not parse as GoAccess COMBINED: %s", i, lines[i])
			continue
		}
		if m[1] != "127.0.0.1" || m[5] != want.req || m[6] != "200" || m[9] != want.ua || m[8] != want.ref {
			t.Errorf("line %d: %q", i, m[1:])
		}
		if _, err := time.Parse("02/Jan/2006 15:04:05", m[3]+" "+m[4]); err != nil {
			t.Errorf("line %d date: %v", i, err)
		}
	}
	if strings.Count(strings.Join(lines, "\n"), "\n") != 2 {
		t.Error("a hostile value broke a line")
	}
}

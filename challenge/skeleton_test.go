package challenge

import (
	"bytes"
	"compress/gzip"
	"html/template"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestSkeleton: every page kind has a skeleton, and it writes exactly what
// the template does, for ordinary and hostile values.
func TestSkeleton(t *testing.T) {
	t.Parallel()
	c, _ := newTest(t, func(cfg *Config) { cfg.Messages = loadMessages(t); cfg.Contact = "ops@example.org" })
	l := c.langs[c.msgs.Match("ar", "")]
	tk, tok := c.issuePoW(alice, Spec{Bits: 16}, c.now())
	_, waitTok := c.issueWait(alice, "", 3, c.now())
	challenge := func(pow, wait bool) func(reqID, _, _ string) *pageData {
		return func(reqID, _, _ string) *pageData {
			d := c.basePage(l, l.t["ChallengeTitle"])
			d.RequestID = reqID
			d.Challenge = &challengeData{PoW: pow, CapMS: "20000", Worker: c.assetURL("worker.js")}
			if pow {
				d.Challenge.Seed, d.Challenge.K, d.Challenge.SubBits = tk.seed(), "8", "13"
				d.Challenge.PassURL = passPath + "?t=" + tok + "&r=%2Fx"
			}
			if wait {
				d.Challenge.WaitURL = passPath + "?t=" + waitTok + "&r=%2Fx%3Fa%3Db+c"
				d.Challenge.WaitText, d.Challenge.WaitMS = l.plural("ChallengeWait", 3), "3250"
				d.NoScriptRefresh = "3; url=" + d.Challenge.WaitURL
			}
			d.Nonce = "abc-_123"
			return &d
		}
	}
	pages := map[string]func(reqID, reason, text string) *pageData{
		"challenge":            challenge(true, true),
		"challenge, no wait":   challenge(true, false),
		"challenge, wait only": challenge(false, true),
		"deny": func(reqID, reason, _ string) *pageData {
			d := c.basePage(l, l.t["DenyTitle"])
			d.Text, d.Status, d.RequestID, d.Reason = l.t["DenyText"], 403, reqID, reason
			return &d
		},
		"rate": func(reqID, reason, text string) *pageData {
			d := c.basePage(l, l.t["RateTitle"])
			d.Text, d.Status, d.RequestID, d.Reason, d.Retry = text, 429, reqID, reason, true
			return &d
		},
		"refused": func(reqID, reason, text string) *pageData {
			d := c.basePage(l, l.t["PassFailTitle"])
			d.Text, d.Status, d.RequestID, d.Reason = l.t["PassFailText"], 403, reqID, reason
			d.BackURL = normalizeURL("/wiki/" + text)
			return &d
		},
	}
	values := []struct{ reqID, reason, text string }{
		{"req-1", "bad_ua", "Try in 5 seconds."},
		{"", "", "x"},
		{`"><script>alert(1)</script>`, `a'b&c+d`, "<i>ok</i> é"},
	}
	for name, page := range pages {
		for _, v := range values {
			d := page(v.reqID, v.reason, v.text)
			sk := c.skeleton(d)
			if sk == nil {
				t.Fatalf("%s %q: no skeleton", name, v.reqID)
			}
			var got, want bytes.Buffer
			fields := sk.write(&got, d, c.escaper, nil)
			if err := c.tmpl.ExecuteTemplate(&want, "page", d); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), want.Bytes()) {
				t.Errorf("%s %q: skeleton differs from template:\n%s\n---\n%s", name, v.reqID, got.Bytes(), want.Bytes())
			}
			// The stitched gzip form is one gzip member holding exactly
			// the page.
			z := bytes.NewReader(sk.appendGzip(nil, got.Bytes(), fields))
			zr, err := gzip.NewReader(z)
			if err != nil {
				t.Fatal(err)
			}
			zr.Multistream(false)
			unz, err := io.ReadAll(zr)
			if err != nil {
				t.Fatalf("%s %q: gzip: %v", name, v.reqID, err)
			}
			if !bytes.Equal(unz, want.Bytes()) {
				t.Errorf("%s %q: gzip form differs from the page", name, v.reqID)
			}
			if z.Len() != 0 {
				t.Errorf("%s %q: %d bytes after the gzip member", name, v.reqID, z.Len())
			}
		}
	}
}

func TestSkeletonNotForOperatorTemplates(t *testing.T) {
	t.Parallel()
	c, _ := newTest(t, nil)
	w := httptest.NewRecorder()
	c.Deny(w, httptest.NewRequest(http.MethodGet, "/", nil), "r", "x")
	if c.customTemplates {
		t.Fatal("embedded templates counted as custom")
	}
}

// TestNormalizeURL: a URL normalized by normalizeURL and escaped as the
// skeleton does is what html/template writes into an href, for every byte.
func TestNormalizeURL(t *testing.T) {
	t.Parallel()
	tmpl := template.Must(template.New("").Parse(`<a href="{{.}}">`))
	esc := newEscaper()
	for b := range 256 {
		in := "/a" + string([]byte{byte(b)}) + "z?q=%2F&x=é"
		var want bytes.Buffer
		if err := tmpl.Execute(&want, normalizeURL(in)); err != nil {
			t.Fatal(err)
		}
		if got := `<a href="` + esc.Replace(normalizeURL(in)) + `">`; got != want.String() {
			t.Errorf("byte %#x: skeleton writes %s, template %s", b, got, want.String())
		}
	}
	if u := passPath + "?t=AQ-_z&r=%2Fa%3Fb+c"; normalizeURL(u) != u {
		t.Errorf("normalizeURL changed our own URL %q", u)
	}
}

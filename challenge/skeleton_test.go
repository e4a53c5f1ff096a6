package challenge

import (
	"bytes"
	"compress/gzip"
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
	tk, tok := c.issue(alice, Spec{Bits: 16}, c.now())
	pages := map[string]func(reqID, reason, text string) *pageData{
		"challenge": func(reqID, _, _ string) *pageData {
			d := c.basePage(l, l.t["ChallengeTitle"])
			d.RequestID = reqID
			d.Challenge = &challengeData{PoW: true, Seed: tk.seed(), K: "8", SubBits: "13", PassURL: passPath + "?t=" + tok + "&r=%2Fx", WaitURL: passPath + "?t=" + tok + "&r=%2Fx", WaitText: l.plural("ChallengeWait", 3), WaitMS: "3250", CapMS: "20000", Worker: c.assetURL("worker.js")}
			d.NoScriptRefresh = "3; url=" + d.Challenge.PassURL
			d.Nonce = "abc-_123"
			return &d
		},
		"deny": func(reqID, reason, _ string) *pageData {
			d := c.basePage(l, l.t["DenyTitle"])
			d.Text, d.Status, d.RequestID, d.Reason = l.t["DenyText"], 403, reqID, reason
			return &d
		},
		"rate": func(reqID, reason, text string) *pageData {
			d := c.basePage(l, l.t["RateTitle"])
			d.Text, d.Status, d.RequestID, d.Reason = text, 429, reqID, reason
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

package challenge

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/maatproxy/maat/accept"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// asset is a static file, with its gzip form when that is smaller.
type asset struct {
	body, gz    []byte
	inline      string // an embedded script without its comment lines, to inline in a page
	contentType string
	etag        string
}

func loadAssets(dir string) (map[string]*asset, error) {
	out := make(map[string]*asset)
	add := func(fsys fs.FS, embedded bool) error {
		return fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := fs.ReadFile(fsys, p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			a := &asset{body: b, etag: hex.EncodeToString(sum[:6])}
			a.contentType = mime.TypeByExtension(path.Ext(p))
			if a.contentType == "" {
				a.contentType = "application/octet-stream"
			}
			if z := gzipBytes(b); len(z) < len(b) {
				a.gz = z
			}
			if path.Ext(p) == ".js" {
				a.inline = string(b)
				if embedded {
					a.inline = stripComments(a.inline)
				}
			}
			out[p] = a
			return nil
		})
	}
	sub, _ := fs.Sub(staticFS, "static")
	if err := add(sub, true); err != nil {
		return nil, fmt.Errorf("challenge: static assets: %w", err)
	}
	if dir != "" {
		if fi, err := os.Stat(filepath.Join(dir, "static")); err == nil && fi.IsDir() {
			if err := add(os.DirFS(filepath.Join(dir, "static")), false); err != nil {
				return nil, fmt.Errorf("challenge: static assets: %w", err)
			}
		}
	}
	return out, nil
}

// assetURL is the cache-busting URL of a static asset.
func (c *Challenger) assetURL(name string) string {
	if a, ok := c.assets[name]; ok {
		return staticPrefix + name + "?v=" + a.etag
	}
	return staticPrefix + name
}

// inlineJS is a static script's text, for a template to inline (the
// embedded one, or the operator's from TemplateDir/static).
func (c *Challenger) inlineJS(name string) template.JS {
	if a, ok := c.assets[name]; ok {
		return template.JS(a.inline)
	}
	return ""
}

// stripComments drops the comment lines and the indentation of one of our
// scripts: every challenge page carries it. (Only for our own scripts,
// which keep no string across lines.)
func stripComments(js string) string {
	var b strings.Builder
	for line := range strings.SplitSeq(js, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "//") {
			continue
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.String()
}

func loadTemplates(dir string, funcs template.FuncMap) (*template.Template, error) {
	t, err := template.New("").Funcs(funcs).ParseFS(templateFS, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("challenge: templates: %w", err)
	}
	if dir != "" {
		files, _ := filepath.Glob(filepath.Join(dir, "*.html"))
		if len(files) > 0 {
			if t, err = t.ParseFiles(files...); err != nil {
				return nil, fmt.Errorf("challenge: templates in %s: %w", dir, err)
			}
		}
	}
	if t.Lookup("page") == nil {
		return nil, fmt.Errorf("challenge: templates define no \"page\"")
	}
	return t, nil
}

// pageData is what the templates see.
type pageData struct {
	Lang, Dir       string
	T               map[string]string
	Title           string
	Text            string
	Status          int
	Retry           bool   // offer to load the page again
	BackURL         string // the page the visitor came for, when a pass was refused
	RequestID       string
	Reason          string
	Contact         string
	PolicyURL       string
	NoScriptRefresh string // meta refresh for a browser without JavaScript
	Nonce           string // the CSP nonce of the page's script
	Challenge       *challengeData
}

// challengeData is the challenge page's part; numbers are preformatted so
// that the page skeleton can stand in for every field. URLs are normalized
// (normalizeURL) because the skeleton writes them without html/template's
// URL normalizer.
type challengeData struct {
	PoW        bool
	Seed       string
	K, SubBits string
	PassURL    string // the PoW token's URL: append "&n=…" to submit a solution
	WaitURL    string // the wait token's URL; empty when no wait is offered
	WaitText   string
	WaitMS     string
	CapMS      string
	Worker     string
}

// challengeTokens are the tokens minted for one challenge page: a proof of
// work (pow nil: the wait only), a wait ("" : none offered), and the
// seconds the page waits before it follows the wait token.
type challengeTokens struct {
	pow      *token
	powTok   string
	wait     string
	waitSecs uint16
}

func (c *Challenger) basePage(l *lang, title string) pageData {
	return pageData{Lang: l.code, Dir: l.dir, T: l.t, Title: title, Contact: c.cfg.Contact, PolicyURL: c.cfg.PolicyURL}
}

func (c *Challenger) renderChallenge(w http.ResponseWriter, r *http.Request, l *lang, p *challengeTokens, redirect, requestID string) {
	back := "&r=" + url.QueryEscape(redirect)
	d := c.basePage(l, l.t["ChallengeTitle"])
	d.RequestID = requestID
	ch := &challengeData{Worker: c.assetURL("worker.js"), CapMS: strconv.FormatInt(c.cfg.solveTimeout().Milliseconds(), 10)}
	d.Challenge = ch
	if p.pow != nil {
		ch.PoW = true
		ch.Seed = p.pow.seed()
		ch.K = strconv.Itoa(int(p.pow.k))
		ch.SubBits = strconv.Itoa(p.pow.subBits())
		ch.PassURL = normalizeURL(passPath + "?t=" + p.powTok + back)
	}
	if p.wait != "" {
		wait := int(p.waitSecs)
		ch.WaitURL = normalizeURL(passPath + "?t=" + p.wait + back)
		ch.WaitText = l.plural("ChallengeWait", wait)
		ch.WaitMS = strconv.Itoa(wait*1000 + 250)
		ch.CapMS = strconv.FormatInt(max(c.cfg.solveTimeout(), time.Duration(wait)*time.Second).Milliseconds(), 10)
		// Without JavaScript the page refreshes itself (HTML's meta
		// refresh); with it, solve.js solves the PoW or, for the wait
		// only, waits and follows the same URL, so that no delayed meta
		// refresh is live for assistive technology (WCAG 2.2 F41).
		d.NoScriptRefresh = strconv.Itoa(wait) + "; url=" + ch.WaitURL
	}
	c.render(w, r, c.cfg.challengeStatus(), &d, true)
}

// messagePage is a page with a message: deny, rate limited, error, refused
// pass.
type messagePage struct {
	status              int
	title, text, reason string
	retry               bool   // offer to load the page again
	back                string // link back to this path on the site
}

func (c *Challenger) message(w http.ResponseWriter, r *http.Request, l *lang, requestID string, m messagePage) {
	if !isNavigation(r) {
		c.writeShort(w, r, m.status, m.reason, m.text, requestID)
		return
	}
	d := c.basePage(l, m.title)
	d.Text, d.Status, d.RequestID, d.Reason, d.Retry = m.text, m.status, requestID, m.reason, m.retry
	if m.back != "" {
		d.BackURL = normalizeURL(m.back)
	}
	c.render(w, r, m.status, &d, false)
}

// normalizeURL percent-encodes what html/template's URL normalizer encodes
// in a URL attribute (every byte but RFC 3986's unreserved and reserved
// characters, except the single quote, and '%' where it starts an escape),
// so that the page skeleton writes a URL byte for byte as the template
// does. Our own URLs need no encoding and are returned as they are.
func normalizeURL(s string) string {
	var b []byte
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if urlKeep(ch) || (ch == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2])) {
			if b != nil {
				b = append(b, ch)
			}
			continue
		}
		if b == nil {
			b = append(make([]byte, 0, len(s)+16), s[:i]...)
		}
		b = append(b, '%', "0123456789abcdef"[ch>>4], "0123456789abcdef"[ch&15])
	}
	if b == nil {
		return s
	}
	return string(b)
}

func urlKeep(ch byte) bool {
	switch {
	case 'a' <= ch && ch <= 'z', 'A' <= ch && ch <= 'Z', '0' <= ch && ch <= '9':
		return true
	}
	return strings.IndexByte("-._~!#$&*+,/:;=?@[]", ch) >= 0
}

func isHex(ch byte) bool {
	return '0' <= ch && ch <= '9' || 'a' <= ch && ch <= 'f' || 'A' <= ch && ch <= 'F'
}

// pools holds the buffers and gzip writers pages are rendered with.
type pools struct{ bufs, gzips, gzipped sync.Pool }

func (p *pools) init() {
	p.bufs.New = func() any { return new(bytes.Buffer) }
	p.gzipped.New = func() any { return new([]byte) }
	p.gzips.New = func() any {
		z, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
		return z
	}
}

// render executes the page template and writes it, gzipped when the client
// accepts it, under a CSP whose nonce admits only our script.
func (c *Challenger) render(w http.ResponseWriter, r *http.Request, status int, d *pageData, script bool) {
	var nb [16]byte
	rand.Read(nb[:])
	nonce := base64.RawURLEncoding.EncodeToString(nb[:]) // CSP allows "-" and "_"; html/template leaves them alone
	d.Nonce = nonce
	h := w.Header()
	// The values share one array: one allocation for the page's fields,
	// each a full slice (whoever adds a value copies).
	v := make([]string, 0, 10)
	v = append(v, csp(nonce, script), "text/html; charset=utf-8", "no-store", "nosniff", "same-origin", d.Lang)
	h["Content-Security-Policy"] = v[0:1:1]
	h["Content-Type"] = v[1:2:2]
	h["Cache-Control"] = v[2:3:3]
	h["X-Content-Type-Options"] = v[3:4:4]
	h["Referrer-Policy"] = v[4:5:5]
	h["Content-Language"] = v[5:6:6]
	if d.RequestID != "" {
		h["X-Request-Id"] = append(v, d.RequestID)[6:7:7]
	}

	buf := c.pools.bufs.Get().(*bytes.Buffer)
	defer c.pools.bufs.Put(buf)
	buf.Reset()
	sk := c.skeleton(d)
	var fieldBuf [64]int
	var fields []int
	if sk != nil {
		fields = sk.write(buf, d, c.escaper, fieldBuf[:0])
	} else if err := c.tmpl.ExecuteTemplate(buf, "page", d); err != nil {
		// An operator's template failed: fall back to plain text rather
		// than a half page; the reason is theirs, not the visitor's.
		h.Del("Content-Language")
		h.Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(status)
		fmt.Fprintf(w, "%s\n%s: %s\n", d.Title, d.T["RequestID"], d.RequestID)
		return
	}
	c.writeBody(w, r, status, buf.Bytes(), sk, fields)
}

// writeBody writes body, gzipped when the client accepts it and it is worth
// it. A page from the skeleton sk, whose fields are where sk.write put them,
// is gzipped from its precompressed chunks, so that no compressor runs per
// request; any other body goes through a pooled compressor.
func (c *Challenger) writeBody(w http.ResponseWriter, r *http.Request, status int, body []byte, sk *skeleton, fields []int) {
	h := w.Header()
	h.Add("Vary", "Accept-Encoding")
	if len(body) > 512 && acceptsGzip(r) {
		if sk != nil {
			zp := c.pools.gzipped.Get().(*[]byte)
			z := sk.appendGzip((*zp)[:0], body, fields)
			defer func() { *zp = z; c.pools.gzipped.Put(zp) }()
			v := []string{"gzip", strconv.Itoa(len(z))} // one allocation for both
			h["Content-Encoding"], h["Content-Length"] = v[0:1:1], v[1:2:2]
			w.WriteHeader(status)
			if r.Method != http.MethodHead {
				w.Write(z)
			}
			return
		}
		h.Set("Content-Encoding", "gzip")
		w.WriteHeader(status)
		if r.Method == http.MethodHead {
			return
		}
		z := c.pools.gzips.Get().(*gzip.Writer)
		z.Reset(w)
		z.Write(body)
		z.Close()
		c.pools.gzips.Put(z)
		return
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		w.Write(body)
	}
}

// writeShort answers a non-navigation request: JSON when the client
// accepts it, plain text otherwise.
func (c *Challenger) writeShort(w http.ResponseWriter, r *http.Request, status int, code, text, requestID string) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	if requestID != "" {
		h.Set("X-Request-Id", requestID)
	}
	var body []byte
	if strings.Contains(r.Header.Get("Accept"), "json") {
		h.Set("Content-Type", "application/json")
		body, _ = json.Marshal(struct {
			Error     string `json:"error"`
			Message   string `json:"message"`
			RequestID string `json:"request_id,omitempty"`
		}{code, text, requestID})
		body = append(body, '\n')
	} else {
		h.Set("Content-Type", "text/plain; charset=utf-8")
		body = []byte(text + "\n" + code + " " + requestID + "\n")
	}
	c.writeBody(w, r, status, body, nil, nil)
}

func csp(nonce string, script bool) string {
	s := "default-src 'none'; style-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
	if script {
		// 'wasm-unsafe-eval' lets the page compile its WebAssembly search
		// (search.wasm, from this site); it allows no JavaScript eval.
		s += "; script-src 'nonce-" + nonce + "' 'wasm-unsafe-eval'; worker-src 'self'; connect-src 'self'"
	}
	return s
}

// gzipOnly is the one coding pages and assets are stored in.
var gzipOnly = []string{accept.Gzip}

func acceptsGzip(r *http.Request) bool {
	return accept.Encoding(r.Header["Accept-Encoding"], gzipOnly) == accept.Gzip
}

func gzipBytes(b []byte) []byte {
	var buf bytes.Buffer
	z, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	z.Write(b)
	z.Close()
	return buf.Bytes()
}

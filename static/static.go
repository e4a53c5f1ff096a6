package static

import (
	"cmp"
	"errors"
	"html/template"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"
)

// Handler serves the files under a root directory. It is safe for
// concurrent use.
type Handler struct {
	root          string
	index         []string
	listing       bool
	precompressed bool
	strip         string         // "" = the whole path is looked up
	errorPages    map[int]string // status → cleaned name under root
	maxRanges     int
	page          *template.Template
}

// New returns a Handler for cfg, or the errors of cfg.Validate.
func New(cfg Config) (*Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	h := &Handler{
		root:          cfg.Root,
		index:         cfg.index(),
		listing:       cfg.Listing,
		precompressed: cfg.Precompressed,
		strip:         cfg.StripPrefix,
		errorPages:    cfg.errorPages(),
		maxRanges:     cmp.Or(cfg.MaxRanges, DefaultMaxRanges),
	}
	if cfg.Listing {
		h.page = template.Must(template.New("listing").Parse(listingHTML))
	}
	return h, nil
}

// ServeHTTP serves r.URL.Path under the root, without Config.StripPrefix
// (see the package documentation).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		h.fail(w, r, nil, http.StatusMethodNotAllowed)
		return
	}
	p, ok := h.lookupPath(r.URL.Path)
	if !ok {
		h.fail(w, r, nil, http.StatusNotFound)
		return
	}
	name, dirURL, status := cleanPath(p)
	if status != 0 {
		h.fail(w, r, nil, status)
		return
	}
	root, err := os.OpenRoot(h.root)
	if err != nil {
		fail(w, statusOf(err)) // the root went away since New: no error page either
		return
	}
	defer root.Close()

	f, fi, err := openAny(root, name)
	if err != nil {
		h.fail(w, r, root, statusOf(err))
		return
	}
	defer f.Close()
	switch {
	case fi.IsDir():
		// The route itself without its slash: "/docs" stripped to "",
		// by StripPrefix or by the caller.
		bare := p == "" && (h.strip != "" && r.URL.Path != "" || bareRoute(r))
		if !dirURL || bare {
			redirectToDir(w, r)
			return
		}
		h.serveDir(w, r, root, name, f)
	case !fi.Mode().IsRegular():
		h.fail(w, r, root, http.StatusNotFound) // devices, FIFOs, sockets
	case dirURL:
		h.fail(w, r, root, http.StatusNotFound) // "file.html/"
	default:
		h.serveFile(w, r, root, name, f, fi)
	}
}

// serveDir serves a directory's first index file, its listing, or 404.
func (h *Handler) serveDir(w http.ResponseWriter, r *http.Request, root *os.Root, name string, d *os.File) {
	for _, idx := range h.index {
		p := path.Join(name, idx)
		if f, fi, err := openRegular(root, p); err == nil {
			defer f.Close()
			h.serveFile(w, r, root, p, f, fi)
			return
		}
	}
	if !h.listing {
		h.fail(w, r, root, http.StatusNotFound)
		return
	}
	h.serveListing(w, r, root, name, d)
}

// serveFile serves the regular file f, opened as name, or a precompressed
// sibling of it.
func (h *Handler) serveFile(w http.ResponseWriter, r *http.Request, root *os.Root, name string, f *os.File, fi fs.FileInfo) {
	if h.precompressed && !isCompressed(name) {
		addVary(w.Header())
		if h.serveSibling(w, r, root, name, f) {
			return
		}
	}
	hdr := w.Header()
	if t := typeByName(name); t != "" {
		hdr["Content-Type"] = []string{t}
	} // otherwise ServeContent sniffs the content
	hdr["Etag"] = []string{etag(fi, "")}
	http.ServeContent(w, withRanges(r, fi.Size(), h.maxRanges), name, fi.ModTime(), f)
}

// serveSibling serves the best precompressed sibling of name (open as
// orig) that the request accepts, and reports whether it did.
func (h *Handler) serveSibling(w http.ResponseWriter, r *http.Request, root *os.Root, name string, orig *os.File) bool {
	order, n := acceptedEncodings(r.Header)
	for _, i := range order[:n] {
		e := encodings[i]
		f, fi, err := openRegular(root, name+e.ext)
		if err != nil {
			continue
		}
		defer f.Close()
		ctype := typeByName(name)
		if ctype == "" {
			ctype = sniff(orig)
		}
		hdr := w.Header()
		hdr["Content-Type"] = []string{ctype}
		hdr["Content-Encoding"] = []string{e.token}
		hdr["Etag"] = []string{etag(fi, e.token)}
		http.ServeContent(&lengthWriter{ResponseWriter: w, n: fi.Size()}, withRanges(r, fi.Size(), h.maxRanges), name, fi.ModTime(), f)
		return true
	}
	return false
}

// openAny opens name, whatever it is, and returns its information as of
// the open. On Unix it opens without blocking (openFlags), so that a FIFO in
// the root cannot hold the request waiting for a writer.
func openAny(root *os.Root, name string) (*os.File, fs.FileInfo, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|openFlags, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// openRegular opens name if it is a regular file.
func openRegular(root *os.Root, name string) (*os.File, fs.FileInfo, error) {
	f, fi, err := openAny(root, name)
	if err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fs.ErrNotExist
	}
	return f, fi, nil
}

// sniff returns the detected type of f's first 512 bytes, or
// application/octet-stream when it cannot be read.
func sniff(f *os.File) string {
	var buf [512]byte
	n, err := f.ReadAt(buf[:], 0)
	if n == 0 && err != nil {
		return "application/octet-stream"
	}
	return http.DetectContentType(buf[:n])
}

// etag returns a strong entity tag from the file's size and modification
// time, and the content coding of the representation if any.
func etag(fi fs.FileInfo, coding string) string {
	b := make([]byte, 0, 48)
	b = append(b, '"')
	b = strconv.AppendInt(b, fi.ModTime().UnixNano(), 36)
	b = append(b, '-')
	b = strconv.AppendInt(b, fi.Size(), 36)
	if coding != "" {
		b = append(b, '-')
		b = append(b, coding...)
	}
	b = append(b, '"')
	return string(b)
}

// addVary adds Accept-Encoding to the Vary header unless it is there.
func addVary(h http.Header) {
	for _, v := range h["Vary"] {
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); f == "*" || strings.EqualFold(f, "Accept-Encoding") {
				return
			}
		}
	}
	h["Vary"] = append(h["Vary"], "Accept-Encoding")
}

// redirectToDir answers a directory URL without its trailing slash with a
// redirect to the same URL with one. The Location is relative to the last
// segment, so it is right whatever prefix the caller stripped.
func redirectToDir(w http.ResponseWriter, r *http.Request) {
	p := r.URL.EscapedPath()
	if p == "" { // the route itself, "/docs" for "/docs/"
		p, _, _ = strings.Cut(r.RequestURI, "?")
	}
	loc := "./" + p[strings.LastIndexByte(p, '/')+1:] + "/"
	if r.URL.RawQuery != "" {
		loc += "?" + r.URL.RawQuery
	}
	w.Header().Set("Location", loc)
	w.WriteHeader(http.StatusMovedPermanently)
}

// bareRoute reports whether an empty path came from a request for the
// route's prefix without its slash ("/docs" when "/docs" was stripped), which
// must be redirected like any directory for relative links to work.
func bareRoute(r *http.Request) bool {
	p, _, _ := strings.Cut(r.RequestURI, "?")
	return p != "" && p != "*" && !strings.HasSuffix(p, "/") && !strings.Contains(p, "://")
}

// statusOf maps a file system error to a status. Anything that is not a
// plain "no such file" is refused rather than explained; os.Root's refusal
// of a path that escapes the root is not an errno and lands on 403.
func statusOf(err error) int {
	var errno syscall.Errno
	switch {
	case errors.Is(err, fs.ErrNotExist),
		errors.Is(err, syscall.ENOTDIR),
		errors.Is(err, syscall.ENAMETOOLONG):
		return http.StatusNotFound
	case errors.Is(err, fs.ErrPermission), !errors.As(err, &errno):
		return http.StatusForbidden
	case errors.Is(err, syscall.ELOOP):
		return http.StatusForbidden
	}
	return http.StatusInternalServerError
}

// lengthWriter sets Content-Length on a full (200) response: ServeContent
// leaves it out when Content-Encoding is set, which would make a
// precompressed file go out chunked.
type lengthWriter struct {
	http.ResponseWriter
	n int64
}

func (lw *lengthWriter) WriteHeader(code int) {
	if code == http.StatusOK {
		lw.Header().Set("Content-Length", strconv.FormatInt(lw.n, 10))
	}
	lw.ResponseWriter.WriteHeader(code)
}

// ReadFrom keeps the underlying writer's sendfile path.
func (lw *lengthWriter) ReadFrom(src io.Reader) (int64, error) {
	if rf, ok := lw.ResponseWriter.(io.ReaderFrom); ok {
		return rf.ReadFrom(src)
	}
	return io.Copy(lw.ResponseWriter, src)
}

// Unwrap returns the underlying writer, for http.ResponseController.
func (lw *lengthWriter) Unwrap() http.ResponseWriter { return lw.ResponseWriter }

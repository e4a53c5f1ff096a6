package static

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
)

// fail writes an error response that carries the status text only.
func fail(w http.ResponseWriter, status int) {
	h := w.Header()
	h.Del("Etag")
	h.Del("Last-Modified")
	h.Del("Content-Encoding")
	http.Error(w, fmt.Sprintf("%d %s", status, http.StatusText(status)), status)
}

// fail answers status with its error page (Config.ErrorPages) opened in
// root (or in the root opened anew if nil), or with the status text if it
// has none or it cannot be served. An error page is never looked for twice.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, root *os.Root, status int) {
	name, ok := h.errorPages[status]
	if !ok {
		fail(w, status)
		return
	}
	if root == nil {
		var err error
		if root, err = os.OpenRoot(h.root); err != nil {
			fail(w, status)
			return
		}
		defer root.Close()
	}
	f, fi, err := openRegular(root, name)
	if err != nil {
		fail(w, status)
		return
	}
	defer f.Close()
	hdr := w.Header()
	hdr.Del("Etag")
	hdr.Del("Last-Modified")
	hdr.Del("Content-Encoding")
	ctype := typeByName(name)
	if ctype == "" {
		ctype = sniff(f)
	}
	hdr.Set("Content-Type", ctype)
	hdr.Set("Content-Length", strconv.FormatInt(fi.Size(), 10))
	hdr.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = io.Copy(w, f) // an error means the client left
	}
}

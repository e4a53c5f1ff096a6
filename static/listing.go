package static

import (
	"cmp"
	"net/http"
	"net/url"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// listingHTML is the directory listing page; html/template escapes names
// for text and URLs.
const listingHTML = `<!doctype html>
<html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>Index of {{.Path}}</title>
<style>body{font-family:system-ui,sans-serif;margin:2em}td{padding:.1em 1em .1em 0}td.n{text-align:right}</style>
</head><body>
<h1>Index of {{.Path}}</h1>
<table>
{{- if .Parent}}
<tr><td><a href="../">../</a></td><td></td><td></td></tr>
{{- end}}
{{- range .Entries}}
<tr><td><a href="{{.Href}}">{{.Name}}</a></td><td class="n">{{.Size}}</td><td>{{.Modified}}</td></tr>
{{- end}}
</table>
</body></html>
`

type listingEntry struct {
	Name     string // as shown, with a trailing slash for directories
	Href     string // relative and percent-encoded
	Size     string
	Modified string
	dir      bool
}

// serveListing writes the HTML listing of the directory name, open as d: visible
// entries only (no dotfiles), directories first, then by name. Symbolic
// links are shown as what they point to, and left out if that is outside
// the root or missing.
func (h *Handler) serveListing(w http.ResponseWriter, r *http.Request, root *os.Root, name string, d *os.File) {
	des, err := d.ReadDir(-1)
	if err != nil {
		h.fail(w, r, root, http.StatusInternalServerError)
		return
	}
	entries := make([]listingEntry, 0, len(des))
	for _, de := range des {
		n := de.Name()
		if strings.HasPrefix(n, ".") {
			continue
		}
		fi, err := root.Stat(path.Join(name, n)) // follows links, inside the root only
		if err != nil {
			continue
		}
		e := listingEntry{Name: n, dir: fi.IsDir(), Modified: fi.ModTime().UTC().Format(time.DateTime)}
		u := url.URL{Path: "./" + n}
		if e.dir {
			e.Name += "/"
			u.Path += "/"
		} else {
			e.Size = formatSize(fi.Size())
		}
		e.Href = u.String()
		entries = append(entries, e)
	}
	slices.SortFunc(entries, func(a, b listingEntry) int {
		if a.dir != b.dir {
			if a.dir {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.Name, b.Name)
	})
	hdr := w.Header()
	hdr.Set("Content-Type", "text/html; charset=utf-8")
	hdr.Set("Cache-Control", "no-cache")
	data := struct {
		Path    string
		Parent  bool
		Entries []listingEntry
	}{Path: r.URL.Path, Parent: name != ".", Entries: entries}
	if r.Method == http.MethodHead {
		return
	}
	_ = h.page.Execute(w, data) // a write error means the client left
}

// formatSize renders a byte count for people: 999 B, 1.5 KiB, 12 MiB.
func formatSize(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	v := float64(n) / float64(div)
	s := strings.TrimSuffix(strconv.FormatFloat(v, 'f', 1, 64), ".0")
	return s + " " + "KMGTPE"[exp:exp+1] + "iB"
}

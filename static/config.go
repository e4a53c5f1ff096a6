package static

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
)

// DefaultIndex is the index file used when Config.Index is nil.
const DefaultIndex = "index.html"

// Errors returned by Config.Validate and New, wrapped with details.
var (
	ErrNoRoot      = errors.New("static: root is not set")
	ErrRoot        = errors.New("static: root is not a usable directory")
	ErrBadIndex    = errors.New("static: index must be a plain file name")
	ErrStripPrefix = errors.New("static: strip prefix must be a clean path starting with /")
	ErrErrorPage   = errors.New("static: bad error page")
	ErrMaxRanges   = errors.New("static: max ranges must not be negative")
)

// errorStatuses are the statuses the handler answers itself, for which
// Config.ErrorPages may name a page: a malformed path (400), a file it may
// not serve (403), a missing file (404), a method other than GET and HEAD
// (405), and a failure of the file system (500).
var errorStatuses = [...]int{400, 403, 404, 405, 500}

// Config configures a Handler.
type Config struct {
	// Root is the directory whose files are served. It must exist and be a
	// directory. It is opened anew for every request, so that a deployment
	// that swaps a symbolic link (Root = /srv/site/current) is seen at once.
	Root string

	// Index lists the file names tried, in order, when a directory is
	// requested. If nil, DefaultIndex alone is used; an empty non-nil slice
	// disables index files. Each entry is a plain file name: no slash, not a
	// dotfile.
	Index []string

	// Listing enables an HTML listing of directories that have no index
	// file. If false (the default) such a directory is 404.
	Listing bool

	// Precompressed enables serving name.zst, name.br or name.gz in place of
	// name when the client accepts that encoding and the sibling exists
	// (not looked for beside formats that are compressed already: images
	// other than SVG, fonts, audio, video, archives). If
	// false, only the file itself is served. Operators expect it on: a
	// caller that reads it from a configuration file defaults it to true.
	Precompressed bool

	// StripPrefix is taken off the request path before the rest is looked
	// up under Root, as nginx's alias does: with StripPrefix "/docs/" and
	// Root /srv/docs, "/docs/a.html" is /srv/docs/a.html. It matches whole
	// segments ("/docs" does not match "/docsx"), a path outside it is 404,
	// and the prefix without its trailing slash ("/docs") is redirected to
	// "docs/". If empty, the whole path is looked up under Root, as nginx's
	// root and Caddy's file_server in a handle block do: "/docs/a.html" is
	// /srv/site/docs/a.html with Root /srv/site. (A caller may also strip
	// the prefix itself, as http.StripPrefix does, and leave this empty.)
	StripPrefix string

	// ErrorPages maps a status the handler answers itself (400, 403, 404,
	// 405 or 500) to a file under Root (a slash-separated path such as
	// "404.html" or "errors/404.html") whose content answers that status in
	// place of the status text, as nginx's error_page and Caddy's
	// handle_errors do. The status is kept and the Content-Type is the
	// file's. The page is opened through the same os.Root as every file, so
	// it cannot lead out of Root, and a missing page is not itself an error
	// page: the status text answers then. Validate checks that each file
	// exists. If nil, every error answers with its status text.
	ErrorPages map[int]string

	// MaxRanges is the number of ranges a Range header may ask for; a
	// request for more is answered with the whole file (200), as Apache's
	// MaxRanges does. Ranges that overlap or touch are merged first, so
	// that a response never holds more bytes of the file than the file. If
	// zero, DefaultMaxRanges is used.
	MaxRanges int
}

// index returns a copy of the index file names in effect.
func (c Config) index() []string {
	if c.Index == nil {
		return []string{DefaultIndex}
	}
	return append([]string(nil), c.Index...)
}

// Validate reports every problem of the configuration at once.
func (c Config) Validate() error {
	var errs []error
	if c.Root == "" {
		errs = append(errs, ErrNoRoot)
	} else if fi, err := os.Stat(c.Root); err != nil {
		errs = append(errs, fmt.Errorf("%w: %w", ErrRoot, err))
	} else if !fi.IsDir() {
		errs = append(errs, fmt.Errorf("%w: %s is not a directory", ErrRoot, c.Root))
	}
	for _, name := range c.Index {
		if !plainName(name) {
			errs = append(errs, fmt.Errorf("%w: %q", ErrBadIndex, name))
		}
	}
	if p := c.StripPrefix; p != "" && !cleanPrefix(p) {
		errs = append(errs, fmt.Errorf("%w: %q", ErrStripPrefix, p))
	}
	if c.MaxRanges < 0 {
		errs = append(errs, fmt.Errorf("%w: %d", ErrMaxRanges, c.MaxRanges))
	}
	return errors.Join(append(errs, c.errorPageProblems()...)...)
}

// errorPageProblems returns a problem for each error page whose status is
// not one the handler answers, whose name cannot be served, or whose file
// is not a regular file under Root.
func (c Config) errorPageProblems() []error {
	var errs []error
	for _, status := range slices.Sorted(maps.Keys(c.ErrorPages)) {
		name := c.ErrorPages[status]
		if !slices.Contains(errorStatuses[:], status) {
			errs = append(errs, fmt.Errorf("%w: status %d is not one of %v", ErrErrorPage, status, errorStatuses))
			continue
		}
		clean, dir, bad := cleanPath(name)
		if bad != 0 || dir || clean == "." {
			errs = append(errs, fmt.Errorf("%w: %d: %q is not the name of a file under the root", ErrErrorPage, status, name))
			continue
		}
		root, err := os.OpenRoot(c.Root)
		if err != nil {
			continue // reported as ErrNoRoot or ErrRoot
		}
		f, _, err := openRegular(root, clean)
		root.Close()
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: %d: %w", ErrErrorPage, status, err))
			continue
		}
		f.Close()
	}
	return errs
}

// errorPages returns a copy of the error pages, their names cleaned.
func (c Config) errorPages() map[int]string {
	if len(c.ErrorPages) == 0 {
		return nil
	}
	m := make(map[int]string, len(c.ErrorPages))
	for status, name := range c.ErrorPages {
		m[status], _, _ = cleanPath(name)
	}
	return m
}

// plainName reports whether name is a single, visible path element.
func plainName(name string) bool {
	return name != "" && name[0] != '.' && !strings.ContainsAny(name, "/\\\x00")
}

package static

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// DefaultIndex is the index file used when Config.Index is nil.
const DefaultIndex = "index.html"

// Errors returned by Config.Validate and New, wrapped with details.
var (
	ErrNoRoot   = errors.New("static: root is not set")
	ErrRoot     = errors.New("static: root is not a usable directory")
	ErrBadIndex = errors.New("static: index must be a plain file name")
)

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
	return errors.Join(errs...)
}

// plainName reports whether name is a single, visible path element.
func plainName(name string) bool {
	return name != "" && name[0] != '.' && !strings.ContainsAny(name, "/\\\x00")
}

package compress

import (
	"errors"
	"fmt"
	"mime"
	"strings"

	"github.com/maatproxy/maat/accept"
)

// Level trades CPU for size. Each encoding maps it to its own scale.
type Level int

const (
	// LevelDefault (the zero value): gzip 5, zstd's default speed, brotli 3
	// (as small as brotli 4 here, and a third faster).
	LevelDefault Level = iota
	// LevelFastest: gzip 1, zstd's fastest speed, brotli 1.
	LevelFastest
	// LevelBetter: gzip 7, zstd's better compression, brotli 5.
	LevelBetter
	// LevelBest: gzip 9, zstd's best compression, brotli 9 (brotli's 10
	// and 11 are too slow for responses compressed on the fly).
	LevelBest
)

// DefaultMinSize is the smallest response compressed when Config.MinSize
// is zero.
const DefaultMinSize = 1024

// MaxMinSize bounds Config.MinSize: the middleware holds up to MinSize
// bytes of each response while it decides.
const MaxMinSize = 1 << 20

// Encoding names, as they appear in Accept-Encoding and Content-Encoding.
const (
	Zstd   = accept.Zstd
	Brotli = accept.Brotli
	Gzip   = accept.Gzip
)

// ErrConfig is wrapped by every error Validate returns.
var ErrConfig = errors.New("compress: invalid config")

// defaultTypes are the media types compressed when Config.Types is empty:
// text, and the structured and script formats served as application/*,
// plus the image and font formats that are not compressed already.
var defaultTypes = [...]string{
	"text/*",
	"application/json", "application/ld+json", "application/manifest+json",
	"application/geo+json", "application/problem+json", "application/x-ndjson",
	"application/javascript", "application/x-javascript", "application/ecmascript",
	"application/xml", "application/xhtml+xml", "application/rss+xml",
	"application/atom+xml", "application/wasm", "application/toml",
	"application/yaml", "application/vnd.ms-fontobject",
	"image/svg+xml", "image/x-icon", "image/vnd.microsoft.icon", "image/bmp",
	"font/ttf", "font/otf", "font/collection",
}

var defaultEncodings = [...]string{Zstd, Brotli, Gzip}

// Config configures a Compressor. The zero Config is ready to use.
type Config struct {
	// Level is the compression level. If zero, LevelDefault.
	Level Level

	// MinSize is the smallest response, in bytes, that is compressed; a
	// response that is flushed before reaching it is compressed anyway.
	// If zero, DefaultMinSize is used; at most MaxMinSize.
	MinSize int

	// Types are the media types compressed, each "type/subtype" or
	// "type/*", without parameters, matched case-insensitively against the
	// response's Content-Type. If empty, text/* and the common JSON,
	// JavaScript, XML (RSS, Atom, SVG, XHTML), WebAssembly and uncompressed
	// font and icon types are.
	Types []string

	// Encodings are the content codings offered, in the server's order of
	// preference: any of "zstd", "br" and "gzip". If empty, all three in
	// that order.
	Encodings []string
}

// Validate reports every problem of c at once; each error wraps ErrConfig.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...))
	}
	if c.Level < LevelDefault || c.Level > LevelBest {
		bad("unknown level %d", c.Level)
	}
	if c.MinSize < 0 || c.MinSize > MaxMinSize {
		bad("min size %d is not within 0 and %d", c.MinSize, MaxMinSize)
	}
	for _, t := range c.Types {
		if !validType(t) {
			bad("type %q is not type/subtype or type/*", t)
		}
	}
	seen := make(map[string]bool, len(c.Encodings))
	for _, e := range c.Encodings {
		switch {
		case e != Zstd && e != Brotli && e != Gzip:
			bad("unknown encoding %q (want zstd, br or gzip)", e)
		case seen[e]:
			bad("encoding %q listed twice", e)
		}
		seen[e] = true
	}
	return errors.Join(errs...)
}

// validType reports whether t is "type/subtype" or "type/*" with no
// parameters.
func validType(t string) bool {
	if strings.ContainsAny(t, "; \t") {
		return false
	}
	mt, _, err := mime.ParseMediaType(t)
	if err != nil {
		return false
	}
	typ, sub, ok := strings.Cut(mt, "/")
	return ok && typ != "*" && typ != "" && sub != "" && (sub == "*" || !strings.Contains(sub, "*"))
}

func (c Config) minSize() int {
	if c.MinSize == 0 {
		return DefaultMinSize
	}
	return c.MinSize
}

func (c Config) types() []string {
	if len(c.Types) == 0 {
		return defaultTypes[:]
	}
	out := make([]string, len(c.Types))
	for i, t := range c.Types {
		out[i] = strings.ToLower(t)
	}
	return out
}

func (c Config) encodings() []string {
	if len(c.Encodings) == 0 {
		return defaultEncodings[:]
	}
	return append([]string(nil), c.Encodings...)
}

// matchType reports whether the media type of the Content-Type value ct is
// one of types (lowercase; "type/*" matches every subtype).
func matchType(types []string, ct string) bool {
	mt, _, _ := strings.Cut(ct, ";")
	mt = strings.TrimSpace(mt)
	for _, t := range types {
		if prefix, ok := strings.CutSuffix(t, "*"); ok {
			if len(mt) > len(prefix) && strings.EqualFold(mt[:len(prefix)], prefix) {
				return true
			}
		} else if strings.EqualFold(mt, t) {
			return true
		}
	}
	return false
}

package locales

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"sync"

	"github.com/nicksnyder/go-i18n/v2/i18n"
	"golang.org/x/text/language"
)

//go:embed messages/*.json
var files embed.FS

// ErrIncomplete reports a message file that lacks a message of the
// English file, or has one English does not.
var ErrIncomplete = errors.New("locales: incomplete message file")

// maxAcceptLanguage bounds the Accept-Language header we parse.
const maxAcceptLanguage = 512

// Catalog is the set of embedded message files with a language matcher. It
// is safe for concurrent use.
type Catalog struct {
	bundle  *i18n.Bundle
	tags    []language.Tag
	matcher language.Matcher

	// matched remembers Match's answers: parsing and matching an
	// Accept-Language header costs several µs, and a site sees the same
	// few headers over and over. Bounded: emptied when full.
	mu      sync.RWMutex
	matched map[matchKey]int // index into tags
}

type matchKey struct{ override, acceptLanguage string }

// maxMatched bounds Catalog.matched.
const maxMatched = 1024

// New loads every embedded message file and checks that each has exactly
// the message IDs of the English one.
func New() (*Catalog, error) {
	b := i18n.NewBundle(language.English)
	b.RegisterUnmarshalFunc("json", json.Unmarshal)
	names, err := fs.Glob(files, "messages/*.json")
	if err != nil {
		return nil, err
	}
	ids := make(map[string]map[string]bool, len(names))
	for _, name := range names {
		buf, err := files.ReadFile(name)
		if err != nil {
			return nil, err
		}
		mf, err := b.ParseMessageFileBytes(buf, path.Base(name))
		if err != nil {
			return nil, fmt.Errorf("locales: %s: %w", name, err)
		}
		set := make(map[string]bool, len(mf.Messages))
		for _, m := range mf.Messages {
			set[m.ID] = true
		}
		ids[mf.Tag.String()] = set
	}
	en := ids["en"]
	if en == nil {
		return nil, fmt.Errorf("%w: no English file", ErrIncomplete)
	}
	var errs []error
	for tag, set := range ids {
		for id := range en {
			if !set[id] {
				errs = append(errs, fmt.Errorf("%w: %s lacks %s", ErrIncomplete, tag, id))
			}
		}
		for id := range set {
			if !en[id] {
				errs = append(errs, fmt.Errorf("%w: %s has %s, which English does not", ErrIncomplete, tag, id))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	tags := b.LanguageTags() // English first: the matcher's fallback
	return &Catalog{bundle: b, tags: tags, matcher: language.NewMatcher(tags), matched: make(map[matchKey]int)}, nil
}

// Bundle returns the go-i18n bundle with every message.
func (c *Catalog) Bundle() *i18n.Bundle { return c.bundle }

// Tags returns the supported languages, English first.
func (c *Catalog) Tags() []language.Tag { return append([]language.Tag(nil), c.tags...) }

// Match chooses the language for a request: the override (a ?lang= value)
// when it names a supported language, else the best match for the
// Accept-Language header, else English. The result is one of Tags().
func (c *Catalog) Match(override, acceptLanguage string) language.Tag {
	k := matchKey{override, acceptLanguage}
	c.mu.RLock()
	i, ok := c.matched[k]
	c.mu.RUnlock()
	if !ok {
		i = c.match(override, acceptLanguage)
		c.mu.Lock()
		if len(c.matched) >= maxMatched {
			clear(c.matched)
		}
		c.matched[k] = i
		c.mu.Unlock()
	}
	return c.tags[i]
}

// match is Match without the memory; it returns an index into c.tags.
func (c *Catalog) match(override, acceptLanguage string) int {
	if override != "" && len(override) <= 35 {
		if t, err := language.Parse(override); err == nil {
			// The matcher rates English High for many languages it has no
			// better answer for; an override must name the language itself.
			_, i, conf := c.matcher.Match(t)
			want, _ := t.Base()
			got, _ := c.tags[i].Base()
			if got == want || (conf >= language.High && i != 0) {
				return i
			}
		}
	}
	if acceptLanguage == "" || len(acceptLanguage) > maxAcceptLanguage {
		return 0
	}
	prefs, _, err := language.ParseAcceptLanguage(acceptLanguage)
	if err != nil || len(prefs) == 0 {
		return 0
	}
	if _, i, conf := c.matcher.Match(prefs...); conf != language.No {
		return i
	}
	return 0
}

// rtl lists the base languages written right to left.
var rtl = [...]string{"ar", "he", "fa", "ur", "ps", "sd", "ug", "yi", "dv", "ckb"}

// Dir returns "rtl" for a language written right to left, else "ltr"
// (the package function Dir).
func (c *Catalog) Dir(t language.Tag) string { return Dir(t) }

// Dir returns "rtl" for a language written right to left, else "ltr".
func Dir(t language.Tag) string {
	base, _ := t.Base()
	b := base.String()
	for _, r := range rtl {
		if strings.EqualFold(b, r) {
			return "rtl"
		}
	}
	return "ltr"
}

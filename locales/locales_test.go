package locales

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"testing"

	"github.com/nicksnyder/go-i18n/v2/i18n"
	"golang.org/x/text/language"
)

func newCatalog(t *testing.T) *Catalog {
	t.Helper()
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// messageFiles reads every embedded file as ID → string or plural forms.
func messageFiles(t *testing.T) map[string]map[string]any {
	t.Helper()
	names, _ := fs.Glob(files, "messages/*.json")
	out := make(map[string]map[string]any)
	for _, name := range names {
		b, _ := files.ReadFile(name)
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[strings.TrimSuffix(path.Base(name), ".json")] = m
	}
	return out
}

func TestLanguages(t *testing.T) {
	t.Parallel()
	c := newCatalog(t)
	tags := c.Tags()
	if len(tags) < 30 {
		t.Errorf("%d languages, want at least 30", len(tags))
	}
	if tags[0] != language.English {
		t.Errorf("first tag %v, want en", tags[0])
	}
	have := make(map[string]bool)
	for _, tag := range tags {
		have[tag.String()] = true
	}
	for _, want := range []string{"en", "de", "ar", "he", "fa", "ja", "zh", "ru", "pl", "es", "fr"} {
		if !have[want] {
			t.Errorf("no %s", want)
		}
	}
}

// TestComplete: every locale has every key of English, with the same
// placeholders, and is actually translated.
func TestComplete(t *testing.T) {
	t.Parallel()
	all := messageFiles(t)
	en := all["en"]
	for lang, msgs := range all {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			if len(msgs) != len(en) {
				t.Errorf("%d messages, English has %d", len(msgs), len(en))
			}
			same := 0
			for id, want := range en {
				got, ok := msgs[id]
				if !ok {
					t.Errorf("lacks %s", id)
					continue
				}
				switch w := want.(type) {
				case string:
					g, ok := got.(string)
					if !ok || g == "" {
						t.Errorf("%s: not a plain string", id)
						continue
					}
					if strings.Count(g, "%s") != strings.Count(w, "%s") {
						t.Errorf("%s: placeholders differ: %q", id, g)
					}
					if g == w {
						same++
					}
				case map[string]any:
					g, ok := got.(map[string]any)
					if !ok {
						t.Errorf("%s: not plural", id)
						continue
					}
					other, _ := g["other"].(string)
					if !strings.Contains(other, "{{.Count}}") {
						t.Errorf("%s: other form lacks {{.Count}}: %q", id, other)
					}
				}
			}
			if lang != "en" && same > 4 {
				t.Errorf("%d messages identical to English: untranslated?", same)
			}
		})
	}
}

// TestPlural localizes the counted messages for counts that reach every
// CLDR plural category: go-i18n fails when a language lacks the form its
// rules choose.
func TestPlural(t *testing.T) {
	t.Parallel()
	c := newCatalog(t)
	counts := []int{0, 1, 2, 3, 4, 5, 11, 12, 21, 22, 25, 100, 101, 102, 111, 1000000}
	for _, tag := range c.Tags() {
		t.Run(tag.String(), func(t *testing.T) {
			t.Parallel()
			l := i18n.NewLocalizer(c.Bundle(), tag.String())
			for _, id := range []string{"ChallengeWait", "RateText"} {
				for _, n := range counts {
					s, got, err := l.LocalizeWithTag(&i18n.LocalizeConfig{MessageID: id, PluralCount: n, TemplateData: map[string]int{"Count": n}})
					if err != nil || got != tag || s == "" || strings.Contains(s, "{{") || strings.Contains(s, "<no value>") {
						t.Errorf("%s(%d) = %q in %v: %v", id, n, s, got, err)
					}
				}
			}
		})
	}
	en := i18n.NewLocalizer(c.Bundle(), "en")
	for n, want := range map[int]string{1: "Please wait 1 second.", 5: "Please wait 5 seconds."} {
		s, _ := en.Localize(&i18n.LocalizeConfig{MessageID: "ChallengeWait", PluralCount: n, TemplateData: map[string]int{"Count": n}})
		if !strings.HasPrefix(s, want) {
			t.Errorf("en ChallengeWait(%d) = %q", n, s)
		}
	}
	ru := i18n.NewLocalizer(c.Bundle(), "ru")
	for n, want := range map[int]string{1: "1 секунду", 3: "3 секунды", 5: "5 секунд", 21: "21 секунду"} {
		if s, _ := ru.Localize(&i18n.LocalizeConfig{MessageID: "ChallengeWait", PluralCount: n, TemplateData: map[string]int{"Count": n}}); !strings.Contains(s, want) {
			t.Errorf("ru ChallengeWait(%d) = %q, want %q", n, s, want)
		}
	}
}

func TestMatch(t *testing.T) {
	t.Parallel()
	c := newCatalog(t)
	tests := []struct {
		name, override, accept, want string
	}{
		{"empty", "", "", "en"},
		{"german", "", "de-DE,de;q=0.9,en;q=0.8", "de"},
		{"swiss french", "", "fr-CH, fr;q=0.9, en;q=0.8, de;q=0.7", "fr"},
		{"brazilian", "", "pt-BR", "pt"},
		{"simplified chinese", "", "zh-CN,zh;q=0.9", "zh"},
		{"arabic", "", "ar-EG", "ar"},
		{"hebrew", "", "he-IL,he;q=0.9", "he"},
		{"persian", "", "fa-IR", "fa"},
		{"japanese", "", "ja", "ja"},
		{"q ordering", "", "en;q=0.1, ja;q=0.9", "ja"},
		{"unsupported then supported", "", "sw, ko;q=0.5", "ko"},
		{"unsupported only", "", "sw-KE", "en"},
		{"wildcard", "", "*", "en"},
		{"garbage", "", ";;;,,q=x", "en"},
		{"too long", "", strings.Repeat("de-DE,", 200), "en"},
		{"override wins", "ar", "de-DE", "ar"},
		{"override region", "pt-BR", "de", "pt"},
		{"override unsupported", "tlh", "de", "de"},
		{"override garbage", "<script>", "ja", "ja"},
		{"norwegian", "", "no", "nb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for range 2 { // computed, then remembered
				if got := c.Match(tt.override, tt.accept); got.String() != tt.want {
					t.Errorf("Match(%q, %q) = %v, want %s", tt.override, tt.accept, got, tt.want)
				}
			}
		})
	}
}

// TestMatchMemoryBounded sends many distinct headers: the remembered
// answers stay bounded and every answer stays right.
func TestMatchMemoryBounded(t *testing.T) {
	t.Parallel()
	c := newCatalog(t)
	for i := range 3 * maxMatched {
		accept := fmt.Sprintf("x-%d, ja;q=0.%d", i, 1+i%9)
		if i%2 == 0 {
			accept = fmt.Sprintf("de-DE;q=0.%d, x-%d", 1+i%9, i)
		}
		want := map[bool]string{true: "de", false: "ja"}[i%2 == 0]
		if got := c.Match("", accept); got.String() != want {
			t.Fatalf("Match(%q) = %v, want %s", accept, got, want)
		}
		c.mu.RLock()
		n := len(c.matched)
		c.mu.RUnlock()
		if n > maxMatched {
			t.Fatalf("%d answers remembered, bound %d", n, maxMatched)
		}
	}
}

func TestDir(t *testing.T) {
	t.Parallel()
	for tag, want := range map[string]string{"ar": "rtl", "he": "rtl", "fa": "rtl", "ar-EG": "rtl", "en": "ltr", "ja": "ltr", "tr": "ltr"} {
		if got := Dir(language.MustParse(tag)); got != want {
			t.Errorf("Dir(%s) = %s, want %s", tag, got, want)
		}
	}
}

func BenchmarkMatch(b *testing.B) {
	c, err := New()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		c.Match("", "de-DE,de;q=0.9,en;q=0.8")
	}
}

// BenchmarkMatchFirst is a header's first Match: parsed and matched.
func BenchmarkMatchFirst(b *testing.B) {
	c, err := New()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		c.match("", "de-DE,de;q=0.9,en;q=0.8")
	}
}

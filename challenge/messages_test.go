package challenge

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nicksnyder/go-i18n/v2/i18n"
	"golang.org/x/text/language"
)

// fileMessages reads the locales package's message files from disk (a leaf
// does not import another leaf, not even in tests).
type fileMessages struct {
	bundle  *i18n.Bundle
	tags    []language.Tag
	matcher language.Matcher
}

func (m *fileMessages) Bundle() *i18n.Bundle { return m.bundle }

// Dir knows the right-to-left languages of the locale files; the real list
// is the locales package's.
func (m *fileMessages) Dir(tag language.Tag) string {
	switch base, _ := tag.Base(); base.String() {
	case "ar", "he", "fa", "ur":
		return "rtl"
	}
	return "ltr"
}

func (m *fileMessages) Match(override, accept string) language.Tag {
	if t, err := language.Parse(override); err == nil {
		if _, i, _ := m.matcher.Match(t); i != 0 || t == language.English {
			return m.tags[i]
		}
	}
	prefs, _, _ := language.ParseAcceptLanguage(accept)
	_, i, _ := m.matcher.Match(prefs...)
	return m.tags[i]
}

func localeFiles(t testing.TB) []string {
	t.Helper()
	files, _ := filepath.Glob("../locales/messages/*.json")
	if len(files) == 0 {
		t.Fatal("no locale files in ../locales/messages")
	}
	return files
}

func loadMessages(t testing.TB) *fileMessages {
	t.Helper()
	b := i18n.NewBundle(language.English)
	b.RegisterUnmarshalFunc("json", json.Unmarshal)
	for _, f := range localeFiles(t) {
		if _, err := b.LoadMessageFile(f); err != nil {
			t.Fatal(err)
		}
	}
	return &fileMessages{bundle: b, tags: b.LanguageTags(), matcher: language.NewMatcher(b.LanguageTags())}
}

// TestMessageIDs: the English locale file has exactly the messages the
// pages use, plural where they count.
func TestMessageIDs(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../locales/messages/en.json")
	if err != nil {
		t.Fatal(err)
	}
	var en map[string]any
	if err := json.Unmarshal(b, &en); err != nil {
		t.Fatal(err)
	}
	ids := MessageIDs()
	for id, plural := range ids {
		v, ok := en[id]
		if !ok {
			t.Errorf("en.json lacks %s", id)
			continue
		}
		if _, isMap := v.(map[string]any); isMap != plural {
			t.Errorf("%s: plural %v in en.json, %v in the pages", id, isMap, plural)
		}
	}
	for id := range en {
		if _, ok := ids[id]; !ok {
			t.Errorf("en.json has %s, which no page uses", id)
		}
	}
	for i := range defaultMessages {
		m := &defaultMessages[i]
		var want string
		if m.One != "" {
			want = en[m.ID].(map[string]any)["other"].(string)
		} else {
			want, _ = en[m.ID].(string)
		}
		if want != m.Other {
			t.Errorf("%s: default %q differs from en.json %q", m.ID, m.Other, want)
		}
	}
}

func TestLocalizedPages(t *testing.T) {
	t.Parallel()
	msgs := loadMessages(t)
	c, _ := newTest(t, func(cfg *Config) { cfg.Messages = msgs })
	tests := []struct {
		name, target, accept string
		want                 []string
	}{
		{"english", "/", "", []string{`lang="en"`, `dir="ltr"`, "One moment, please"}},
		{"german", "/", "de-DE,de;q=0.9", []string{`lang="de"`, "Einen Moment, bitte", "Bitte warten Sie 2 Sekunden"}},
		{"arabic", "/", "ar", []string{`lang="ar"`, `dir="rtl"`, "لحظة من فضلك", "ثانيتين"}},
		{"hebrew", "/", "he-IL", []string{`dir="rtl"`, "שתי שניות"}},
		{"japanese override", "/?lang=ja", "de", []string{`lang="ja"`, "少々お待ちください"}},
		{"unsupported", "/", "sw", []string{`lang="en"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(http.MethodGet, "https://example.org"+tt.target, nil)
			r.Header.Set("Accept-Language", tt.accept)
			w := httptest.NewRecorder()
			c.Challenge(w, r, alice, Spec{Bits: 16, Wait: 2 * time.Second}, "req")
			for _, s := range tt.want {
				if !strings.Contains(w.Body.String(), s) {
					t.Errorf("page lacks %q", s)
				}
			}
		})
	}
	r := httptest.NewRequest(http.MethodGet, "https://example.org/", nil)
	r.Header.Set("Accept-Language", "ru")
	w := httptest.NewRecorder()
	c.RateLimited(w, r, "req", 5*1e9)
	if !strings.Contains(w.Body.String(), "5 секунд.") || !strings.Contains(w.Body.String(), "Слишком много запросов") {
		t.Errorf("Russian rate page: %s", w.Body)
	}
}

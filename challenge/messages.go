package challenge

import (
	"strconv"
	"strings"
	"sync"

	"github.com/nicksnyder/go-i18n/v2/i18n"
	"golang.org/x/text/language"
)

// Messages supplies localized text; locales.Catalog implements it.
type Messages interface {
	// Bundle holds every message, in every language, English the default.
	Bundle() *i18n.Bundle
	// Match chooses a language among Bundle().LanguageTags() from the
	// ?lang= override (which wins when supported) and the Accept-Language
	// header.
	Match(override, acceptLanguage string) language.Tag
	// Dir returns the text direction of a language: "rtl" or "ltr".
	Dir(tag language.Tag) string
}

// defaultMessages are the English texts of every message the pages use,
// by ID. The locales package holds the same IDs in every language.
var defaultMessages = [...]i18n.Message{
	{ID: "ChallengeTitle", Other: "One moment, please"},
	{ID: "ChallengeIntro", Other: "This site asks your browser to do a small calculation before it lets you in. It protects the site from automated scraping. You don't need to do anything."},
	{ID: "ChallengeWaitIntro", Other: "This site asks visitors to wait a moment before it lets them in. It protects the site from automated scraping. You don't need to do anything."},
	{ID: "ChallengeProgress", Other: "Progress"},
	{ID: "ChallengeWorking", Other: "Calculating…"},
	{ID: "ChallengeSpeed", Other: "Calculations per second: %s"},
	{ID: "ChallengeETA", Other: "Time left: about %s"},
	{ID: "ChallengeDone", Other: "Done! Taking you to the site…"},
	{ID: "ChallengeSlow", Other: "This is taking a while on this device. Switching to a short wait instead…"},
	{ID: "ChallengeSlowNoWait", Other: "This is taking a while on this device. Please keep this page open: it continues by itself."},
	{ID: "ChallengeCookies", Other: "Your browser blocks cookies for this site, so the check cannot be remembered. Allow cookies for this site, then reload the page."},
	{ID: "ChallengeNoScript", Other: "JavaScript is turned off. That's fine: you will be let in automatically after a short wait."},
	{ID: "ChallengeNeedsJS", Other: "This site needs JavaScript to let you in: your browser does a small calculation that protects the site from automated scraping. Please turn on JavaScript for this site, then reload the page."},
	{ID: "ChallengeWait", One: "Please wait {{.Count}} second. The page continues by itself.", Other: "Please wait {{.Count}} seconds. The page continues by itself."},
	{ID: "ChallengeContinue", Other: "Continue"},
	{ID: "ChallengeWhy", Other: "Why am I seeing this?"},
	{ID: "ChallengeWhyText", Other: "Automated programs copy websites on a scale that can take them down. A short calculation costs one visitor almost nothing but costs thousands of bots a lot. Afterwards your browser keeps a cookie, so you will not be asked again for a while."},
	{ID: "ChallengeAPI", Other: "This request needs a browser check first. Reload the page to continue."},
	{ID: "PassFailTitle", Other: "The check did not go through"},
	{ID: "PassFailText", Other: "Your browser's answer to the check could not be accepted. This happens when the page was open for a long time, when your network changed, or when the page was opened again from the history. Go back to the page to get a fresh check."},
	{ID: "PassFailBack", Other: "Back to the page"},
	{ID: "DenyTitle", Other: "Access denied"},
	{ID: "DenyText", Other: "This request was blocked by the site's protection. If you think this is a mistake, contact the site and quote the request ID below."},
	{ID: "RateTitle", Other: "Too many requests"},
	{ID: "RateText", One: "You sent many requests in a short time. Please try again in {{.Count}} second.", Other: "You sent many requests in a short time. Please try again in {{.Count}} seconds."},
	{ID: "ErrorTitle", Other: "The site is not responding"},
	{ID: "Error502", Other: "The site's server sent an invalid answer. This is not a problem with your browser. Please try again in a moment."},
	{ID: "Error503", Other: "The site is temporarily unavailable. This is not a problem with your browser. Please try again in a moment."},
	{ID: "Error504", Other: "The site's server took too long to answer. This is not a problem with your browser. Please try again in a moment."},
	{ID: "TryAgain", Other: "Try again"},
	{ID: "RequestID", Other: "Request ID"},
	{ID: "ReasonCode", Other: "Reason"},
	{ID: "Contact", Other: "Contact"},
	{ID: "SitePolicy", Other: "Site policy"},
	{ID: "ProtectedBy", Other: "Protected by Maat"},
}

// MessageIDs returns the IDs of every message the pages use, and whether
// each takes a plural count.
func MessageIDs() map[string]bool {
	out := make(map[string]bool, len(defaultMessages))
	for _, m := range defaultMessages {
		out[m.ID] = m.One != ""
	}
	return out
}

// lang is one language's precomputed page text.
type lang struct {
	tag       language.Tag
	code      string // BCP 47, for lang=""
	dir       string // "ltr" or "rtl"
	t         map[string]string
	localizer *i18n.Localizer
	plurals   sync.Map // pluralKey → string
}

type pluralKey struct {
	id string
	n  int
}

// plural localizes a counted message, remembering small counts.
func (l *lang) plural(id string, n int) string {
	if n < 0 || n > 3600 {
		return l.localizePlural(id, n)
	}
	k := pluralKey{id, n}
	if v, ok := l.plurals.Load(k); ok {
		return v.(string)
	}
	s := l.localizePlural(id, n)
	l.plurals.Store(k, s)
	return s
}

func (l *lang) localizePlural(id string, n int) string {
	for i := range defaultMessages {
		m := &defaultMessages[i]
		if m.ID != id {
			continue
		}
		s, err := l.localizer.Localize(&i18n.LocalizeConfig{DefaultMessage: m, PluralCount: n, TemplateData: map[string]int{"Count": n}})
		if err != nil && s == "" {
			return strings.ReplaceAll(m.Other, "{{.Count}}", strconv.Itoa(n))
		}
		return s
	}
	return ""
}

// newLangs localizes every message in every language of msgs.
func newLangs(msgs Messages) (map[language.Tag]*lang, *lang) {
	var bundle *i18n.Bundle
	if msgs != nil {
		bundle = msgs.Bundle()
	}
	if bundle == nil {
		bundle = i18n.NewBundle(language.English)
	}
	out := make(map[language.Tag]*lang)
	for _, tag := range bundle.LanguageTags() {
		l := &lang{tag: tag, code: tag.String(), dir: "ltr", t: make(map[string]string, len(defaultMessages))}
		if msgs != nil {
			l.dir = msgs.Dir(tag)
		}
		l.localizer = i18n.NewLocalizer(bundle, tag.String())
		for i := range defaultMessages {
			m := &defaultMessages[i]
			if m.One != "" {
				continue
			}
			s, _ := l.localizer.Localize(&i18n.LocalizeConfig{DefaultMessage: m})
			if s == "" {
				s = m.Other
			}
			l.t[m.ID] = s
		}
		out[tag] = l
	}
	en := out[language.English]
	if en == nil {
		for _, l := range out {
			en = l
			break
		}
	}
	return out, en
}

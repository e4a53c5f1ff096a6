package locales_test

import (
	"fmt"

	"github.com/maatproxy/maat/locales"
	"github.com/nicksnyder/go-i18n/v2/i18n"
)

func Example() {
	c, err := locales.New()
	if err != nil {
		panic(err)
	}
	tag := c.Match("", "de-CH,de;q=0.9,en;q=0.5")
	l := i18n.NewLocalizer(c.Bundle(), tag.String())
	s, _ := l.Localize(&i18n.LocalizeConfig{MessageID: "ChallengeWait", PluralCount: 3, TemplateData: map[string]int{"Count": 3}})
	fmt.Println(tag, locales.Dir(tag))
	fmt.Println(s)
	fmt.Println(locales.Dir(c.Match("ar", "")))
	// Output:
	// de ltr
	// Bitte warten Sie 3 Sekunden. Die Seite geht von selbst weiter.
	// rtl
}

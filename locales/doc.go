// Package locales holds the visitor-facing messages of the edge in every
// supported language, as go-i18n message files (JSON, CLDR plural
// categories: Unicode TR35 Part 3 "Plural Rules") embedded in the binary,
// and negotiates the language of a request from a ?lang= override and the
// Accept-Language header (RFC 9110 §12.5.4, BCP 47 tags per RFC 5646,
// matched with golang.org/x/text/language).
//
// Every file carries every message ID that the English file does; English
// is the fallback. Arabic, Hebrew and Persian are written right to left.
package locales

package policy

import (
	"regexp"
	"testing"
)

func TestPrefilterAgreesWithRegexp(t *testing.T) {
	t.Parallel()
	// prefilterRegexps and prefilterInputs are checked against each other: the
	// prefiltered match must equal regexp's.
	prefilterRegexps := []string{
		`(?i)gptbot|claudebot|ccbot`, `GPTBot|ClaudeBot`, `^curl/`, `^/robots\.txt$`, `^/robots.txt$`,
		`(?i)kelvin`, `(?i)k`, `Chrome/1[0-9]{2}`, `(ab){2,}c`, `x*y`, `a|`, `(?i:bot|crawler)`,
		`(?i)Tiny Tiny RSS|Feeder/`, `Mozilla|Opera`, `\.ext9$`, `(?i)café`, `(?:foo)+bar`, `[Bb]ot`,
	}

	prefilterInputs := []string{
		"", "curl/8.5.0", "xcurl/", "Mozilla/5.0 GPTBot/1.0", "mozilla gptbot", "GPTBOT", "ClaudeBot",
		"/robots.txt", "/robotsXtxt", "/robots.txt/x", "\u212aelvin", "KELVIN", "Chrome/131.0", "ababc",
		"abc", "y", "Bot", "bot", "Crawler", "tiny tiny rss", "Opera/9", "/a.ext9", "CAFÉ", "café",
		"foofoobar", "Feeder/1",
	}

	p := newPrefilter()
	ms := make([]*regexMatcher, len(prefilterRegexps))
	for i, s := range prefilterRegexps {
		m, err := p.compile(s)
		if err != nil {
			t.Fatal(err)
		}
		ms[i] = m
	}
	for _, in := range prefilterInputs {
		var found litBits
		var sum uint64
		all := p.scan(in, &found, &sum)
		for i, m := range ms {
			want := regexp.MustCompile(prefilterRegexps[i]).MatchString(in)
			if got := m.match(in, &found, sum, all); got != want {
				t.Errorf("%q on %q: prefiltered %v, regexp %v", prefilterRegexps[i], in, got, want)
			}
		}
	}
}

func TestLiteralSet(t *testing.T) {
	t.Parallel()
	tests := []struct {
		re    string
		lits  int // -1: no prefilter
		exact bool
	}{
		{`(?i)gptbot|claudebot`, 2, true},
		{`GPTBot|ClaudeBot`, 2, false}, // case-sensitive: the regexp confirms
		{`^curl/`, 1, false},
		{`(?i)k`, -1, false},
		{`x*y`, -1, false},
		{`(?i)café`, -1, false},
		{`Chrome/1[0-9]{2}`, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.re, func(t *testing.T) {
			t.Parallel()
			m, err := newPrefilter().compile(tt.re)
			if err != nil {
				t.Fatal(err)
			}
			n := len(m.lits)
			if m.lits == nil {
				n = -1
			}
			if n != tt.lits || m.exact != tt.exact {
				t.Errorf("lits %d exact %v, want %d %v", n, m.exact, tt.lits, tt.exact)
			}
		})
	}
}

func TestPrefilterCapacity(t *testing.T) {
	t.Parallel()
	p := newPrefilter()
	for i := range maxLiterals {
		if _, ok := p.add(string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676%26))); !ok {
			t.Fatalf("add %d failed", i)
		}
	}
	m, err := p.compile(`(?i)onemoreliteral`)
	if err != nil {
		t.Fatal(err)
	}
	if m.lits != nil {
		t.Error("a regexp beyond capacity got a prefilter")
	}
	var found litBits
	var sum uint64
	all := p.scan("x onemoreliteral", &found, &sum)
	if !m.match("x onemoreliteral", &found, sum, all) {
		t.Error("a regexp beyond capacity does not match")
	}
}

package policy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// robotsGroup is one group of a robots.txt file (RFC 9309 section 2.1).
type robotsGroup struct {
	agents     []string
	rules      []robotsRule
	crawlDelay float64
}

type robotsRule struct {
	allow   bool
	pattern string
}

// maxRobotsBytes bounds the robots.txt read (RFC 9309 section 2.5 asks
// crawlers to read at least 500 KiB).
const maxRobotsBytes = 1 << 20

// parseRobots reads the groups of a robots.txt file. Lines other than
// user-agent, allow, disallow and crawl-delay are ignored, as RFC 9309
// says of unknown records.
func parseRobots(r io.Reader) ([]*robotsGroup, error) {
	var groups []*robotsGroup
	var cur *robotsGroup
	inAgents := false
	sc := bufio.NewScanner(io.LimitReader(r, maxRobotsBytes))
	sc.Buffer(make([]byte, 0, 4096), maxRobotsBytes)
	for sc.Scan() {
		line, _, _ := strings.Cut(strings.ToValidUTF8(sc.Text(), ""), "#")
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		key = strings.ToLower(strings.TrimSpace(key))
		val = strings.TrimSpace(val)
		switch key {
		case "user-agent":
			if !inAgents || cur == nil {
				cur = &robotsGroup{}
				groups = append(groups, cur)
			}
			inAgents = true
			if val != "" {
				cur.agents = append(cur.agents, val)
			}
		case "allow", "disallow":
			inAgents = false
			if cur == nil || val == "" {
				continue
			}
			cur.rules = append(cur.rules, robotsRule{allow: key == "allow", pattern: val})
		case "crawl-delay":
			inAgents = false
			if cur == nil {
				continue
			}
			if d, err := strconv.ParseFloat(val, 64); err == nil && d > 0 {
				cur.crawlDelay = d
			}
		}
	}
	return groups, sc.Err()
}

// robotsPathRegex turns a robots.txt path pattern into a regular expression:
// "*" matches any characters and a final "$" anchors the end (RFC 9309
// section 2.2.3). The pattern is percent-decoded first, as the paths the
// policy sees are.
func robotsPathRegex(p string) string {
	if d, err := url.PathUnescape(p); err == nil {
		p = d
	}
	var b strings.Builder
	b.WriteString("^")
	end := strings.HasSuffix(p, "$")
	p = strings.TrimSuffix(p, "$")
	for i, part := range strings.Split(p, "*") {
		if i > 0 {
			b.WriteString(".*")
		}
		b.WriteString(regexp.QuoteMeta(part))
	}
	if end {
		b.WriteString("$")
	}
	return b.String()
}

// agentsRegex matches the User-Agents that carry one of the product
// tokens, case-insensitively (RFC 9309 section 2.2.1), as whole tokens: a
// group for "Fetch" is not one for node-fetch or FeedFetcher. A token that
// ends in "*" matches as a prefix.
func agentsRegex(agents []string) string {
	const tokenChar = `[^a-z0-9_-]`
	var whole, prefix []string
	for _, a := range agents {
		if p, ok := strings.CutSuffix(a, "*"); ok {
			prefix = append(prefix, regexp.QuoteMeta(p))
		} else {
			whole = append(whole, regexp.QuoteMeta(a))
		}
	}
	var alts []string
	if len(whole) > 0 {
		alts = append(alts, "(?:"+strings.Join(whole, "|")+")(?:$|"+tokenChar+")")
	}
	alts = append(alts, prefix...)
	if len(alts) == 1 && len(whole) > 0 {
		return "(?i)(?:^|" + tokenChar + ")" + alts[0]
	}
	return "(?i)(?:^|" + tokenChar + ")(?:" + strings.Join(alts, "|") + ")"
}

var nonName = regexp.MustCompile(`[^a-z0-9]+`)

func ruleSlug(agents []string) string {
	s := strings.Trim(nonName.ReplaceAllString(strings.ToLower(strings.Join(agents, "-")), "-"), "-")
	if s == "" {
		s = "agent"
	}
	if len(s) > 40 {
		s = strings.Trim(s[:40], "-")
	}
	return s
}

// RobotsOptions tune RobotsToPolicyWith.
type RobotsOptions struct {
	// DisallowHonestClients applies the Disallow lines of the "*" group to
	// honest clients too: git, curl, wget, HTTP libraries, feed readers,
	// Thunderbird, uptime monitors and link previewers (the built-in lists
	// honest-clients, monitors and link-previews). If false (the default),
	// they stay allowed on disallowed paths: robots.txt speaks to crawlers,
	// and a forge that disallows /*/*.git still serves git clone.
	DisallowHonestClients bool
}

// RobotsToPolicy is RobotsToPolicyWith with the zero RobotsOptions.
func RobotsToPolicy(r io.Reader) ([]byte, error) { return RobotsToPolicyWith(r, RobotsOptions{}) }

// RobotsToPolicyWith converts a robots.txt file (RFC 9309) into a policy
// file that extends Maat's default policy (its last rule imports
// (builtin)/default.yaml) and says in its header comment what it did:
//
//   - robots.txt itself stays readable by everyone, and a User-Agent that
//     claims a search crawler from an address that is not the crawler's is
//     denied first (fake_crawler);
//   - for each named User-agent group, Disallow denies that agent those
//     paths (DENY) and Crawl-delay becomes a RATE rule (one request per
//     delay per client network);
//   - an Allow line at least as long as a Disallow (RFC 9309's longest
//     match) exempts its paths from that Disallow's rule, so that they go
//     on to the default policy rather than being allowed outright;
//   - the "*" group's Disallow challenges those paths (CHALLENGE), so that
//     people still reach them, after the well-known paths, icons and feeds
//     and, unless o.DisallowHonestClients, after the honest clients; its
//     Crawl-delay is left out (browsers fetch many resources at once);
//   - patterns with a query ("?") are left out of Disallow (policy rules
//     match paths), and cut at the "?" in Allow.
func RobotsToPolicyWith(r io.Reader, o RobotsOptions) ([]byte, error) {
	groups, err := parseRobots(r)
	if err != nil {
		return nil, fmt.Errorf("policy: robots.txt: %w", err)
	}
	c := robotsConverter{counts: map[string]int{}}
	star := &robotsGroup{}
	var named []any
	for _, g := range groups {
		var agents []string
		for _, a := range g.agents {
			if a != "*" {
				agents = append(agents, a)
			}
		}
		if len(agents) < len(g.agents) {
			star.rules = append(star.rules, g.rules...)
			star.crawlDelay = max(star.crawlDelay, g.crawlDelay)
		}
		if len(agents) > 0 {
			named = append(named, c.groupRules(g, agents, "DENY")...)
		}
	}
	starRules := c.groupRules(star, nil, "CHALLENGE")
	bots := []any{
		fileRule{Name: "robots-txt", PathRegex: ptr(`^/robots\.txt$`), Action: "ALLOW"},
		fileRule{Name: "robots-fake-crawler", Signal: stringList{"fake_crawler"}, Action: "DENY"},
	}
	bots = append(bots, named...)
	if len(starRules) > 0 {
		bots = append(bots, importOf("keep-internet-working.yaml"))
		if !o.DisallowHonestClients {
			bots = append(bots, importOf("honest-clients.yaml"), importOf("monitors.yaml"), importOf("link-previews.yaml"))
		}
		bots = append(bots, starRules...)
	}
	bots = append(bots, map[string]string{"import": DefaultName})

	var buf bytes.Buffer
	c.header(&buf, len(named), len(starRules), star.crawlDelay, o)
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(map[string]any{"bots": bots}); err != nil {
		return nil, fmt.Errorf("policy: robots.txt: %w", err)
	}
	return buf.Bytes(), enc.Close()
}

func ptr(s string) *string { return &s }

// overlap reports whether two robots.txt patterns can match one path:
// one's literal start is a prefix of the other's.
func overlap(a, b string) bool {
	a, _, _ = strings.Cut(strings.TrimSuffix(a, "$"), "*")
	b, _, _ = strings.Cut(strings.TrimSuffix(b, "$"), "*")
	return strings.HasPrefix(a, b) || strings.HasPrefix(b, a)
}

func rules(n int) string {
	if n == 1 {
		return "1 rule"
	}
	return strconv.Itoa(n) + " rules"
}

func importOf(list string) map[string]string {
	return map[string]string{"import": builtinPrefix + list}
}

// robotsConverter numbers rules and counts what it left out.
type robotsConverter struct {
	counts  map[string]int // per rule slug and kind
	queries int            // Disallow lines with a query, left out
}

func (c *robotsConverter) header(buf *bytes.Buffer, named, star int, starDelay float64, o RobotsOptions) {
	buf.WriteString("# Generated by edge robots2policy from robots.txt (RFC 9309). What it did:\n")
	buf.WriteString("# - extends Maat's default policy: the last rule imports (builtin)/default.yaml,\n")
	buf.WriteString("#   whose rules, signals and thresholds decide what robots.txt does not mention;\n")
	buf.WriteString("# - /robots.txt stays readable by everyone, and a User-Agent that claims a search\n")
	buf.WriteString("#   crawler from an address that is not the crawler's is denied (fake_crawler);\n")
	fmt.Fprintf(buf, "# - %s for named User-agent groups: Disallow denies that agent (DENY),\n", rules(named))
	buf.WriteString("#   Crawl-delay limits it (RATE);\n")
	if star == 0 {
		buf.WriteString("# - robots.txt disallows nothing for User-agent \"*\": the default policy decides\n")
		buf.WriteString("#   for everyone it does not name;\n")
	} else {
		fmt.Fprintf(buf, "# - %s for User-agent \"*\": Disallow challenges (CHALLENGE), so people still\n", rules(star))
		buf.WriteString("#   reach those paths; well-known paths, icons and feeds stay open;\n")
		if o.DisallowHonestClients {
			buf.WriteString("# - honest clients (git, curl, feed readers, monitors, link previewers) are\n")
			buf.WriteString("#   challenged on disallowed paths like everyone, as asked (DisallowHonestClients);\n")
		} else {
			buf.WriteString("# - honest clients (git, curl, feed readers, monitors, link previewers: the built-in\n")
			buf.WriteString("#   lists honest-clients, monitors, link-previews) stay allowed on disallowed paths,\n")
			buf.WriteString("#   because robots.txt speaks to crawlers;\n")
		}
	}
	buf.WriteString("# - an Allow at least as long as a Disallow (RFC 9309's longest match) exempts its\n")
	buf.WriteString("#   paths from that rule (expression:): they go on to the default policy;\n")
	if starDelay > 0 {
		fmt.Fprintf(buf, "# - the Crawl-delay of %g s for \"*\" was left out: browsers fetch many resources at once;\n", starDelay)
	}
	if c.queries > 0 {
		fmt.Fprintf(buf, "# - %d Disallow line(s) with a query (\"?\") left out: policy rules match paths;\n", c.queries)
	}
	buf.WriteString("# Edit the rules below, or import this file from your own policy.\n")
}

// groupRules turns one group into rules; agents nil means every agent.
// Each Disallow becomes a rule with the given action; the Allow lines at
// least as long (RFC 9309 section 2.2.2: the longest match wins, Allow on
// a tie) are exempted from it with an expression, so that an exempted path
// goes on to the default policy instead of being allowed outright.
func (c *robotsConverter) groupRules(g *robotsGroup, agents []string, disallow string) []any {
	var uaRe *string
	slug := "all"
	if agents != nil {
		s := agentsRegex(agents)
		uaRe, slug = &s, ruleSlug(agents)
	}
	var allows []string // patterns, without a query
	for _, rr := range g.rules {
		if rr.allow {
			p, _, _ := strings.Cut(rr.pattern, "?")
			allows = append(allows, p)
		}
	}
	var out []any
	seen := map[string]bool{}
	for _, rr := range g.rules {
		if rr.allow {
			continue
		}
		if strings.Contains(rr.pattern, "?") {
			c.queries++
			continue
		}
		re := robotsPathRegex(rr.pattern)
		if seen[re] {
			continue
		}
		seen[re] = true
		c.counts[slug]++
		fr := fileRule{
			Name:           fmt.Sprintf("robots-%s-disallow-%d", slug, c.counts[slug]),
			UserAgentRegex: uaRe,
			PathRegex:      &re,
			Action:         disallow,
		}
		var except []string
		for _, a := range allows {
			if len(a) >= len(rr.pattern) && overlap(a, rr.pattern) && !slices.Contains(except, robotsPathRegex(a)) {
				except = append(except, robotsPathRegex(a))
			}
		}
		if len(except) > 0 {
			terms := make([]string, len(except))
			for i, e := range except {
				terms[i] = "path.matches(" + strconv.Quote(e) + ")"
			}
			fr.Expression = &exprOrList{Expr: "!(" + strings.Join(terms, " || ") + ")"}
		}
		out = append(out, fr)
	}
	if g.crawlDelay > 0 && agents != nil {
		c.counts[slug+" delay"]++
		name := "robots-" + slug + "-crawl-delay"
		if n := c.counts[slug+" delay"]; n > 1 {
			name += "-" + strconv.Itoa(n)
		}
		out = append(out, fileRule{
			Name:           name,
			UserAgentRegex: uaRe,
			Action:         "RATE",
			Rate:           &fileRate{Key: "ip", PerSecond: 1 / g.crawlDelay, Burst: 1},
		})
	}
	return out
}

// Package policy turns what the edge knows about a request into a decision:
// ALLOW, DENY (optionally rerouted), CHALLENGE (with an algorithm and a
// difficulty in bits), RATE (a token-bucket key, rate and burst) or DIVERT
// (to a tarpit target).
//
// # Policy files
//
// A policy file is YAML or JSON in the spirit of Anubis's policy files
// (https://anubis.techaro.lol/docs/admin/policies; the format of
// TecharoHQ/anubis data/botPolicies.yaml and lib/config), so that Anubis
// users can bring theirs:
//
//	bots:                                   # ordered rules
//	  - name: ai-crawlers
//	    user_agent_regex: (?i)GPTBot|ClaudeBot
//	    action: DIVERT                      # to a divert: target of edge.yaml
//	    divert_to: tarpit
//	  - name: api
//	    path_regex: ^/api/
//	    headers_regex: { Accept: json }
//	    remote_addresses: [203.0.113.0/24]
//	    asns: { match: [64500] }            # needs geo.asn_db
//	    geoip: { countries: [NL, BE] }      # needs geo.country_db
//	    expression: 'method == "POST" && ja4.startsWith("t13") && asn != 0'   # CEL
//	    ja4: ["t13d1516h2_*"]               # exact, or a prefix ending in *
//	    hfp: [h216_6f1c2d9a3b4e]
//	    h2fp: ["1:65536;2:0;4:6291456*"]
//	    client_family: [chrome, edge, ""]   # "" = unknown JA4
//	    signal: [ua_tls_mismatch]           # any of these fired
//	    action: RATE
//	    rate: { key: ip, per_second: 2, burst: 20 }   # key: ip (/24, /64), ja4, pass
//	  - name: browsers
//	    user_agent_regex: Mozilla
//	    action: WEIGH
//	    weight: { adjust: 10 }
//	  - import: rules/*.yaml                # files (globs), (builtin)/name.yaml, (data)/name.yaml
//	signals: { ua_tls_mismatch: 30, proto_mismatch: off }
//	hosting_asns: { add: [64501], remove: [24940] }
//	status_codes: { CHALLENGE: 403, DENY: 403 }
//	thresholds:
//	  - { name: ok, expression: weight <= 0, action: ALLOW }
//	  - { name: browser, min: 1, max: 30, action: CHALLENGE, challenge: { algorithm: fast, bits: 12 } }
//	  - name: heavy
//	    expression: { all: [weight >= 30] }
//	    action: CHALLENGE
//	    challenge: { algorithm: metarefresh, difficulty: 4 }   # Anubis's difficulty: 4·N bits
//
// All matchers of a rule must hold. The first matching rule whose action is
// not WEIGH decides; WEIGH rules before it and fired signals add their
// weight; when no rule decides, the first threshold that holds for the
// total weight decides; without thresholds (or with thresholds: []),
// Anubis's default applies (weight above zero: proof of work, difficulty
// 4). Thresholds may ALLOW, DENY, CHALLENGE or DIVERT. A rule's identity is
// a hash of its content, the same on every load and node.
//
// Actions: DENY_AND_REROUTE with reroute_to: (an absolute http or https
// URL) is Anubis's: the request is denied with a redirect to the URL
// (Decision.RerouteTo; Anubis answers 307). DIVERT with divert_to: names a
// divert: target of the edge's configuration, to which the request is
// proxied instead of the site (Decision.DivertTo; Policy.DivertTargets and
// Options.DivertTargets let the edge check the names exist).
//
// Imports: a relative name is read next to the importing file, else from
// the working directory (where Anubis reads it); a glob's files come in
// Anubis's natural order, and a file may hold several YAML documents.
// (builtin)/default.yaml is the whole default policy, so that
// `- import: (builtin)/default.yaml` after one's own rules extends it: the
// imported policy's thresholds, signals, status_codes and hosting_asns
// apply unless the importing file sets its own. (data)/name is a file of
// Anubis's policy tree (its data/ directory: botPolicies.yaml and the
// snippets), which Maat embeds as anubisdata/ at the version
// AnubisVersion returns, with Anubis's MIT license; anubisdata/sync.sh
// (make anubis-data) copies it from the Anubis module and records it in
// anubisdata/SOURCE.
//
// Anubis files load as they are, and decide as in Anubis (measured by
// TestAnubisDifferential against Anubis's own server; docs/policy.md
// lists what remains different). Every key of Anubis's files is read with
// Anubis's meaning or refused naming the key and the Anubis version that
// added it (DEBUG_BENCHMARK, dnsbl: true, lookupHost). Sections only
// Anubis uses (openGraph, impressum, logging, metrics, store, dns_ttl,
// honeypot) are checked as Anubis checks them, so that a file Anubis
// refuses is refused here, and then give one warning each. A regular
// expression that ends in a newline (YAML ">") is refused, as Anubis
// refuses it; headers_regex reads a missing header as "". Anubis's
// difficulty (0 to 64 leading hexadecimal zeros) is read as 4·difficulty
// bits; a challenge block without difficulty asks for 0, as in Anubis.
// asns: and geoip: rules need the edge's geo databases (Options.Geo):
// without them they load with a warning naming geo.asn_db or
// geo.country_db and never match. status_codes: sets the status of
// challenge and deny pages (Policy.StatusCodes).
//
// CEL expressions see Anubis's environment: its variables (remoteAddress,
// contentLength, host, method, userAgent, path, query and headers as
// net/http holds them, load_1m/5m/15m: the system load average,
// Request.Load, as in Anubis), its functions
// (missingHeader, segments, regexSafe, randInt, arpaReverseIP,
// verifyFCrDNS and reverseDNS of remoteAddress; not lookupHost) and the
// strings extension; and also ja4, hfp, h2fp, clientFamily, h2Family, proto, asn (0
// when unknown), country (ISO 3166-1 alpha-2, "" when unknown), cluster
// (Request.Cluster) and the site's pressure: pressure (0 to 1), storm and
// upstream (a map of doubles: in_use, capacity, queue, queue_wait_ms,
// p50_ms, p95_ms), which the edge fills (Request.Pressure, Storm,
// Upstream). Threshold expressions read weight, pressure, storm, upstream
// and load_1m/5m/15m. Policy.UsesPressure says whether a policy reads the
// pressure variables, which need an edge with upstream slots. A Condition
// (CompileCondition) is an expression of the same environment outside a
// policy, such as the edge's challenge.when: pressure > 0.5, without the
// functions that need DNS or answer differently each time.
// verifyFCrDNS and reverseDNS read Request.FCrDNS, which the caller looks
// up (Verifier.FCrDNS) when an evaluation says it needs it
// (Decision.NeedFCrDNS), and then evaluates again: Evaluate itself does no
// I/O. An expression that fails at run time does not match. CEL is the
// language of https://github.com/google/cel-spec/blob/master/doc/langdef.md;
// regular expressions are Go's RE2 syntax (package regexp).
//
// # Signals
//
// Built-in signals can be matched by rules, and add weight under a policy
// that has a signals: section, its own or an imported policy's: Maat's
// default policy, or (builtin)/maat-signals.yaml, the one line an Anubis
// policy adds to weigh them (Policy.MaatSignals): ua_tls_mismatch
// (a browser User-Agent on a TLS stack that is not that browser's, from the
// JA4 known-client table; the browser part of a bot's User-Agent counts;
// or a User-Agent that starts with a non-browser client's name, curl/,
// git/, Go-http-client/, python-requests/, node, Java-http-client/ …, over
// a TLS stack or HTTP/2 preface the known-client tables give to a client
// it is not built on),
// browser_headers_missing (a claimed browser without the headers every
// browser sends, or with a header order no browser uses), proto_mismatch (a
// modern browser on HTTP/1.1 over TLS), fake_crawler and verified_crawler
// (forward-confirmed reverse DNS, RFC 1912 section 2.1, or the crawler's
// published address ranges, PublishedRanges, checked by a Verifier before
// evaluation),
// headless (HeadlessChrome, PhantomJS, SlimerJS), hosting_asn (a browser
// User-Agent from a hosting or cloud network: lists/hosting-asns.txt, or
// the policy's hosting_asns:) and tls_http_mismatch (a parrot: a browser's
// TLS stack, by the JA4 known-client table, under another client's HTTP:
// an HTTP/2 connection preface the HTTP/2 known-client table has for
// another family (Request.H2Family), a first request's pseudo-header order
// that is not the browser's, or, over Chromium's TLS, an HTTP/1.1 header
// order that does not start Host, Connection; whatever the User-Agent
// says).
//
// # The no-JS wait
//
// DESIGN.md offers the meta-refresh wait only to clients whose TLS and
// HTTP/2 fingerprints agree with the browser they claim, whose weight is
// below a bound, and on whom no lie-detection signal fired. A Decision
// carries what the edge needs for that: BrowserAgrees, Lied (ua_tls_mismatch,
// fake_crawler, headless or tls_http_mismatch fired), Weight;
// Policy.WaitMaxWeight is the default bound, the upper end of the lowest
// challenge threshold's band; Policy.WaitMaxWeightFor gives it for the
// site's state (storm on or off), for thresholds that read storm.
//
// # Explain
//
// Explain and ExplainChecks describe a decision line by line: which checks
// ran before evaluation (crawler verification, geo) and which were
// skipped, the signals, rules, weight, decision and whether the wait may be
// offered. Given the same Request as Evaluate (the Verifier's answer and the
// geo lookup included), they give the same decision.
//
// RobotsToPolicy reads robots.txt as RFC 9309 says and writes a policy that
// extends the default policy.
//
// A Policy is compiled once and is safe for concurrent use. Evaluate does no
// I/O, never logs, and for the default policy does not allocate.
package policy

// Package policy turns what the edge knows about a request into a decision:
// ALLOW, DENY, CHALLENGE (with an algorithm and a difficulty in bits) or RATE
// (a token-bucket key, rate and burst).
//
// # Policy files
//
// A policy file is YAML or JSON in the spirit of Anubis's policy files
// (https://anubis.techaro.lol/docs/admin/policies; the format of
// TecharoHQ/anubis data/botPolicies.yaml and lib/policy/config), so that
// Anubis users can bring theirs:
//
//	bots:                                   # ordered rules
//	  - name: ai-crawlers
//	    user_agent_regex: (?i)GPTBot|ClaudeBot
//	    action: DENY                        # ALLOW, DENY, CHALLENGE, WEIGH, RATE
//	  - name: api
//	    path_regex: ^/api/
//	    headers_regex: { Accept: json }
//	    remote_addresses: [203.0.113.0/24]
//	    expression: 'method == "POST" && ja4.startsWith("t13")'   # CEL
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
//	  - import: rules/*.yaml                # files (globs) or (builtin)/name.yaml
//	signals: { ua_tls_mismatch: 30, proto_mismatch: off }
//	thresholds:
//	  - { name: ok, expression: weight <= 0, action: ALLOW }
//	  - { name: browser, min: 1, max: 30, action: CHALLENGE, challenge: { algorithm: fast, bits: 12 } }
//	  - name: heavy
//	    expression: { all: [weight >= 30] }
//	    action: CHALLENGE
//	    challenge: { algorithm: metarefresh, difficulty: 4 }   # difficulty N = 4·N bits
//
// All matchers of a rule must hold. The first matching rule whose action is
// not WEIGH decides; WEIGH rules before it and fired signals add their
// weight; when no rule decides, the first threshold that holds for the
// total weight decides; without thresholds, Anubis's legacy behaviour
// applies (weight above zero: proof of work, difficulty 4). A rule's
// identity is a hash of its content, the same on every load and node.
//
// Anubis files load as they are: sections only Anubis understands
// (openGraph, impressum, logging, metrics, store, dnsbl, status_codes, …)
// and rules using Thoth (geoip, asns) give one warning each and are left
// out; (data)/ imports of Anubis's embedded files fail with the names of
// Maat's built-in lists (BuiltinLists). CEL expressions see Anubis's
// variables (remoteAddress, contentLength, host, method, userAgent, path,
// query, headers, load_1m/5m/15m, which are always 0) and functions
// (missingHeader, segments, regexSafe, randInt; not the DNS functions), and
// also ja4, hfp, h2fp, clientFamily and proto. CEL is the language of
// https://github.com/google/cel-spec/blob/master/doc/langdef.md; regular
// expressions are Go's RE2 syntax (package regexp).
//
// # Signals
//
// Built-in signals add weight and can be matched by rules: ua_tls_mismatch
// (a browser User-Agent on a TLS stack that is not that browser's, from the
// JA4 known-client table), browser_headers_missing (a claimed browser
// without the headers every browser sends, or with a header order no browser
// uses), proto_mismatch (a modern browser on HTTP/1.1 over TLS),
// fake_crawler and verified_crawler (forward-confirmed reverse DNS, RFC 1912
// section 2.1, or the crawler's published address ranges, checked by a
// Verifier before evaluation).
//
// RobotsToPolicy reads robots.txt as RFC 9309 says.
//
// A Policy is compiled once and is safe for concurrent use. Evaluate does no
// I/O, never logs, and for the default policy does not allocate.
package policy

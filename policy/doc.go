// Package policy turns what the edge knows about a request into a decision:
// ALLOW, DENY, CHALLENGE (with an algorithm and a difficulty in bits) or RATE
// (a token-bucket key, rate and burst).
//
// A policy file is YAML or JSON in the spirit of Anubis's policy files
// (https://anubis.techaro.lol/docs/admin/policies, the format of
// TecharoHQ/anubis data/botPolicies.yaml and lib/policy/config): an ordered
// list of rules under bots:, each with a name, an action (ALLOW, DENY,
// CHALLENGE, WEIGH, RATE) and matchers that must all hold:
// user_agent_regex, path_regex, headers_regex, remote_addresses, expression
// (CEL, https://github.com/google/cel-spec/blob/master/doc/langdef.md), and
// Maat's own ja4, hfp, h2fp (exact values, or prefixes ending in "*"),
// client_family and signal. The first matching rule whose action is not
// WEIGH decides; WEIGH rules and fired signals add their weight; when no rule
// decides, thresholds: map the total weight to an action. Anubis files load:
// sections that only Anubis understands produce one warning each, and
// Anubis's difficulty N is read as 4·N leading zero bits.
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
// Regular expressions are Go's RE2 syntax (package regexp). Robots files are
// read as RFC 9309 says.
//
// A Policy is compiled once and is safe for concurrent use. Evaluate does no
// I/O, never logs, and for the default policy does not allocate.
package policy

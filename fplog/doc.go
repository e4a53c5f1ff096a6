// Package fplog is Maat's fingerprint log: one JSON object per request
// (JSON Lines, https://jsonlines.org/, each line an RFC 8259 object), written
// off the request's path to a rotated file or the standard output, and read
// back by `edge fp top`; and its access log, in the NCSA Combined Log Format
// or JSON, written the same way (see Access log below). Under steady
// traffic lines reach the output in batches, at most 100 ms after they were
// queued; a line after a quiet spell is written at once.
//
// # Fields
//
// Fields appear in this order. A field that does not apply to a request is
// left out, never invented: a plain-HTTP request has no TLS fields, an
// HTTP/1.1 request no h2fp, a request that was not challenged no challenge.
//
//   - time: when the request started, RFC 3339 in UTC with milliseconds
//     ("2026-12-03T10:32:08.123Z").
//   - request_id: the request's ID, the one shown on every page the edge
//     serves and sent upstream as X-Request-Id; the key that joins the
//     fingerprint log, the access log and what a visitor reports.
//   - remote_ip: the client address, as Config.ClientIP says: the address
//     (full), its /24 or /64 network ("203.0.113.0/24", prefix), a keyed
//     HMAC-SHA-256 of it in 24 hex digits (hash), or absent (none).
//   - asn, as_org: the autonomous system of the client address, its number
//     (a JSON number) and organization; country: the address's ISO 3166-1
//     alpha-2 code ("NL"). Only with a geo database (MaxMind's MMDB
//     format); absent when the address is not in it.
//   - host, method, path: of the request; path without the query.
//   - proto: "HTTP/1.1", "HTTP/2.0" or "HTTP/3.0".
//   - tls_version ("1.2", "1.3"), sni, alpn (the protocol agreed): of the
//     connection.
//   - ja4, ja4_r, ja4_o, ja4_ro: the JA4 TLS client fingerprint of the
//     connection and its raw, original-order and raw original-order forms
//     (FoxIO's JA4 specification, BSD-3-Clause); "q…" for QUIC.
//   - ja4_session: the JA4 of the session's full handshake, which the
//     policy judged the request by, when it is not ja4 (a resumed
//     session: pre_shared_key counts in ja4); left out otherwise.
//   - resumed: true when the connection resumed a TLS session; left out
//     otherwise.
//   - hfp, hfp_r: Maat's header fingerprint: the header names in wire order,
//     lowercased and joined with "," (hfp_r), and "h1"/"h2"/"h3" + their
//     count in two digits + "_" + the first 12 hex digits of SHA-256(hfp_r)
//     (hfp).
//   - h2fp: the HTTP/2 fingerprint of the connection (Akamai's format,
//     SETTINGS|WINDOW_UPDATE|PRIORITY|PSEUDO-HEADER ORDER).
//   - ja4h: the JA4H HTTP fingerprint, only when enabled (FoxIO License
//     1.1: not for commercial use).
//   - user_agent: as sent.
//   - client_family: the client the JA4 is known to come from ("chrome",
//     "firefox", "curl", …).
//   - cluster: the client cluster the request counted for in the
//     upstream's line (16 hex digits: a pass holder, else a TLS and HTTP/2
//     stack in a network).
//   - pressure: the site's upstream pressure, 0 to 1 in hundredths, when
//     the request was judged; left out when zero.
//   - weight: the total weight the policy gave the request.
//   - rules: the names of the policy rules that matched, in order.
//   - action: ALLOW, CHALLENGE, DENY, RATE (rate limited), DIVERT (sent to
//     a divert target), or PASS (a valid pass cookie).
//   - dry_run: true when the site runs dry (the edge's dry_run): the
//     request was forwarded, and action is what the policy would have done;
//     absent otherwise.
//   - reason: why the edge answered the request itself with an error
//     instead of passing it on, a snake_case word from a fixed list
//     ("bad_path", "ambiguous_length", "method_not_allowed",
//     "bad_forwarded_for", "unknown_site", "body_too_large",
//     "upstream_timeout", …); absent when the site or the policy answered
//     (the policy's rules are in rules).
//   - challenge: {"alg": "pow" or "metarefresh", "bits": difficulty in
//     leading zero bits} when a challenge was served.
//   - status: the HTTP status sent.
//   - bytes: the bytes of the response body sent.
//   - duration_ms: from the request's headers read to its response ended,
//     in milliseconds with microseconds as decimals.
//
// String fields are cut at MaxFieldBytes and their invalid UTF-8 replaced,
// so that a client cannot fill the disk with one request or break the JSON.
//
// # Writing
//
// Writer.Write copies the record into a bounded queue and returns; a
// goroutine encodes and writes the lines. When the queue is full (a slow
// disk, a blocked pipe) records are dropped and counted (Writer.Dropped),
// and requests never wait. The file is rotated by size to
// <name>-<UTC time><ext> and gzipped in the background; the newest
// Config.MaxFiles rotated files are kept. Writer.Reopen reopens the file
// after an external rotation (on SIGHUP). ALLOW records can be sampled
// (Config.SampleAllow); every other decision is always written.
//
// # Loading the log elsewhere
//
// DuckDB (https://duckdb.org/docs/data/json/overview), current and rotated
// files at once:
//
//	duckdb fp.duckdb -c "CREATE TABLE fp AS SELECT * FROM read_json('/var/log/edge/fp*.jsonl*', format = 'newline_delimited', union_by_name = true, sample_size = -1)"
//
// ClickHouse (https://clickhouse.com/docs/en/interfaces/formats#jsoneachrow),
// into a table created once:
//
//	CREATE TABLE fp (
//	    time DateTime64(3, 'UTC'), request_id String, remote_ip String,
//	    asn UInt32, as_org LowCardinality(String), country LowCardinality(String),
//	    host LowCardinality(String),
//	    method LowCardinality(String), path String, proto LowCardinality(String),
//	    tls_version LowCardinality(String), sni String, alpn LowCardinality(String),
//	    ja4 String, ja4_r String, ja4_o String, ja4_ro String, hfp String, hfp_r String,
//	    h2fp String, ja4h String, user_agent String, client_family LowCardinality(String),
//	    cluster String, pressure Float32,
//	    weight Int32, rules Array(String), action LowCardinality(String),
//	    dry_run Bool, reason LowCardinality(String),
//	    challenge Tuple(alg String, bits UInt16), status UInt16, bytes Int64,
//	    duration_ms Float64
//	) ENGINE = MergeTree ORDER BY time;
//
//	zcat -f /var/log/edge/fp*.jsonl* | clickhouse client --date_time_input_format best_effort -q "INSERT INTO fp FORMAT JSONEachRow"
//
// or without a server: clickhouse local -q "SELECT ja4, count() FROM
// file('fp*.jsonl*', JSONEachRow) GROUP BY ja4 ORDER BY count() DESC".
//
// # Access log
//
// AccessWriter writes one line per request with the same machinery as the
// fingerprint log's Writer: the bounded queue that drops and counts, size
// rotation with gzip and retention, Reopen, and the client address modes.
// Its lines are in one of two formats.
//
// FormatCombined is the NCSA Combined Log Format, the "combined" of Apache
// and nginx, for fail2ban, GoAccess, AWStats and every other reader of web
// server logs:
//
//	%h - %u [%d/%b/%Y:%H:%M:%S %z] "%r" %>s %b "%{Referer}i" "%{User-Agent}i"
//	203.0.113.7 - alice [03/Dec/2026:10:32:08 +0000] "GET /feed.xml?page=2 HTTP/2.0" 200 5120 "https://example.org/" "curl/8.5.0"
//
// The time is in UTC. An empty user, referer or User-Agent, and a body of
// zero bytes, are written "-" (Apache's %b); the status has three digits,
// "000" when there is none or it is out of range. Every field is escaped as
// nginx escapes its log variables (escape=default): '"', '\', the control
// characters, DEL and every byte from 0x80 become \xHH, so that no request
// can end a quoted field or the line, or forge one. The user name, which
// stands before the date unquoted, also has its spaces and brackets
// escaped. Fields are cut at MaxFieldBytes before escaping.
//
// Read it with GoAccess as
//
//	goaccess access.log --log-format=COMBINED
//
// and with fail2ban's filters for nginx access logs (nginx-botsearch, and
// failregexes such as ^<HOST> -.*"(GET|POST|HEAD).*HTTP.*" 404).
//
// FormatJSON writes one JSON object per line, with the fields time,
// request_id, remote_ip, user, host, method, uri, proto, status, bytes,
// referer, user_agent and duration_ms, encoded as in the fingerprint log (so
// that both logs join on request_id); empty strings are left out.
//
// The request ID is in JSON lines only. Appended to a combined line (as
// nginx's "main" format appends a quoted field) it would still be read by
// GoAccess's COMBINED format, which ignores what follows the User-Agent,
// and by fail2ban's nginx-botsearch and nginx-bad-request filters; but
// fail2ban's apache-badbots and http-badbots filters, which its
// documentation also sets on nginx access logs ([nginx-badbots]), end their
// expression with the User-Agent field and the end of the line ("$"): they
// would stop matching. A combined line therefore stays exactly Apache's and
// nginx's.
//
// The client address modes apply to both formats. In the Combined Log
// Format, prefix writes the network's first address without its length
// ("203.0.113.0"), as anonip does, so that GoAccess still counts visitors
// by network; hash writes the 24 hex digits and none writes "-", which
// GoAccess reads only with --no-ip-validation. fail2ban needs full: it bans
// the address it reads.
//
// # Reading
//
// Top (`edge fp top`) counts the values of one field over plain and gzipped
// logs, and the standard input for the file name "-"; ParseSince reads its
// -since (Go durations, and days and weeks: "1d", "2w"). The files are
// untrusted input: lines longer than MaxLineBytes and lines that are not
// records are counted (Counter.Bad) and skipped.
package fplog

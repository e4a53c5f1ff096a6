package main

import (
	"testing"
	"time"
)

func TestParseWrk(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name         string
		out          string
		ok, failed   int64
		elapsed      time.Duration
		wantParseErr bool
	}{
		{name: "clean", out: `Running 1s test @ https://127.0.0.1:38443/
  1 threads and 2 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   643.46us    2.26ms  26.50ms   95.49%
    Req/Sec    15.31k     5.32k   24.19k    60.00%
  15349 requests in 1.02s, 2.18MB read
Requests/sec:  15056.00
Transfer/sec:      2.14MB
`, ok: 15349, elapsed: 1020 * time.Millisecond},
		{name: "non-2xx and socket errors", out: `  32000 requests in 5.00s, 40.00MB read
  Socket errors: connect 0, read 3, write 1, timeout 2
  Non-2xx or 3xx responses: 100
Requests/sec:   6400.00
`, ok: 31900, failed: 106, elapsed: 5 * time.Second},
		{name: "milliseconds", out: "  10 requests in 900.00ms, 1.00KB read\n", ok: 10, elapsed: 900 * time.Millisecond},
		{name: "not wrk", out: "wrk: unable to connect\n", wantParseErr: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := parseWrk([]byte(tt.out))
			if (err != nil) != tt.wantParseErr {
				t.Fatalf("err %v, want error %v", err, tt.wantParseErr)
			}
			if err != nil {
				return
			}
			if s.requests != tt.ok || s.failed != tt.failed || s.elapsed != tt.elapsed {
				t.Errorf("got %d ok, %d failed in %v; want %d, %d in %v", s.requests, s.failed, s.elapsed, tt.ok, tt.failed, tt.elapsed)
			}
		})
	}
}

func TestParseH2load(t *testing.T) {
	t.Parallel()
	const head = "TLS Protocol: TLSv1.3\nApplication protocol: h2\n"
	for _, tt := range []struct {
		name         string
		out          string
		ok, failed   int64
		elapsed      time.Duration
		wantParseErr bool
	}{
		{name: "in flight at the end is no failure", out: head + `finished in 2.01s, 2000.00 req/s, 132.94KB/s
requests: 4006 total, 4012 started, 4006 done, 4000 succeeded, 6 failed, 6 errored, 0 timeout
status codes: 4000 2xx, 0 3xx, 0 4xx, 0 5xx
`, ok: 4000, elapsed: 2010 * time.Millisecond},
		{name: "errors are", out: head + `finished in 5.00s, 100.00 req/s, 1KB/s
requests: 600 total, 600 started, 600 done, 600 succeeded, 0 failed, 0 errored, 0 timeout
status codes: 500 2xx, 1 3xx, 90 4xx, 9 5xx
`, ok: 500, failed: 100, elapsed: 5 * time.Second},
		{name: "HTTP/1.1 is refused", out: "Application protocol: http/1.1\nfinished in 1.00s, 1 req/s, 1KB/s\n" +
			"requests: 1 total, 1 started, 1 done, 1 succeeded, 0 failed, 0 errored, 0 timeout\nstatus codes: 1 2xx, 0 3xx, 0 4xx, 0 5xx\n", wantParseErr: true},
		{name: "no summary", out: head, wantParseErr: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := parseH2load([]byte(tt.out))
			if (err != nil) != tt.wantParseErr {
				t.Fatalf("err %v, want error %v", err, tt.wantParseErr)
			}
			if err != nil {
				return
			}
			if s.requests != tt.ok || s.failed != tt.failed || s.elapsed != tt.elapsed {
				t.Errorf("got %d ok, %d failed in %v; want %d, %d in %v", s.requests, s.failed, s.elapsed, tt.ok, tt.failed, tt.elapsed)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		in   []float64
		want stats
	}{
		{"odd", []float64{3, 1, 2}, stats{med: 2, min: 1, max: 3}},
		{"even", []float64{4, 1, 2, 3}, stats{med: 2.5, min: 1, max: 4}},
		{"none", nil, stats{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := summarize(tt.in); got != tt.want {
				t.Errorf("summarize(%v) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestRotated(t *testing.T) {
	t.Parallel()
	fronts := []*front{{name: "a"}, {name: "b"}, {name: "c"}}
	for r, want := range []string{"abc", "bca", "cab", "abc"} {
		got := ""
		for _, f := range rotated(fronts, r) {
			got += f.name
		}
		if got != want {
			t.Errorf("round %d: %s, want %s", r, got, want)
		}
	}
}

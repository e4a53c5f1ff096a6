package compress

import (
	"errors"
	"testing"
)

func TestValidate(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		cfg   Config
		nerrs int
	}{
		{"zero", Config{}, 0},
		{"full", Config{Level: LevelBest, MinSize: 256, Types: []string{"text/*", "application/json"},
			Encodings: []string{Gzip, Zstd}}, 0},
		{"level", Config{Level: 7}, 1},
		{"negative size", Config{MinSize: -1}, 1},
		{"huge size", Config{MinSize: MaxMinSize + 1}, 1},
		{"bad types", Config{Types: []string{"text", "*/*", "text/html; charset=utf-8", "text/ht*"}}, 4},
		{"bad encodings", Config{Encodings: []string{"deflate", Gzip, Gzip, "GZIP"}}, 3},
		{"everything", Config{Level: -1, MinSize: -5, Types: []string{""}, Encodings: []string{"x"}}, 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.cfg.Validate()
			var n int
			if err != nil {
				n = len(err.(interface{ Unwrap() []error }).Unwrap())
				if !errors.Is(err, ErrConfig) {
					t.Errorf("%v does not wrap ErrConfig", err)
				}
			}
			if n != tt.nerrs {
				t.Errorf("Validate() = %v: %d errors, want %d", err, n, tt.nerrs)
			}
			if _, err := New(tt.cfg); (err == nil) != (tt.nerrs == 0) {
				t.Errorf("New: %v", err)
			}
		})
	}
}

func TestMatchType(t *testing.T) {
	t.Parallel()
	types := Config{}.types()
	for _, tt := range []struct {
		ct   string
		want bool
	}{
		{"text/html", true}, {"Text/HTML; charset=utf-8", true}, {"text/event-stream", true},
		{" application/json ;charset=utf-8", true}, {"application/javascript", true},
		{"image/svg+xml", true}, {"application/wasm", true}, {"application/rss+xml", true},
		{"image/png", false}, {"application/octet-stream", false}, {"application/zip", false},
		{"video/mp4", false}, {"text", false}, {"text/", false}, {"", false},
		{"application/jsonx", false}, {"font/woff2", false},
	} {
		if got := matchType(types, tt.ct); got != tt.want {
			t.Errorf("matchType(%q) = %v, want %v", tt.ct, got, tt.want)
		}
	}
}

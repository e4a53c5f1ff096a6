package httpfp

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// ja4hVector is one line of testdata/http-ja4h.jsonl (FoxIO's captures).
type ja4hVector struct {
	PCAP   string `json:"pcap"`
	Stream int    `json:"stream"`
	JA4H   string `json:"ja4h"`
	JA4HRO string `json:"ja4h_ro"`
}

// requestFromRO rebuilds what JA4H reads of a request from the raw
// fingerprint: method, version, header names, cookies and language.
func requestFromRO(t *testing.T, ro string) ja4hInput {
	t.Helper()
	a, rest, ok := strings.Cut(ro, "_")
	if !ok || len(a) != 12 {
		t.Fatalf("bad ja4h_ro %q", ro)
	}
	methods := map[string]string{"ge": "GET", "po": "POST", "he": "HEAD", "co": "CONNECT", "pu": "PUT", "de": "DELETE", "op": "OPTIONS", "pa": "PATCH"}
	j := ja4hInput{method: methods[a[:2]], version: a[2:4]}
	if j.method == "" {
		t.Fatalf("unknown method in %q", a)
	}
	headers, cookies, _ := strings.Cut(rest, "_")
	if j.version == "20" { // pseudo-headers do not count
		j.names = append(j.names, ":method", ":authority", ":scheme", ":path")
	}
	if headers != "" {
		j.names = append(j.names, strings.Split(headers, ",")...)
	}
	if a[5] == 'r' {
		j.names = append(j.names, "Referer")
	}
	if lang := strings.TrimRight(a[8:], "0"); lang != "" {
		if len(lang) == 4 {
			lang = lang[:2] + "-" + strings.ToUpper(lang[2:])
		}
		j.lang = lang + ",en;q=0.9"
	}
	if a[4] != 'c' {
		return j
	}
	// Cookie names may hold "_": find the split where the pairs' names
	// equal the name list.
	for i := range len(cookies) {
		if cookies[i] != '_' {
			continue
		}
		names, pairs := strings.Split(cookies[:i], ","), strings.Split(cookies[i+1:], ",")
		if len(names) != len(pairs) {
			continue
		}
		match := true
		for k := range names {
			if n, _, _ := strings.Cut(pairs[k], "="); n != names[k] {
				match = false
				break
			}
		}
		if match {
			// Split the pairs over two Cookie fields, as HTTP/2 clients do.
			h := len(pairs) / 2
			j.cookies = []string{strings.Join(pairs[:h], "; "), strings.Join(pairs[h:], "; ")}
			j.names = append(j.names, "Cookie", "Cookie")
			return j
		}
	}
	t.Fatalf("cannot split cookies of %q", ro)
	return j
}

func TestJA4HVectors(t *testing.T) {
	t.Parallel()
	f, err := os.Open("testdata/http-ja4h.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	n := 0
	for sc.Scan() {
		var v ja4hVector
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatal(err)
		}
		n++
		t.Run(v.PCAP+"/"+v.JA4H, func(t *testing.T) {
			t.Parallel()
			j := requestFromRO(t, v.JA4HRO)
			h, ro := j.appendJA4H(nil, nil, false)
			if string(h) != v.JA4H {
				t.Errorf("ja4h = %s, want %s", h, v.JA4H)
			}
			if string(ro) != v.JA4HRO {
				t.Errorf("ja4h_ro =\n%s\nwant\n%s", ro, v.JA4HRO)
			}
			ja4h, _ := j.compute()
			if ja4h != v.JA4H {
				t.Errorf("compute: ja4h = %s, want %s", ja4h, v.JA4H)
			}
		})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n != 89 {
		t.Fatalf("read %d vectors, want 89", n)
	}
}

func TestJA4HLanguage(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, want string }{
		{"none", "", "0000"},
		{"region", "en-US,en;q=0.9", "enus"},
		{"short", "da", "da00"},
		{"quality", "fr;q=0.8", "fr00"},
		{"long", "zh-Hant-TW", "zhha"},
		{"space", " de-DE", "dede"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := string(appendLanguage(nil, tt.in)); got != tt.want {
				t.Errorf("appendLanguage(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

package tlsfp

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"testing"
)

// vector is one line of testdata/tls-clienthellos.jsonl: a ClientHello from
// FoxIO's packet captures with the fingerprints the JA4 specification gives.
type vector struct {
	Pcap         string `json:"pcap"`
	Frame        int    `json:"frame"`
	Transport    string `json:"transport"`
	HelloIndex   int    `json:"hello_index"`
	SNI          string `json:"sni"`
	HandshakeHex string `json:"handshake_hex"`
	RecordHex    string `json:"record_hex"`
	Expected     struct {
		JA4   string `json:"ja4"`
		JA4R  string `json:"ja4_r"`
		JA4O  string `json:"ja4_o"`
		JA4RO string `json:"ja4_ro"`
	} `json:"expected"`

	handshake, records []byte
}

func (v *vector) name() string {
	return fmt.Sprintf("%s#%d.%d", v.Pcap, v.Frame, v.HelloIndex)
}

// loadVectors reads the reference vectors (a copy of
// ../shared/ja4/tls-clienthellos.jsonl).
func loadVectors(t testing.TB) []*vector {
	t.Helper()
	f, err := os.Open("testdata/tls-clienthellos.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var vs []*vector
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		v := new(vector)
		if err := json.Unmarshal(sc.Bytes(), v); err != nil {
			t.Fatal(err)
		}
		if v.handshake, err = hex.DecodeString(v.HandshakeHex); err != nil {
			t.Fatal(err)
		}
		if v.records, err = hex.DecodeString(v.RecordHex); err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(vs) != 212 {
		t.Fatalf("read %d vectors, want 212", len(vs))
	}
	// checkVector passes over the forms a vector lacks: the raw and
	// original-order forms of the QUIC hellos and of one TCP hello (see
	// the README of ../shared/ja4). Make sure that is all it passes over.
	raw := 0
	for _, v := range vs {
		e := v.Expected
		if e.JA4 == "" || (e.JA4R == "") != (e.JA4O == "") || (e.JA4R == "") != (e.JA4RO == "") {
			t.Fatalf("%s: partial expectations %+v", v.name(), e)
		}
		if e.JA4R != "" {
			raw++
		}
	}
	if raw != 160 {
		t.Fatalf("%d vectors with raw forms, want 160", raw)
	}
	return vs
}

// checkVector compares every fingerprint the vector carries.
func checkVector(t *testing.T, v *vector, fp *Fingerprint) {
	t.Helper()
	for _, c := range []struct{ field, got, want string }{
		{"ja4", fp.JA4, v.Expected.JA4},
		{"ja4_r", fp.JA4R, v.Expected.JA4R},
		{"ja4_o", fp.JA4O, v.Expected.JA4O},
		{"ja4_ro", fp.JA4RO, v.Expected.JA4RO},
	} {
		if c.want != "" && c.got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.field, c.got, c.want)
		}
	}
	if fp.SNI != v.SNI {
		t.Errorf("SNI = %q, want %q", fp.SNI, v.SNI)
	}
}

func TestVectorsHandshake(t *testing.T) {
	t.Parallel()
	for _, v := range loadVectors(t) {
		t.Run(v.name(), func(t *testing.T) {
			t.Parallel()
			h, err := ParseHandshake(v.handshake)
			if err != nil {
				t.Fatal(err)
			}
			checkVector(t, v, h.Fingerprint(v.Transport == "quic"))
		})
	}
}

func TestVectorsRecords(t *testing.T) {
	t.Parallel()
	for _, v := range loadVectors(t) {
		if v.Transport != "tcp" {
			continue
		}
		t.Run(v.name(), func(t *testing.T) {
			t.Parallel()
			h, err := ParseRecords(v.records)
			if err != nil {
				t.Fatal(err)
			}
			checkVector(t, v, h.Fingerprint(false))
		})
	}
}

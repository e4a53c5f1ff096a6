package fplog

import (
	"testing"
	"time"
)

// TestResumedFields: ja4_session and resumed round-trip, and are left out
// when empty and false.
func TestResumedFields(t *testing.T) {
	t.Parallel()
	for _, r := range []Record{
		{Time: time.Unix(1, 0).UTC(), JA4: "t13d3113h1_e8f1e7e78f70_ac6b91b2c826", JA4Session: "t13d3112h1_e8f1e7e78f70_b26ce05bbdd6", Resumed: true},
		{Time: time.Unix(1, 0).UTC(), JA4: "t13d3112h1_e8f1e7e78f70_b26ce05bbdd6"},
	} {
		line := r.AppendJSON(nil)
		got, err := ParseLine(line)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if got.JA4Session != r.JA4Session || got.Resumed != r.Resumed || got.JA4 != r.JA4 {
			t.Errorf("%s: parsed %q %t", line, got.JA4Session, got.Resumed)
		}
	}
}

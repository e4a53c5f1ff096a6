package console_test

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/maatproxy/maat/edge/internal/console"
	"github.com/maatproxy/maat/fplog"
)

func Example() {
	rec := console.NewRecorder()
	now := time.Now()
	rec.Record(&console.Request{Time: now, Site: "example.org", Action: fplog.ActionDeny, JA4: "t13d1516h2_8daaf6152771_02713d6af862"})
	page := &console.Page{Recorder: rec, Privacy: func() (string, []byte) { return fplog.ClientIPPrefix, nil }}
	w := httptest.NewRecorder()
	page.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	fmt.Println(w.Code, strings.Contains(w.Body.String(), "t13d1516h2_8daaf6152771_02713d6af862"))
	// Output: 200 true
}

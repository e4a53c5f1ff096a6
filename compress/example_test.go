package compress_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/maatproxy/maat/compress"
)

func Example() {
	c, err := compress.New(compress.Config{}) // zstd, br, gzip; text and friends; 1 KiB and up
	if err != nil {
		panic(err)
	}
	page := strings.Repeat("<p>Maat weighs every request.</p>\n", 100)
	h := c.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, page)
	}))

	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set("Accept-Encoding", "gzip, deflate")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)

	sent := rec.Body.Len()
	zr, err := gzip.NewReader(rec.Body)
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(zr)
	fmt.Println(rec.Header().Get("Content-Encoding"), rec.Header().Get("Vary"))
	fmt.Println("smaller:", sent < len(page)/10, "same page:", string(body) == page)
	// Output:
	// gzip Accept-Encoding
	// smaller: true same page: true
}

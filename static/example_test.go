package static_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/maatproxy/maat/static"
)

// A route "/docs/" with `root: /srv/docs`: the prefix is stripped before the
// handler sees the path.
func Example() {
	root, err := os.MkdirTemp("", "static-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(root)
	if err := os.WriteFile(filepath.Join(root, "index.html"), []byte("<h1>docs</h1>"), 0o644); err != nil {
		panic(err)
	}

	h, err := static.New(static.Config{Root: root, Precompressed: true})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/docs/", http.StripPrefix("/docs", h))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/docs/")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.Status, resp.Header.Get("Content-Type"))
	fmt.Println(string(body))
	// Output:
	// 200 OK text/html; charset=utf-8
	// <h1>docs</h1>
}

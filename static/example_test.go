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

// A route "/docs/" served from /srv/docs as nginx's alias does (the prefix
// taken off), with a page for missing files.
func Example() {
	root, err := os.MkdirTemp("", "static-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(root)
	for name, content := range map[string]string{"index.html": "<h1>docs</h1>", "404.html": "<h1>no such page</h1>"} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
			panic(err)
		}
	}

	h, err := static.New(static.Config{
		Root:          root,
		StripPrefix:   "/docs/",
		ErrorPages:    map[int]string{http.StatusNotFound: "404.html"},
		Precompressed: true,
	})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/docs/", h)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	for _, path := range []string{"/docs/", "/docs/missing.html"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.Status, resp.Header.Get("Content-Type"), string(body))
	}
	// Output:
	// 200 OK text/html; charset=utf-8 <h1>docs</h1>
	// 404 Not Found text/html; charset=utf-8 <h1>no such page</h1>
}

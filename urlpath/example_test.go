package urlpath_test

import (
	"fmt"

	"github.com/maatproxy/maat/urlpath"
)

// A rule on /admin/ decides on the model: each spelling below is a place
// under /admin/ for some common upstream, while the path forwarded stays the
// request's normal form.
func Example() {
	for _, p := range []string{"/ADMIN/", "/admin;x/", "/;/admin/", "/admin./", "/admin%20/", "/admin::$INDEX_ALLOCATION/", "/x/..;/admin/", "/%c0%afadmin/"} {
		path, err := urlpath.Parse(p)
		if err != nil {
			fmt.Printf("%-28s refused: %v\n", p, err)
			continue
		}
		fmt.Printf("%-28s forwarded %-28s under /admin/: %v\n", p, path.Normal, urlpath.HasPrefix(path.Model, "/admin/", true))
	}
	// Output:
	// /ADMIN/                      forwarded /ADMIN/                      under /admin/: true
	// /admin;x/                    forwarded /admin;x/                    under /admin/: true
	// /;/admin/                    forwarded /;/admin/                    under /admin/: true
	// /admin./                     forwarded /admin./                     under /admin/: true
	// /admin%20/                   forwarded /admin%20/                   under /admin/: true
	// /admin::$INDEX_ALLOCATION/   forwarded /admin::$INDEX_ALLOCATION/   under /admin/: true
	// /x/..;/admin/                refused: urlpath: path read differently by different upstreams
	// /%c0%afadmin/                refused: urlpath: overlong UTF-8 in path
}

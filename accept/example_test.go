package accept_test

import (
	"fmt"

	"github.com/maatproxy/maat/accept"
)

func ExampleEncoding() {
	offered := []string{accept.Zstd, accept.Brotli, accept.Gzip}
	fmt.Println(accept.Encoding([]string{"gzip, deflate, br"}, offered))
	fmt.Println(accept.Encoding([]string{"gzip;q=0.5, identity"}, offered) == "")
	// Output:
	// br
	// true
}

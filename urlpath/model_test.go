package urlpath

import (
	"errors"
	"net/url"
	"testing"
)

func TestModel(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, in, want string
		err            error
	}{
		{"root", "/", "/", nil},
		{"plain", "/admin/x", "/admin/x", nil},
		{"case kept", "/ADMIN/", "/ADMIN/", nil},
		{"no slash", "/admin", "/admin", nil},
		{"params", "/admin;x/", "/admin/", nil},
		{"params at the end", "/admin/x;jsessionid=1", "/admin/x", nil},
		{"empty params segment", "/;/admin/", "/admin/", nil},
		{"params in the last segment", "/admin/;", "/admin/", nil},
		{"encoded params", "/admin%3bx/", "/admin/", nil},
		{"params dot", "/admin/.;x/y", "/admin/y", nil},
		{"trailing dot", "/admin./", "/admin/", nil},
		{"trailing dots", "/admin../", "/admin/", nil},
		{"trailing dot last", "/wiki/Washington,_D.C.", "/wiki/Washington,_D.C", nil},
		{"trailing space", "/admin%20/", "/admin/", nil},
		{"trailing dot and space", "/admin.%20./x", "/admin/x", nil},
		{"dots only", "/admin/.../x", "/admin/x", nil},
		{"inner dots kept", "/a..b/.c/x.y", "/a..b/.c/x.y", nil},
		{"inner space kept", "/a%20b/", "/a b/", nil},
		{"encoded slash", "/admin%2fx", "/admin/x", nil},
		{"encoded slash, empty segment", "/x/admin%2f", "/x/admin/", nil},
		{"double encoded", "/%2561dmin/", "/admin/", nil},
		{"double encoded slash", "/admin%252fx", "/admin/x", nil},
		{"triple encoded", "/%252561dmin/", "/admin/", nil},
		{"stray percent", "/100%25", "/100%", nil},
		{"stray percent and text", "/100%25_sure/%25zz", "/100%_sure/%zz", nil},
		{"unreserved", "/%41DMIN/", "/ADMIN/", nil},
		{"utf-8", "/wiki/%E6%97%A5%E6%9C%AC", "/wiki/日本", nil},
		{"raw utf-8", "/wiki/日本", "/wiki/日本", nil},
		{"fullwidth", "/%EF%BD%81%EF%BD%84%EF%BD%8D%EF%BD%89%EF%BD%8E/", "/admin/", nil},
		{"fullwidth solidus", "/admin%EF%BC%8Fx", "/admin/x", nil},
		{"fullwidth parentheses", "/wiki/%E6%97%A5%EF%BC%88x%EF%BC%89", "/wiki/日(x)", nil},
		{"fullwidth percent kept", "/%EF%BC%85%EF%BC%94%EF%BC%91", "/％41", nil},
		{"ideographic space", "/admin%E3%80%80/", "/admin/", nil},
		{"fullwidth reverse solidus", "/wiki/%EF%BC%BC(%5Eo%5E)%EF%BC%8F", "/wiki/(^o^)/", nil},
		{"NTFS index", "/admin::$INDEX_ALLOCATION/x", "/admin/x", nil},
		{"NTFS i30", "/admin:$i30:$INDEX_ALLOCATION/x", "/admin/x", nil},
		{"NTFS data", "/index.php::$DATA", "/index.php", nil},
		{"colon kept", "/wiki/Special:Random", "/wiki/Special:Random", nil},
		{"dot segments first", "/x/../admin/", "/admin/", nil},
		{"dot segments after params would climb", "/x/..;/admin/", "", ErrAmbiguous},
		{"dot dot space", "/x/..%20/admin/", "", ErrAmbiguous},
		{"double encoded dots", "/x/%252e%252e/admin/", "", ErrAmbiguous},
		{"double encoded slash dots", "/x%252f..%252fadmin/", "", ErrAmbiguous},
		{"fullwidth dots", "/x/%EF%BC%8E%EF%BC%8E/admin/", "", ErrAmbiguous},
		{"encoded params dots", "/x/..%3b/admin/", "", ErrAmbiguous},
		{"NTFS dots", "/x/..::$DATA/admin/", "", ErrAmbiguous},
		{"nested too deep", "/%25252561dmin/", "", ErrAmbiguous},
		{"overlong slash", "/%c0%afadmin/", "", ErrOverlong},
		{"overlong three bytes", "/%e0%80%afadmin/", "", ErrOverlong},
		{"overlong four bytes", "/%f0%80%80%afadmin/", "", ErrOverlong},
		{"overlong C1", "/%c1%9c", "", ErrOverlong},
		{"double encoded overlong", "/%25c0%25afadmin/", "", ErrOverlong},
		{"latin-1", "/caf%E9", "", ErrUTF8},
		{"lone continuation", "/a%80", "", ErrUTF8},
		{"surrogate", "/%ed%a0%80", "", ErrUTF8},
		{"invalid raw", "/a\xff", "", ErrUTF8},
		{"nul", "/admin%00/", "", ErrControl},
		{"double encoded nul", "/admin%2500/", "", ErrControl},
		{"tab", "/admin%09/", "", ErrControl},
		{"backslash", "/admin\\x", "", ErrBackslash},
		{"double encoded backslash", "/x%255c..%255cadmin", "", ErrAmbiguous},
		{"bad escape", "/%zz", "", ErrEscape},
		{"relative", "admin", "", ErrNotAbsolute},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Model(tt.in)
			if !errors.Is(err, tt.err) || got != tt.want {
				t.Fatalf("Model(%q) = %q, %v; want %q, %v", tt.in, got, err, tt.want, tt.err)
			}
			if err != nil {
				return
			}
			esc := (&url.URL{Path: got}).EscapedPath()
			if again, err := Model(esc); again != got || err != nil {
				t.Errorf("the model of %q (%q spelled %q) is %q, %v", tt.in, got, esc, again, err)
			}
		})
	}
}

func TestParseKeepsNormalForm(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"/ADMIN/", "/admin;x/", "/x/a;y", "/admin%20/", "/wiki/%E6%97%A5"} {
		p, err := Parse(in)
		if err != nil {
			t.Fatalf("Parse(%q): %v", in, err)
		}
		norm, dec, _ := Normalize(in)
		if p.Normal != norm || p.Decoded != dec {
			t.Errorf("Parse(%q) = %+v; Normalize gives %q, %q", in, p, norm, dec)
		}
	}
}

func TestFold(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want string }{
		{"/admin/", "/admin/"},
		{"/ADMIN/", "/admin/"},
		{"/Admin/Ü", "/admin/ü"},
		{"/\u212Aey", "/key"}, // Kelvin sign
		{"/ſecret", "/secret"},
		{"/ADMİN", "/admin"},
		{"/admın", "/admin"},
		{"/日本", "/日本"},
	} {
		if got := Fold(tt.in); got != tt.want {
			t.Errorf("Fold(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if !Equal(tt.in, tt.want, true) || !HasPrefix(tt.in+"x", tt.want, true) {
			t.Errorf("%q and %q are not equal folded", tt.in, tt.want)
		}
	}
	for _, tt := range []struct {
		s, prefix string
		fold      bool
		rest      string
		ok        bool
	}{
		{"/admin/x", "/admin/", false, "x", true},
		{"/ADMIN/x", "/admin/", false, "/ADMIN/x", false},
		{"/ADMIN/x", "/admin/", true, "x", true},
		{"/\u212A/X", "/k/", true, "X", true},
		{"/adm", "/admin/", true, "/adm", false},
		{"/admin", "/admin/", true, "/admin", false},
	} {
		rest, ok := CutPrefix(tt.s, tt.prefix, tt.fold)
		if rest != tt.rest || ok != tt.ok {
			t.Errorf("CutPrefix(%q, %q, %v) = %q, %v; want %q, %v", tt.s, tt.prefix, tt.fold, rest, ok, tt.rest, tt.ok)
		}
	}
}

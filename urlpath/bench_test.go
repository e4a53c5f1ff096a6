package urlpath

import "testing"

func BenchmarkParse(b *testing.B) {
	for _, bb := range []struct{ name, path string }{
		{"plain", "/wiki/Main_Page"},
		{"utf-8", "/wiki/%E6%97%A5%E6%9C%AC%E8%AA%9E"},
		{"params", "/app/page;jsessionid=0123456789ABCDEF"},
	} {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Parse(bb.path); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

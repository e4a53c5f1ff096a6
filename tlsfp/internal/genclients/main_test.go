package main

import (
	"reflect"
	"testing"
)

func TestMerge(t *testing.T) {
	t.Parallel()
	got := merge([]sample{
		{"b", "edge", "85", "utls HelloEdge_85"},
		{"b", "chrome", "87", "utls HelloChrome_87"},
		{"b", "chrome", "83", "utls HelloChrome_83"},
		{"a", "curl", "7.88.1", "curl 7.88.1"},
		{"a", "curl", "7.88.1", "curl 7.88.1"},
		{"c", "ios", "12.1", "x"},
		{"c", "ios", "9.3", "y"},
	})
	want := []merged{
		{ja4: "a", family: "curl", versions: "7.88.1", sources: []string{"curl 7.88.1"}},
		{ja4: "b", family: "chrome", versions: "83-87", sources: []string{"utls HelloChrome_83", "utls HelloChrome_87", "utls HelloEdge_85"}},
		{ja4: "c", family: "ios", versions: "9.3-12.1", sources: []string{"x", "y"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("merge:\n got %+v\nwant %+v", got, want)
	}
}

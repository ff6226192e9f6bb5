package cli

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSplitDocuments(t *testing.T) {
	// doc is a document as its index, the line it starts at and its text.
	type doc struct {
		Index, Line int
		Text        string
	}
	for _, tt := range []struct {
		name, in string
		want     []doc
	}{
		{name: "one document", in: "a: 1\nb: 2\n", want: []doc{{1, 1, "a: 1\nb: 2\n"}}},
		{name: "no final newline", in: "a: 1", want: []doc{{1, 1, "a: 1"}}},
		{name: "empty", in: "", want: nil},
		{name: "separated", in: "a: 1\n---\nb: 2\n", want: []doc{{1, 1, "a: 1\n"}, {2, 3, "b: 2\n"}}},
		{name: "leading and trailing separators make no documents", in: "---\na: 1\n---\n", want: []doc{{1, 2, "a: 1\n"}}},
		{name: "separator with a comment", in: "a: 1\n--- # next\nb: 2\n", want: []doc{{1, 1, "a: 1\n"}, {2, 3, "b: 2\n"}}},
		{name: "a comment-only document counts", in: "# header\n---\nb: 2\n", want: []doc{{1, 1, "# header\n"}, {2, 3, "b: 2\n"}}},
		{name: "--- inside a value is no separator", in: "a: |\n  ---x\n---x: 1\n", want: []doc{{1, 1, "a: |\n  ---x\n---x: 1\n"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			docs, err := splitDocuments("f", strings.NewReader(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			var got []doc
			for _, d := range docs {
				text := string(d.data)
				trimmed := strings.TrimLeft(text, "\n")
				got = append(got, doc{d.index, len(text) - len(trimmed) + 1, trimmed})
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

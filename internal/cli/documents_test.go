package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
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
		{name: "separator without a final newline", in: "a: 1\n---", want: []doc{{1, 1, "a: 1\n"}}},
		{name: "a comment-only document counts", in: "# header\n---\nb: 2\n", want: []doc{{1, 1, "# header\n"}, {2, 3, "b: 2\n"}}},
		{name: "--- inside a value is no separator", in: "a: |\n  ---x\n---x: 1\n", want: []doc{{1, 1, "a: |\n  ---x\n---x: 1\n"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got []doc
			for _, d := range splitDocuments("f", []byte(tt.in)) {
				got = append(got, doc{d.index, d.line, string(d.data)})
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestManyDocumentsStayBounded reads a file of many small documents, as a
// pull request could hold: what is allocated grows with the file, not with
// the square of its documents, and a late document's errors still name
// their lines in the file.
func TestManyDocumentsStayBounded(t *testing.T) {
	const n = 5000
	// A duplicate key on the last document's second line.
	in := strings.Repeat("---\na\n", n) + "---\nb: 1\nb: 2\n"
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	docs, _, err := input{maxBytes: DefaultMaxFileBytes}.readDocuments([]string{"-"}, strings.NewReader(in))
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != n+1 {
		t.Fatalf("%d documents, want %d", len(docs), n+1)
	}
	// A document's header and its share of the slice holding them, and
	// the file itself: a few hundred bytes per document at most.
	if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 512*(n+1) {
		t.Errorf("reading %d bytes in %d documents allocated %d bytes, more than 512 a document", len(in), n+1, allocated)
	}
	_, err = docs[n].toJSON()
	want := fmt.Sprintf(`malformed YAML: yaml: unmarshal errors: line %d: key "b" already set in map`, 2*n+3)
	if err == nil || err.Error() != want {
		t.Errorf("last document's error %v, want %s", err, want)
	}
	// A document's errors name the lines the YAML parser names when the
	// document starts on its line in the file.
	for _, bad := range []string{"a: [\n", "a: 1\nb: [\n", "a: 1\n b: 2\n", "a:\n  x: 1\n  x: 2\nb: 1\nb: 2\n", "\tx: 1\n"} {
		d := document{file: "f", index: 9, line: 41, data: []byte(bad)}
		_, err := d.toJSON()
		_, padded := yaml.YAMLToJSONStrict(append(bytes.Repeat([]byte("\n"), d.line-1), bad...))
		if err == nil || padded == nil || err.Error() != "malformed YAML: "+oneLine(padded.Error()) {
			t.Errorf("%q: error %v, want the parser's own for the file: %v", bad, err, padded)
		}
	}
}

func TestInputLimit(t *testing.T) {
	for _, tt := range []struct {
		name    string
		size    int
		wantErr bool
	}{
		{name: "below", size: 99},
		{name: "at the limit", size: 100},
		{name: "above", size: 101, wantErr: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			data, err := input{maxBytes: 100}.readAll(strings.NewReader(strings.Repeat("a", tt.size)))
			if tt.wantErr {
				if want := "larger than the limit of 100 bytes (--max-file-bytes)"; err == nil || err.Error() != want {
					t.Errorf("error %v, want %s", err, want)
				}
				return
			}
			if err != nil || len(data) != tt.size {
				t.Errorf("read %d bytes, error %v; want %d bytes", len(data), err, tt.size)
			}
		})
	}
}

// endless is a reader with no end, as /dev/zero is.
type endless struct{}

func (endless) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func TestReadingStopsAtTheLimit(t *testing.T) {
	_, err := input{maxBytes: 1 << 20}.readAll(endless{})
	if !errors.As(err, new(errTooLarge)) {
		t.Errorf("error %v, want the size limit's", err)
	}
}

// TestValidateSkipsWhatIsNotARegularFile validates a directory holding a
// symbolic link to a device that never ends, as a pull request can.
func TestValidateSkipsWhatIsNotARegularFile(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs /dev/zero")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "good.yaml"), []byte(profile("good", "")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "x.yaml")); err != nil {
		t.Fatal(err)
	}
	code, out, summary := run(t, dir, "", ".")
	want := "validate: x.yaml: skipped: not a regular file\n" +
		"validate: 1 SchedulingProfiles checked, 0 refused; 0 documents malformed; 0 documents of other kinds skipped\n"
	if code != 0 || out != "" {
		t.Errorf("exit code %d, output %q", code, out)
	}
	if diff := cmp.Diff(want, summary); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
}

// TestOversizeInput gives validate and convert a file over the limit.
func TestOversizeInput(t *testing.T) {
	dir := t.TempDir()
	big := profile("big", "") + "# " + strings.Repeat("x", DefaultMaxFileBytes) + "\n"
	if err := os.WriteFile(filepath.Join(dir, "big.yaml"), []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("big.yaml: larger than the limit of %d bytes (--max-file-bytes)\n", DefaultMaxFileBytes)
	code, _, summary := run(t, dir, "", "big.yaml")
	if code != ExitUsage || summary != "validate: "+want {
		t.Errorf("validate: exit code %d, %q", code, summary)
	}
	// A larger limit reads it.
	if code, _, summary := run(t, dir, "", "--max-file-bytes", fmt.Sprint(2*DefaultMaxFileBytes), "big.yaml"); code != 0 {
		t.Errorf("validate --max-file-bytes: exit code %d, %s", code, summary)
	}
	var stdout, stderr bytes.Buffer
	code = Convert(context.Background(), []string{filepath.Join(dir, "big.yaml")}, Streams{In: strings.NewReader(""), Out: &stdout, Err: &stderr})
	if code != ExitUsage || stderr.String() != "convert: "+filepath.Join(dir, want) {
		t.Errorf("convert: exit code %d, %q", code, stderr.String())
	}
	stderr.Reset()
	code = Convert(context.Background(), []string{"-"}, Streams{In: io.MultiReader(strings.NewReader("apiVersion: v1\n"), endless{}), Out: &stdout, Err: &stderr})
	if want := fmt.Sprintf("convert: <stdin>: larger than the limit of %d bytes (--max-file-bytes)\n", DefaultMaxFileBytes); code != ExitUsage || stderr.String() != want {
		t.Errorf("convert of an endless stdin: exit code %d, %q", code, stderr.String())
	}
}

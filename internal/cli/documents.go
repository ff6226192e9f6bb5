package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// stdinName is how documents read from standard input are named in
// messages.
const stdinName = "<stdin>"

// DefaultMaxFileBytes is how much of one file or of standard input
// validate and convert read at most: four SchedulingProfiles of the
// largest spec the operator accepts (profilebuild.MaxSpecBytes, 1 MiB),
// with room for their metadata. The files come from pull requests, so
// what is read must be bounded.
const DefaultMaxFileBytes = 4 << 20

// input reads the files the subcommands are given, each through a size
// limit.
type input struct {
	maxBytes int64
}

// addFlags adds the flag that sets the size limit.
func (in *input) addFlags(fs *flag.FlagSet) {
	fs.Int64Var(&in.maxBytes, "max-file-bytes", DefaultMaxFileBytes, "How many bytes one file (or standard input) may have; a larger one is not read, and the command exits 2.")
}

// errTooLarge is the error of a file over the limit.
type errTooLarge struct{ limit int64 }

func (e errTooLarge) Error() string {
	return fmt.Sprintf("larger than the limit of %d bytes (--max-file-bytes)", e.limit)
}

// limitedReader reads from r until more than limit bytes come, then fails
// with errTooLarge, so that a reader with no end (/dev/zero, a FIFO) is
// never buffered without bound.
type limitedReader struct {
	r     io.Reader
	left  int64
	limit int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.left < 0 {
		return 0, errTooLarge{l.limit}
	}
	// One byte beyond the limit tells a file of exactly limit bytes from
	// a larger one.
	if int64(len(p)) > l.left+1 {
		p = p[:l.left+1]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	if l.left < 0 {
		return n, errTooLarge{l.limit}
	}
	return n, err
}

// limit returns r read through the size limit.
func (in input) limit(r io.Reader) io.Reader {
	return &limitedReader{r: r, left: in.maxBytes, limit: in.maxBytes}
}

// readAll reads r whole, up to the size limit.
func (in input) readAll(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(in.limit(r))
	var tooLarge errTooLarge
	if errors.As(err, &tooLarge) {
		return nil, tooLarge
	}
	return data, err
}

// document is one YAML document of a file.
type document struct {
	// file names where it came from; index counts the file's documents
	// from 1.
	file  string
	index int
	// line is the file's line the document starts at, from 1; 0 is
	// taken as 1.
	line int
	// data is the document's text. Documents of a file share its buffer.
	data []byte
}

func (d document) String() string { return fmt.Sprintf("%s:%d", d.file, d.index) }

// splitDocuments splits a file into YAML documents as kubectl does
// (k8s.io/apimachinery's YAMLReader): a line starting with "---", then
// only spaces or a comment, separates documents, and an empty document
// is no document. The documents are slices of data, so that what is held
// stays the size of the file whatever the number of documents.
func splitDocuments(file string, data []byte) []document {
	var (
		docs  []document
		start = 0 // offset of the current document
		first = 1 // the line it starts at
		line  = 0
	)
	flush := func(end int) {
		if end > start {
			docs = append(docs, document{file: file, index: len(docs) + 1, line: first, data: data[start:end:end]})
		}
	}
	for off := 0; off < len(data); {
		end := len(data)
		if i := bytes.IndexByte(data[off:], '\n'); i >= 0 {
			end = off + i + 1
		}
		line++
		if rest, ok := bytes.CutPrefix(data[off:end], []byte("---")); ok {
			if rest = bytes.TrimSpace(rest); len(rest) == 0 || rest[0] == '#' {
				flush(off)
				start, first = end, line+1
			}
		}
		off = end
	}
	flush(len(data))
	return docs
}

// isManifest says whether a directory's file is searched for documents.
func isManifest(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// readDocuments reads the documents of each path: a file, a directory
// searched recursively for manifests, or "-" for stdin. Directories whose
// names begin with a dot (.git, .github) are not searched: they hold no
// manifests, and CI workflows are YAML too. In a directory only regular
// files are read: a symbolic link in a pull request could name anything
// on the machine (/dev/zero, a FIFO, a file outside the checkout). The
// files skipped for that are returned, to be named in the summary.
func (in input) readDocuments(paths []string, stdin io.Reader) (docs []document, skipped []string, err error) {
	read := func(name string, r io.Reader) error {
		data, err := in.readAll(r)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		docs = append(docs, splitDocuments(name, data)...)
		return nil
	}
	readFile := func(path string) error {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		return read(path, f)
	}
	for _, path := range paths {
		if path == "-" {
			if err := read(stdinName, stdin); err != nil {
				return nil, nil, err
			}
			continue
		}
		info, err := os.Stat(path)
		if err != nil {
			return nil, nil, err
		}
		if !info.IsDir() {
			// Named on the command line: whatever it is, it is read
			// through the limit.
			if err := readFile(path); err != nil {
				return nil, nil, err
			}
			continue
		}
		err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
			switch {
			case err != nil:
				return err
			case d.IsDir():
				if p != path && strings.HasPrefix(d.Name(), ".") {
					return filepath.SkipDir
				}
				return nil
			case !isManifest(p):
				return nil
			case !d.Type().IsRegular():
				skipped = append(skipped, p)
				return nil
			}
			return readFile(p)
		})
		if err != nil {
			return nil, nil, err
		}
	}
	return docs, skipped, nil
}

// yamlLine matches the line numbers in the YAML parser's errors: "yaml:
// line N: ..." and, in a list of unmarshal errors, "\n  line N: ...".
var yamlLine = regexp.MustCompile(`(^yaml: |\n  )line (\d+): `)

// toJSON converts a document to JSON as kube-scheduler's and the API
// server's strict decoders do: a key given twice is an error, reported
// with its line in the file.
func (d document) toJSON() ([]byte, error) {
	data, offset := d.data, 0
	if d.line > 1 {
		// The parser names no line for an error on the first line (its
		// line 0) of what it reads: one blank line in front makes it name
		// each line, which is then moved to the file's.
		data, offset = append([]byte("\n"), d.data...), d.line-2
	}
	json, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		// The YAML parser lists its errors on indented lines.
		return nil, fmt.Errorf("malformed YAML: %s", oneLine(moveLines(err.Error(), offset)))
	}
	return json, nil
}

// moveLines adds offset to the line numbers of a YAML parser's message.
func moveLines(msg string, offset int) string {
	if offset == 0 {
		return msg
	}
	return yamlLine.ReplaceAllStringFunc(msg, func(m string) string {
		sub := yamlLine.FindStringSubmatch(m)
		n, err := strconv.Atoi(sub[2])
		if err != nil {
			return m
		}
		return sub[1] + "line " + strconv.Itoa(n+offset) + ": "
	})
}

// oneLine joins a message's lines, so that each finding stays one line
// of output.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}

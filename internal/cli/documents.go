package cli

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// stdinName is how documents read from standard input are named in
// messages.
const stdinName = "<stdin>"

// document is one YAML document of a file.
type document struct {
	// file names where it came from; index counts the file's documents
	// from 1.
	file  string
	index int
	// data is the document with as many blank lines in front as there
	// are lines before it in the file, so that the YAML parser's line
	// numbers are the file's.
	data []byte
}

func (d document) String() string { return fmt.Sprintf("%s:%d", d.file, d.index) }

// splitDocuments splits a stream into YAML documents as kubectl does
// (k8s.io/apimachinery's YAMLReader): a line starting with "---", then
// only spaces or a comment, separates documents, and an empty document
// is no document.
func splitDocuments(file string, r io.Reader) ([]document, error) {
	var (
		docs  []document
		cur   bytes.Buffer
		start = 1 // the line cur starts at
		line  = 0
	)
	flush := func() {
		if cur.Len() > 0 {
			data := append(bytes.Repeat([]byte("\n"), start-1), cur.Bytes()...)
			docs = append(docs, document{file: file, index: len(docs) + 1, data: data})
		}
		cur.Reset()
		start = line + 1
	}
	br := bufio.NewReader(r)
	for {
		text, err := br.ReadString('\n')
		if text != "" {
			line++
			if rest, ok := strings.CutPrefix(text, "---"); ok {
				if rest = strings.TrimSpace(rest); rest == "" || rest[0] == '#' {
					flush()
					text = ""
				}
			}
			if text != "" {
				cur.WriteString(text)
			}
		}
		if err == io.EOF {
			flush()
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
	}
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
// manifests, and CI workflows are YAML too.
func readDocuments(paths []string, stdin io.Reader) ([]document, error) {
	var docs []document
	read := func(name string, r io.Reader) error {
		d, err := splitDocuments(name, r)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		docs = append(docs, d...)
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
				return nil, err
			}
			continue
		}
		info, err := os.Stat(path)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			if err := readFile(path); err != nil {
				return nil, err
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
			case isManifest(p):
				return readFile(p)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return docs, nil
}

// toJSON converts a document to JSON as kube-scheduler's and the API
// server's strict decoders do: a key given twice is an error, reported
// with its line.
func (d document) toJSON() ([]byte, error) {
	data, err := yaml.YAMLToJSONStrict(d.data)
	if err != nil {
		// The YAML parser lists its errors on indented lines.
		return nil, fmt.Errorf("malformed YAML: %s", oneLine(err.Error()))
	}
	return data, nil
}

// oneLine joins a message's lines, so that each finding stays one line
// of output.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}

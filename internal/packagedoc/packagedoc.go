// Package packagedoc writes docs/packages.md, the table of every package in
// the repository and what it is for, from `go list` and the first sentence
// of each package's doc comment. The table is data, never prose of its own:
// a package that is added, moved or removed changes it at the next
// regeneration, and a package's line is changed in that package's doc
// comment, so the table and the code cannot disagree.
package packagedoc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// Package is one package as go list reports it.
type Package struct {
	// Dir is the package's directory relative to the repository root,
	// slash-separated ("ledger", "cmd/actledger", "bench/peers").
	Dir string
	// ImportPath is the package's import path.
	ImportPath string
	// Name is the package's name; "main" for a command.
	Name string
	// Doc is the first sentence of the package's doc comment (go list's
	// synopsis); empty when the package has none.
	Doc string
}

// Command reports whether the package builds a program.
func (p Package) Command() bool { return p.Name == "main" }

// Internal reports whether only its own module may import the package (a
// path element "internal").
func (p Package) Internal() bool { return slices.Contains(strings.Split(p.Dir, "/"), "internal") }

// List returns the packages of every module under root, the repository's
// own and the nested ones (bench/peers is a module of its own, which
// `go list ./...` at the root does not reach), sorted by directory. It runs
// `go list -find`, which reads each package's files but resolves no
// dependency, so it needs neither the network nor the module cache.
func List(ctx context.Context, root string) ([]Package, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("list packages: %w", err)
	}
	modules, err := modules(root)
	if err != nil {
		return nil, err
	}
	var pkgs []Package
	for _, dir := range modules {
		got, err := goList(ctx, root, dir)
		if err != nil {
			return nil, err
		}
		pkgs = append(pkgs, got...)
	}
	slices.SortFunc(pkgs, func(a, b Package) int { return strings.Compare(a.Dir, b.Dir) })
	return pkgs, nil
}

// modules returns the directories under root that hold a go.mod, root
// first, passing over what the go command ignores too (directories whose
// name starts with "." or "_", and testdata).
func modules(root string) ([]string, error) {
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrPermission) {
				return fs.SkipDir // a directory go list cannot read either
			}
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if p != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata") {
				return fs.SkipDir
			}
			return nil
		}
		if d.Name() == "go.mod" {
			dirs = append(dirs, filepath.Dir(p))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("find the modules under %s: %w", root, err)
	}
	return dirs, nil
}

// goList lists the packages of the module in dir. GOWORK=off keeps a
// workspace file from folding one module's packages into another's list.
func goList(ctx context.Context, root, dir string) ([]Package, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-e", "-find", "-json=Dir,ImportPath,Name,Doc", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list in %s: %w: %s", dir, err, bytes.TrimSpace(stderr.Bytes()))
	}
	var pkgs []Package
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p Package
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			return pkgs, nil
		} else if err != nil {
			return nil, fmt.Errorf("read go list's output in %s: %w", dir, err)
		}
		rel, err := filepath.Rel(root, p.Dir)
		if err != nil {
			return nil, fmt.Errorf("package %s: %w", p.ImportPath, err)
		}
		p.Dir = filepath.ToSlash(rel)
		pkgs = append(pkgs, p)
	}
}

// Undocumented returns the directories of the packages without a doc
// comment: each would be a row that says nothing.
func Undocumented(pkgs []Package) []string {
	var dirs []string
	for _, p := range pkgs {
		if p.Doc == "" {
			dirs = append(dirs, p.Dir)
		}
	}
	return dirs
}

// Regenerate is the command that rewrites docs/packages.md (with the other
// generated documents), named in the page and in a stale page's failure.
const Regenerate = "make docs"

// Markdown is docs/packages.md for pkgs: the commands, the packages other
// modules may import, and the internal ones, each a table of the package's
// directory (linked from docs/) and its doc comment's first sentence.
func Markdown(pkgs []Package) string {
	var b strings.Builder
	b.WriteString("# Packages\n\n")
	b.WriteString("Generated from `go list` and the first sentence of each package's doc comment by `" + Regenerate + "`\n")
	b.WriteString("(`go test ./internal/packagedoc -run PackagesDoc -update`); do not edit by hand: a package's line is\n")
	b.WriteString("changed in its doc comment. Where a rule lives, where SQL goes and how tests are written:\n")
	b.WriteString("[CONTRIBUTING.md](../CONTRIBUTING.md).\n")
	sections := []struct {
		title string
		in    func(Package) bool
	}{
		{"Commands", Package.Command},
		{"Packages", func(p Package) bool { return !p.Command() && !p.Internal() }},
		{"Internal packages", func(p Package) bool { return !p.Command() && p.Internal() }},
	}
	for _, s := range sections {
		fmt.Fprintf(&b, "\n## %s\n\n| package | what it is for |\n|---|---|\n", s.title)
		for _, p := range pkgs {
			if s.in(p) {
				fmt.Fprintf(&b, "| [`%s`](%s) | %s |\n", p.Dir, path.Join("..", p.Dir), cell(p.Doc))
			}
		}
	}
	return b.String()
}

// cell makes text safe inside a Markdown table cell.
func cell(text string) string {
	if text == "" {
		return "—"
	}
	return strings.ReplaceAll(text, "|", `\|`)
}

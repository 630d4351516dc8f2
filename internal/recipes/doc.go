// Package recipes holds the tests of the supplier recipes in
// docs/providers: each loads its page's providers file unchanged (only
// base_url is pointed at a fake of the supplier, written from the same
// documentation, in internal/mocksupplier/…) and drives a lost response through the
// whole pipeline, counting effects at the fake. The package has no code of
// its own: the pages are the product, the tests keep them true.
package recipes

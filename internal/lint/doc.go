// Package lint holds repository-wide checks written as tests: the one-way
// import rules of ARCHITECTURE.md section 2 (TestImportRules) and gofmt
// (TestGofmt). It has no non-test code besides this comment.
//
// # Invariants
//
//   - The checks read every .go file of the module, test files included,
//     except under testdata, vendor and hidden directories and inside nested
//     modules (directories other than the root that hold a go.mod).
//   - The import table is one map literal in lint_test.go; a package that is
//     not in it may import event only.
//
// # Imports
//
// Package lint imports nothing of ours (standard library only).
package lint

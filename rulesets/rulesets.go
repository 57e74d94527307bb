package rulesets

import "embed"

// FS holds the example rulesets: the *.cep files of this directory.
//
//go:embed *.cep
var FS embed.FS

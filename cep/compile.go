package cep

import "github.com/cepheus-cep/cepheus/rules"

// Ruleset is a compiled ruleset file: its schema, its rules and the tests
// written in it (package rules documents the fields).
type Ruleset = rules.Ruleset

// Rule is one compiled rule of a [Ruleset]. Rule.NFA and Rule.Key are what
// an [Operator] for the rule needs:
//
//	op, err := cep.NewOperator(cep.OperatorConfig{NFA: r.NFA, Key: r.Key})
type Rule = rules.Rule

// CompileRuleset parses, checks and compiles the source of a ruleset file
// (docs/rules.md). name is the file name that error positions carry. The
// error lists every problem found, as file:line:col: message lines
// ([rules.ErrorList]).
func CompileRuleset(name string, src []byte) (*Ruleset, error) {
	return rules.Load(name, src)
}

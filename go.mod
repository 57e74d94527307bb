module github.com/cepheus-cep/cepheus

go 1.26

require (
	github.com/cockroachdb/datadriven v1.0.3
	github.com/expr-lang/expr v1.17.8
)

require github.com/pmezard/go-difflib v1.0.0 // indirect

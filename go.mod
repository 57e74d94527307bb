module github.com/cepheus-cep/cepheus

go 1.26

require github.com/expr-lang/expr v1.17.8

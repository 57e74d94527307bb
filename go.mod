module github.com/cepheus-cep/cepheus

go 1.26

module github.com/clasp-dev/clasp

go 1.26

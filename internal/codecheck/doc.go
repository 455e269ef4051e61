// Package codecheck holds the checks of the code itself that CI used to run
// beside the tests: formatting, vet, staticcheck and tidy modules. As tests,
// they run with the README's test command, the one command CI runs, so a
// newcomer's run checks what CI checks.
package codecheck

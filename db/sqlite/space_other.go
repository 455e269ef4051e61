//go:build !unix

package sqlite

import "errors"

// freeBytes is not known here.
func freeBytes(string) (uint64, error) { return 0, errors.ErrUnsupported }

//go:build !unix

package server

import "os"

// lockDB does nothing where flock is not available: there, nothing stops a
// second sked serve on the same database.
func lockDB(string) (*os.File, error) { return nil, nil }

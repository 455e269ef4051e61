//go:build !unix

package server

// lockDB does nothing where flock is not available: there, nothing stops a
// second sked serve on the same database.
func lockDB(string) (func(), error) { return func() {}, nil }

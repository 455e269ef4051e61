//go:build !unix

package testpg

// start reports that a throwaway server is started on Unix only.
func start() (string, error) {
	return "", &MissingError{"a throwaway PostgreSQL is started on Unix only"}
}

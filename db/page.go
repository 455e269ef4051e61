package db

// DefaultPageLimit is the page size of JobList and RunList when the caller
// asks for none.
const DefaultPageLimit = 50

// PageLimit is limit, or DefaultPageLimit when it is not positive.
func PageLimit(limit int) int {
	if limit <= 0 {
		return DefaultPageLimit
	}
	return limit
}

// RunsBefore is the run id a page of runs starts below: cursor, or past
// every run for the first page (cursor 0).
func RunsBefore(cursor int64) int64 {
	if cursor <= 0 {
		return 1<<63 - 1
	}
	return cursor
}

// Page cuts items, read with one more than limit to learn whether more
// follow, to limit, and returns the cursor of the next page: key of the last
// item kept, or the zero value on the last page.
func Page[T any, C any](items []T, limit int, key func(T) C) ([]T, C) {
	var next C
	if len(items) > limit {
		items = items[:limit]
		next = key(items[limit-1])
	}
	return items, next
}

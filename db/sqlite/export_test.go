package sqlite

// The hot statements, for the plan checks of plans_test.go.
var (
	ClaimSQL      = claimSQL
	InsertRunsSQL = insertRunsSQL
	LeasedJobSQL  = leasedJobSQL
	FinishJobSQL  = finishJobSQL
	FinishRunSQL  = finishRunSQL
)

// ParseFixed exposes parseFixed to FuzzParseFixed.
var ParseFixed = parseFixed

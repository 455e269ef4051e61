package worker

import (
	"crypto/rand"
	"os"
	"strconv"
)

// ProcessID is a pool's worker id (PoolConfig.WorkerID) for this process
// on host: HOST/PID-XXXXXX. The host and pid name the process for people;
// the random part makes the id this pool's alone, as HeldReader needs:
// two containers on one host's network both run as pid 1 under that
// host's name, and with one id the jobs a lost claim leased to either
// would be run by both.
func ProcessID(host string) string {
	return host + "/" + strconv.Itoa(os.Getpid()) + "-" + rand.Text()[:6]
}

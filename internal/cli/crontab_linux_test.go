package cli

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

// openPTY opens a pseudo-terminal and returns its terminal end, or skips
// the test where there is none.
func openPTY(t *testing.T) *os.File {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { ptmx.Close() })
	var unlock int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, ptmx.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		t.Skipf("unlock the pseudo-terminal: %v", e)
	}
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, ptmx.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		t.Skipf("number of the pseudo-terminal: %v", e)
	}
	pts, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("open the pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { pts.Close() })
	return pts
}

// TestImportCrontab_TerminalInput: without a FILE, and standard input a
// terminal (nothing piped in), sked import-crontab says how to give a
// crontab instead of waiting for one to be typed.
func TestImportCrontab_TerminalInput(t *testing.T) {
	pts := openPTY(t)
	stdin := os.Stdin
	os.Stdin = pts
	t.Cleanup(func() { os.Stdin = stdin })
	code, _, stderr := mainOf("import-crontab")
	if code != ExitUsage || !strings.Contains(stderr, "standard input is a terminal: give its FILE, or pipe it in: crontab -l | sked import-crontab") {
		t.Errorf("sked import-crontab with a terminal for input: exit %d, %q", code, stderr)
	}
}

package cluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A cluster tied to a process (`sluice cluster up --exit-with PID`): up starts a
// watcher, `sluice cluster down --dir D --purge --when-gone PID` in a session of
// its own, which waits for that process to end and then takes the cluster
// down (unmount, daemons stopped, the mem tier's memory freed) as `sluice
// down --purge` would; with `--exit-remove` it then deletes the state
// directory (`down --remove-state`). A script that starts a cluster and is killed, even
// by SIGKILL where its trap cannot run, leaves nothing mounted or
// running. `sluice cluster down` stops the watcher first.

// startWatcher starts the watcher of c for process pid and records it;
// with remove it deletes the state directory after.
func (c *Cluster) startWatcher(pid int, remove bool) error {
	if !processAlive(pid) {
		return fmt.Errorf("--exit-with %d: no such process", pid)
	}
	logf, err := os.OpenFile(filepath.Join(c.Dir, "logs", "watch.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	args := []string{"cluster", "down", "--dir", c.Dir, "--purge", "--when-gone", strconv.Itoa(pid)}
	if remove {
		args = append(args, "--remove-state")
	}
	cmd := exec.Command(c.Exe, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the watcher: %v", err)
	}
	c.Watcher = cmd.Process.Pid
	go cmd.Wait()
	return nil
}

// WaitGone returns once process pid has ended (at once if there is none).
// It holds a pidfd of the process, so a new process given the same pid
// later is not mistaken for it; where the kernel has none, it looks every
// half second.
func WaitGone(pid int) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	if err != nil {
		for processAlive(pid) {
			time.Sleep(500 * time.Millisecond)
		}
		return nil
	}
	defer unix.Close(fd)
	for {
		// readable once the process has ended (zombie or reaped)
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("waiting for process %d: %v", pid, err)
		}
		if n > 0 {
			return nil
		}
	}
}

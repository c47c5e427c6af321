package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"github.com/sluice-hpc/sluice/api"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
)

func (c *Cluster) pid(name string) int {
	for _, d := range c.Daemons {
		if d.Name == name {
			return d.Pid
		}
	}
	return 0
}

func (c *Cluster) logTail(name string) string {
	b, err := os.ReadFile(filepath.Join(c.Dir, "logs", name+".log"))
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 8 {
		lines = lines[len(lines)-8:]
	}
	return "\n  " + name + " log:\n    " + strings.Join(lines, "\n    ")
}

func (c *Cluster) start(d *Daemon) error {
	logf, err := os.OpenFile(filepath.Join(c.Dir, "logs", d.Name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	exe := c.Exe
	if d.Exe != "" {
		exe = d.Exe
	}
	args := d.Args
	if d.Host != "" {
		h, err := c.host(d.Host)
		if err != nil {
			return err
		}
		exe, args = inHost(h, exe, args)
	}
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if len(d.Env) > 0 {
		cmd.Env = append(os.Environ(), d.Env...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %v", d.Name, err)
	}
	d.Pid = cmd.Process.Pid
	go cmd.Wait() // reap if it exits while we are still running
	return nil
}

// waitRegistered waits until n daemons are listening (their ports accept).
func (c *Cluster) waitRegistered(n int, d time.Duration) error {
	for _, dm := range c.Daemons {
		if strings.HasPrefix(dm.Name, "meta") || strings.HasPrefix(dm.Name, "manager-") || dm.Name == "mount" {
			continue // (a standby listens only once it is active)
		}
		if addr, ok := flagValue(dm.Args, "--listen"); ok {
			if err := waitListening(addr, d); err != nil {
				return fmt.Errorf("%s did not start: %v%s", dm.Name, err, c.logTail(dm.Name))
			}
		}
	}
	// then until every one of them has registered with the metadata
	// service, so the mount finds all forwarding nodes and files are
	// placed over all data servers from the first write
	secret, err := os.ReadFile(c.SecretFile())
	if err != nil {
		return err
	}
	mc := rpc.NewClient(c.MetaAddr, []byte(strings.TrimSpace(string(secret))), rpc.ClientOptions{Timeout: d, Name: "metadata service"})
	defer mc.Close()
	deadline := time.Now().Add(d)
	for {
		resp, err := rpc.Do(context.Background(), mc, api.Servers, &wire.Empty{})
		if err != nil {
			return err
		}
		alive := 0
		for _, s := range resp.Servers {
			if s.Alive && (s.Role == "data" || s.Role == "fwd") {
				alive++
			}
		}
		if alive >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d daemons registered after %v", alive, n, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitListening waits up to d until addr, or any address of a
// comma-separated list, accepts connections.
func waitListening(addr string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		var err error
		for _, a := range strings.Split(addr, ",") { // a list: any of them
			var c net.Conn
			if c, err = net.DialTimeout("tcp", a, time.Second); err == nil {
				c.Close()
				return nil
			}
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// mountInfo returns the /proc/self/mountinfo fields of the mount at mnt,
// or nil.
func mountInfo(mnt string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) >= 5 && fields[4] == mnt {
			return fields
		}
	}
	return nil
}

// Mounted reports whether mnt is a sluice FUSE mount.
func Mounted(mnt string) bool {
	fields := mountInfo(mnt)
	for i, x := range fields {
		if x == "-" && i+1 < len(fields) && fields[i+1] == "fuse.sluice" {
			return true
		}
	}
	return false
}

func waitMounted(mnt string, d time.Duration, alive func() bool) error {
	deadline := time.Now().Add(d)
	for !Mounted(mnt) {
		if !alive() {
			return errors.New("the mount process exited")
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not mounted after %v", d)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var st syscall.Statfs_t
	return syscall.Statfs(mnt, &st)
}

func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	// a zombie is not alive
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i > 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

func (c *Cluster) alive() bool {
	for _, d := range c.Daemons {
		if processAlive(d.Pid) {
			return true
		}
	}
	return false
}

// AbortFuse cuts the kernel's FUSE connection of a mount, failing every
// request still waiting on it, and detaches the mount: the last resort when
// the daemon behind it is gone or stuck.
func AbortFuse(mnt string) {
	if fields := mountInfo(mnt); fields != nil {
		if _, minor, ok := strings.Cut(fields[2], ":"); ok {
			ctl := "/sys/fs/fuse/connections"
			if _, err := os.Stat(ctl + "/" + minor); err != nil {
				syscall.Mount("fusectl", ctl, "fusectl", 0, "")
			}
			os.WriteFile(ctl+"/"+minor+"/abort", []byte("1"), 0o200)
		}
	}
	syscall.Unmount(mnt, syscall.MNT_DETACH)
}

// stop unmounts and terminates every daemon, the client first, and the
// watcher before them (unless it is the caller).
func (c *Cluster) stop() {
	if c.Watcher != 0 && c.Watcher != os.Getpid() && isWatcher(c.Watcher, c.Dir) {
		stopPid(c.Watcher)
	}
	if Mounted(c.Mount) {
		if err := syscall.Unmount(c.Mount, 0); err != nil {
			AbortFuse(c.Mount)
		}
	}
	for i := len(c.Daemons) - 1; i >= 0; i-- {
		stopPid(c.Daemons[i].Pid)
	}
}

// isWatcher says whether process pid is the watcher of the cluster in
// dir (and not another process given its pid since).
func isWatcher(pid int, dir string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && strings.Contains(string(b), "\x00--when-gone\x00") && strings.Contains(string(b), "\x00--dir\x00"+dir+"\x00")
}

func stopPid(pid int) {
	if !processAlive(pid) {
		return
	}
	syscall.Kill(pid, syscall.SIGTERM)
	for i := 0; i < 100 && processAlive(pid); i++ {
		time.Sleep(50 * time.Millisecond)
	}
	if processAlive(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

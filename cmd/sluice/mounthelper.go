package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	clusterpkg "github.com/sluice-hpc/sluice/cluster"
)

// mount(8) and /etc/fstab: `mount -t fuse.sluice SOURCE DIR -o OPTIONS`
// runs /sbin/mount.fuse.sluice (a link to this binary), which starts
// `sluice mount` in the background and returns once DIR is mounted. The
// source is the metadata service's address (or its servers' addresses,
// comma-separated), shown as the mount's source; the options are the
// kernel's (ro, rw, dev, suid, exec and their negations: dev and suid
// unless told otherwise, as mount(8) takes them) and any flag of
// `sluice mount` as NAME or NAME=VALUE (secret-file=/etc/sluice/secret,
// node=n17, cache-data); log=FILE says where the mount logs.

// kernelOptions are the mount options for the kernel.
var kernelOptions = map[string]bool{"ro": true, "rw": true, "dev": true, "nodev": true, "suid": true, "nosuid": true,
	"exec": true, "noexec": true}

// atimeOptions are mount(8)'s access-time options, which a FUSE mount
// applies itself: the value of `sluice mount --atime` each sets (atime
// and norelatime as Linux takes them: the default, and updates at every
// read).
var atimeOptions = map[string]string{"relatime": "relatime", "atime": "relatime", "nostrictatime": "relatime",
	"strictatime": "strictatime", "norelatime": "strictatime", "noatime": "noatime"}

// ignoredOptions are mount(8)'s and fstab's own, or the kernel's that a
// FUSE mount does not need (access times are written lazily anyway).
var ignoredOptions = map[string]bool{"defaults": true, "remount": true, "auto": true, "noauto": true, "nofail": true, "_netdev": true,
	"user": true, "users": true, "nouser": true, "lazytime": true, "nolazytime": true, "sync": true, "async": true, "dirsync": true,
	// a FUSE mount's own, which sluice always sets
	"allow_other": true, "default_permissions": true}

// applyMountOptions sets fs's flags named in the comma-separated options
// and returns the kernel's options among them.
func applyMountOptions(fs *pflag.FlagSet, opts string) ([]string, error) {
	var kernel []string
	for _, o := range strings.Split(opts, ",") {
		name, value, hasValue := strings.Cut(strings.TrimSpace(o), "=")
		switch {
		case name == "":
		case kernelOptions[name] && !hasValue:
			if name != "rw" {
				kernel = append(kernel, name)
			}
		case ignoredOptions[name], strings.HasPrefix(name, "x-"), name == "comment", name == "log":
		case atimeOptions[name] != "" && !hasValue:
			if err := fs.Set("atime", atimeOptions[name]); err != nil {
				return nil, err
			}
		case name == "diratime" && !hasValue:
			if err := fs.Set("nodiratime", "false"); err != nil {
				return nil, err
			}
		case fs.Lookup(name) != nil && name != "options" && name != "source":
			if !hasValue {
				if fs.Lookup(name).Value.Type() != "bool" {
					return nil, fmt.Errorf("mount option %s wants a value (%s=...)", name, name)
				}
				value = "true"
			}
			if err := fs.Set(name, value); err != nil {
				return nil, fmt.Errorf("mount option %s: %v", o, err)
			}
		default:
			return nil, fmt.Errorf("unknown mount option %q", o)
		}
	}
	return kernel, nil
}

// mountHelper is this binary run by mount(8) as mount.fuse.sluice:
// SOURCE DIR [-o OPTIONS] [-fnsv].
func mountHelper(args []string) error {
	var pos []string
	var opts []string
	fake := false
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-o" && i+1 < len(args):
			opts = append(opts, args[i+1])
			i++
		case strings.HasPrefix(a, "-o"):
			opts = append(opts, a[2:])
		case a == "-f":
			fake = true
		case a == "-n", a == "-s", a == "-v":
		default:
			pos = append(pos, a)
		}
	}
	if len(pos) != 2 {
		return errors.New("usage: mount.fuse.sluice SOURCE DIR [-o OPTIONS]")
	}
	src, dir := pos[0], pos[1]
	// mount(8) passes nodev and nosuid but not their defaults, dev and
	// suid, which it takes as given (as for any file system root mounts)
	all := strings.Join(append([]string{"dev,suid"}, opts...), ",")
	logPath := filepath.Join("/var/log/sluice", "mount"+strings.ReplaceAll(filepath.Clean(dir), "/", "-")+".log")
	for _, o := range strings.Split(all, ",") {
		if v, ok := strings.CutPrefix(o, "log="); ok {
			logPath = v
		}
	}
	if slices.Contains(strings.Split(all, ","), "remount") {
		return remount(dir, all)
	}
	// the options are checked here, so that mount(8) reports a bad one
	if _, err := applyMountOptions(mountFlags(), all); err != nil {
		return err
	}
	if fake {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return err
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	meta := strings.TrimPrefix(src, "sluice://")
	cmd := exec.Command(exe, "mount", "--meta", meta, "--source", src, "--options", all, dir)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(2 * time.Minute)
	for !clusterpkg.Mounted(dir) {
		select {
		case err := <-exited:
			return fmt.Errorf("sluice mount %s exited (%v); its log is %s", dir, err, logPath)
		case <-deadline:
			cmd.Process.Kill()
			return fmt.Errorf("%s not mounted after 2 minutes; the mount's log is %s", dir, logPath)
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// mountFlags is a flag set of `sluice mount`, for checking options.
func mountFlags() *pflag.FlagSet {
	fs := pflag.NewFlagSet("mount", pflag.ContinueOnError)
	setupMount(fs)
	return fs
}

// remount changes a mounted sluice's kernel options (mount -o
// remount,ro): ro or rw, and nodev, nosuid and noexec as given.
func remount(dir, opts string) error {
	flags := uintptr(syscall.MS_REMOUNT)
	for _, o := range strings.Split(opts, ",") {
		switch o {
		case "ro":
			flags |= syscall.MS_RDONLY
		case "rw":
			flags &^= syscall.MS_RDONLY
		case "nodev":
			flags |= syscall.MS_NODEV
		case "nosuid":
			flags |= syscall.MS_NOSUID
		case "noexec":
			flags |= syscall.MS_NOEXEC
		}
	}
	if err := syscall.Mount("", dir, "", flags, ""); err != nil {
		return fmt.Errorf("remount %s: %v", dir, err)
	}
	return nil
}

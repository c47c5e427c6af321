// Command sluice is the single binary of sluice: every role (metadata
// service, data server, forwarding daemon, FUSE client) and the tools to run
// a local cluster and inspect it. Only this package exits the process.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluice-hpc/sluice/internal/atomicfile"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/size"
)

func main() {
	if strings.HasPrefix(filepath.Base(os.Args[0]), "mount.") {
		// run by mount(8) as mount.fuse.sluice (mounthelper.go)
		if err := mountHelper(os.Args[1:]); err != nil {
			fmt.Fprintf(os.Stderr, "mount.fuse.sluice: %v\n", err)
			os.Exit(1)
		}
		return
	}
	args, note := legacyArgs(os.Args[1:])
	if note != "" {
		fmt.Fprintln(os.Stderr, note)
	}
	root := newRoot()
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", cmd.CommandPath(), err)
		if strings.HasPrefix(err.Error(), "unknown command") {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// logger is a daemon's logger: text on stderr at the level SLUICE_LOG_LEVEL
// names (debug, info, warn, error; default info).
func logger(role string) *slog.Logger {
	level := slog.LevelInfo
	if v := os.Getenv("SLUICE_LOG_LEVEL"); v != "" {
		if err := level.UnmarshalText([]byte(v)); err != nil {
			level = slog.LevelInfo
		}
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("role", role)
}

func readSecret(file string) ([]byte, error) {
	if s := os.Getenv("SLUICE_SECRET"); s != "" && file == "" {
		return []byte(s), nil
	}
	if file == "" {
		return nil, fmt.Errorf("--secret-file is required (or set SLUICE_SECRET)")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("secret: %v", err)
	}
	s := strings.TrimSpace(string(b))
	if len(s) < 16 {
		return nil, fmt.Errorf("secret in %s is shorter than 16 characters", file)
	}
	return []byte(s), nil
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}

// signalContext ends on SIGINT or SIGTERM.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
}

// startPprof serves Go's profiles for performance work (docs/benchmarks.md).
// startPprof serves Go profiles on addr, and reg's series at /metrics
// beside them (bench scripts read every daemon's counters there).
func startPprof(addr string, reg *prometheus.Registry) {
	if addr == "" {
		return
	}
	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	// lock contention and blocking for /debug/pprof/mutex and /block
	// (bench/streams.sh PROFILE=N): one contention event in 10, one
	// blocking event per 10 µs blocked
	runtime.SetMutexProfileFraction(10)
	runtime.SetBlockProfileRate(10_000)
	go http.ListenAndServe(addr, nil)
}

func writeAddr(file, addr string) error {
	if file == "" {
		return nil
	}
	return atomicfile.Write(file, []byte(addr+"\n"), 0o644)
}

func checkListen(addr string) error {
	scheme, rest := rpc.SplitAddr(addr)
	if scheme != "tcp" {
		if rest == "" {
			return fmt.Errorf("--listen %q: no path", addr)
		}
		return nil
	}
	host, _, err := net.SplitHostPort(rest)
	if err != nil {
		return fmt.Errorf("--listen %q: %v", addr, err)
	}
	if host == "" {
		return fmt.Errorf("--listen %q: give an explicit address (0.0.0.0 to listen beyond loopback)", addr)
	}
	return nil
}

// sizeFlag parses a size flag for the client: 0 turns the feature off
// (negative in client.Config).
func sizeFlag(name, v string) (int64, error) {
	n, err := size.Parse(v)
	if err != nil {
		return 0, fmt.Errorf("--%s: %v", name, err)
	}
	if n == 0 {
		return -1, nil
	}
	return n, nil
}

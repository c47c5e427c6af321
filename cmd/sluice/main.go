// Command sluice is the single binary of sluice: every role (metadata
// service, data server, forwarding daemon, FUSE client) and the tools to run
// a local cluster and inspect it. Only this package exits the process.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluice-hpc/sluice/internal/atomicfile"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/size"
)

type command struct {
	name, usage string
	run         func(args []string) error
}

var commands = []command{
	{"up", "start a local cluster and mount it: up --dir STATE --mount MNT", cmdUp},
	{"down", "unmount and stop a local cluster: down --dir STATE [--purge]", cmdDown},
	{"status", "show servers, tiers, forwarding nodes and clients", cmdStatus},
	{"stat", "show a file's layout: stat PATH", cmdStat},
	{"jobs", "show what each job did, as the forwarding nodes saw it", cmdJobs},
	{"job", "Beacon's analysis of one job: job [--json] ID; register jobs: job start [--app A --nodes N,..] ID | job end ID | job list", cmdJob},
	{"records", "Beacon's records by job, node, server, layer, file and time: records [--job J] [--node N] [--ino I] [--since 10m]", cmdRecords},
	{"top", "live view of the busiest jobs and servers: top [--once]", cmdTop},
	{"profile", "application I/O profiles: profile show [KEY] | build JOB | import LOG.darshan", cmdProfile},
	{"workload", "run an application I/O behaviour as a job: workload --kind K --ranks N DIR", cmdWorkload},
	{"sim", "simulate a machine and a day of jobs with the daemons' policies: sim [--machine taihulight|cori-bb|tiny|FILE] (--swf LOG | --jobs FILE) [--policy ffm|dfra|both] [--fwds N] [--out DIR]", cmdSim},
	{"migrate", "move a file's data to a tier now: migrate --tier mem|ssd|hdd|pfs [--no-wait] PATH...", cmdMigrate},
	{"prefetch", "promote a job's input files to the mem tier ahead of its reads: prefetch --job J [--list FILE] PATH...", cmdPrefetch},
	{"bb", "a job's burst buffer, for Slurm's burst_buffer/lua (contrib/slurm): bb job-process|setup|data-in|paths|pre-run|post-run|data-out|teardown --job J --mount M --script S | bb pools | bb status", cmdBB},
	{"tier", "tiering policies and budgets: tier set DIR [--pin mem|ssd|none] [--drain now|on-close|cool|never|none] | tier show PATH | tier budget --server ID (SIZE | --release) [--wait 5m]", cmdTier},
	{"qos", "QoS rules the forwarding daemons and data servers enforce: qos add NAME [job=J] [uid=U] [gid=G] [node=N] [app=A] [op=read|write|meta] [rate=SIZE/s] [iops=N] [share=W] [--before RULE] | qos rm NAME | qos list [--json] | qos stats [--json]", cmdQoS},
	{"pool", "resource pools for performance-aware placement: pool create NAME --servers ID,.. [--perf ID=MB/s,..] | pool rm NAME | pool bind (DIR | --job J) NAME | pool unbind (DIR | --job J) | pool list [--json]", cmdPool},
	{"setstripe", "set a directory's chunk size and striping: setstripe [--chunk-size N] [--count G] [--unit N] DIR; node-local mode: setstripe --local [--tier T] DIR | setstripe --global DIR", cmdSetstripe},
	{"fault", "inject a fault: fault --server ID (--slow F | --fill BYTES | --stall MS)", cmdFault},
	{"restart", "restart one daemon of a local cluster: restart --dir STATE NAME", cmdRestart},
	{"meta", "run the metadata service", cmdMeta},
	{"data", "run a data server for one tier", cmdData},
	{"fwd", "run a forwarding daemon", cmdFwd},
	{"mount", "mount sluice with FUSE: mount [flags] MOUNTPOINT", cmdMount},
}

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		usage(os.Stdout)
		return
	}
	for _, c := range commands {
		if c.name == os.Args[1] {
			if err := c.run(os.Args[2:]); err != nil {
				if errors.Is(err, flag.ErrHelp) {
					return
				}
				fmt.Fprintf(os.Stderr, "sluice %s: %v\n", c.name, err)
				os.Exit(1)
			}
			return
		}
	}
	fmt.Fprintf(os.Stderr, "sluice: unknown command %q (run 'sluice help')\n", os.Args[1])
	os.Exit(2)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "sluice: application-aware I/O forwarding and tiered burst buffer\n\nCommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.usage)
	}
}

// flagSet returns a flag set that reports errors as one line, with a
// --config FILE option whose "name = value" lines set the same flags.
func flagSet(name string) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg := fs.String("config", "", "file of `name = value` lines setting these flags")
	return fs, cfg
}

// parseInterspersed parses flags wherever users type them: before, between
// or after the arguments (`sluice job 7001 --json`). "--" ends the flags.
func parseInterspersed(fs *flag.FlagSet, args []string) error {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if len(args) > 0 && len(rest) < len(args) && args[len(args)-len(rest)-1] == "--" {
			pos = append(pos, rest...) // after "--": all arguments
			break
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
	return fs.Parse(append([]string{"--"}, pos...))
}

func parse(fs *flag.FlagSet, cfg *string, args []string) error {
	if err := parseInterspersed(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(os.Stdout)
			fs.PrintDefaults()
			return err
		}
		return err
	}
	if *cfg == "" {
		return nil
	}
	b, err := os.ReadFile(*cfg)
	if err != nil {
		return fmt.Errorf("config: %v", err)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return fmt.Errorf("config %s:%d: want name = value", *cfg, i+1)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if fs.Lookup(k) == nil {
			return fmt.Errorf("config %s:%d: unknown setting %q", *cfg, i+1, k)
		}
		if set[k] {
			continue // the command line wins
		}
		if err := fs.Set(k, v); err != nil {
			return fmt.Errorf("config %s:%d: %s: %v", *cfg, i+1, k, err)
		}
	}
	return nil
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

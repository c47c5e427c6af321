package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sluice-hpc/sluice/cluster"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
)

// setupFunc declares a command's flags on fs and returns what runs it with
// the positional arguments once the flags are parsed.
type setupFunc func(fs *pflag.FlagSet) func(args []string) error

// spec is one command of the tree: its usage line ("stat PATH"), a
// one-line description, an example, and its flags and body.
type spec struct {
	use, short, example string
	aliases             []string
	setup               setupFunc
}

// leaf makes the command s describes.
func leaf(s spec) *cobra.Command {
	ex := "  " + strings.ReplaceAll(s.example, "\n", "\n  ")
	c := &cobra.Command{Use: s.use, Short: s.short, Example: ex, Aliases: s.aliases, Args: cobra.ArbitraryArgs}
	run := s.setup(c.Flags())
	c.RunE = func(_ *cobra.Command, args []string) error { return run(args) }
	return c
}

// group makes a noun: a command whose verbs are subs. Run alone it prints
// its help; with an unknown verb it fails.
func group(name, short string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{Use: name, Short: short, Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("unknown command %q for %q", args[0], c.CommandPath())
			}
			return c.Help()
		}}
	c.AddCommand(subs...)
	return c
}

// newRoot builds the command tree: the daemon roles, then nouns with their
// verbs (docs/cli.md is generated from it).
func newRoot() *cobra.Command {
	root := &cobra.Command{Use: "sluice", Short: "application-aware I/O forwarding and tiered burst buffer",
		Long: "sluice: application-aware I/O forwarding and tiered burst buffer for HPC clusters.\n\n" +
			"The daemon roles (meta, data, fwd, mount; and `monitor serve`, Beacon's records) run one part of a\n" +
			"cluster each; `sluice cluster up`\n" +
			"starts all of them on this host. The other commands ask a running cluster: by default the one\n" +
			"`sluice cluster up` started last, else the one --dir or --meta names.",
		SilenceUsage: true, SilenceErrors: true}
	root.PersistentFlags().String("config", "", "`FILE` of \"name = value\" lines setting this command's flags (the command line wins)")
	root.PersistentPreRunE = func(c *cobra.Command, _ []string) error {
		file, _ := c.Flags().GetString("config")
		return applyConfig(c.Flags(), file)
	}
	root.AddGroup(&cobra.Group{ID: "roles", Title: "Daemon roles:"}, &cobra.Group{ID: "admin", Title: "Running a cluster:"},
		&cobra.Group{ID: "research", Title: "Workloads and simulation:"})
	add := func(id string, cs ...*cobra.Command) {
		for _, c := range cs {
			c.GroupID = id
			root.AddCommand(c)
		}
	}
	add("roles", leaf(metaCmd), leaf(dataCmd), leaf(fwdCmd), leaf(mountCmd))
	add("admin",
		group("cluster", "start, stop and inspect a cluster", leaf(upCmd), leaf(downCmd), leaf(statusCmd), leaf(restartCmd), leaf(faultCmd), leaf(cutCmd), leaf(reconnectCmd)),
		group("file", "a file's layout and tier", leaf(statCmd), leaf(migrateCmd), leaf(prefetchCmd), leaf(stripeCmd)),
		group("tier", "tiering policies and budgets", leaf(tierSetCmd), leaf(tierShowCmd), leaf(tierBudgetCmd)),
		group("job", "jobs: their forwarding nodes, Beacon's analysis, what they did", leaf(jobShowCmd), leaf(jobStartCmd),
			leaf(jobEndCmd), leaf(jobListCmd), leaf(jobActivityCmd)),
		group("monitor", "Beacon's records and a live view; a monitor daemon keeping them", leaf(recordsCmd), leaf(topCmd), leaf(monitorServeCmd)),
		group("manager", "a cluster-wide manager in a process of its own", leaf(managerServeCmd)),
		group("profile", "application I/O profiles", leaf(profileShowCmd), leaf(profileBuildCmd), leaf(profileImportCmd)),
		group("qos", "QoS rules the forwarding daemons and data servers enforce", leaf(qosAddCmd), leaf(qosRmCmd),
			leaf(qosListCmd), leaf(qosStatsCmd)),
		group("pool", "resource pools for performance-aware placement", leaf(poolCreateCmd), leaf(poolRmCmd),
			leaf(poolBindCmd), leaf(poolUnbindCmd), leaf(poolListCmd)),
		bbGroup())
	add("research", leaf(workloadCmd),
		group("sim", "simulate a machine with the daemons' policies", leaf(simDayCmd), leaf(simBBCmd), leaf(simTiersCmd)))
	return root
}

// applyConfig sets the flags of fs that the command line left unset from
// file's "name = value" lines.
func applyConfig(fs *pflag.FlagSet, file string) error {
	if file == "" {
		return nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("config: %v", err)
	}
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return fmt.Errorf("config %s:%d: want name = value", file, i+1)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if fs.Lookup(k) == nil {
			return fmt.Errorf("config %s:%d: unknown setting %q", file, i+1, k)
		}
		if fs.Changed(k) {
			continue // the command line wins
		}
		if err := fs.Set(k, v); err != nil {
			return fmt.Errorf("config %s:%d: %s: %v", file, i+1, k, err)
		}
	}
	return nil
}

// conn is how a command reaches a running cluster: its state directory
// or the metadata service's address, and the secret.
type conn struct {
	dir, meta, secretFile *string
}

func addConn(fs *pflag.FlagSet) *conn {
	return &conn{
		dir:        fs.String("dir", "", "state directory of a local cluster (default: the one sluice cluster up started last)"),
		meta:       fs.String("meta", "", "metadata service address, or the comma-separated addresses of its servers, active and standing by (instead of --dir)"),
		secretFile: fs.String("secret-file", "", "file holding the cluster secret (default: the local cluster's, or $SLUICE_SECRET)"),
	}
}

// dial returns a client of the metadata service.
func (c *conn) dial() (*rpc.Client, error) {
	return dialMeta(*c.dir, *c.meta, *c.secretFile)
}

// servers is dial for a command that needs the registered daemons too.
func (c *conn) servers() (*rpc.Client, []wire.ServerInfo, error) {
	mc, err := c.dial()
	if err != nil {
		return nil, nil, err
	}
	servers, err := listServers(mc)
	if err != nil {
		mc.Close()
		return nil, nil, err
	}
	return mc, servers, nil
}

// secret is the cluster secret for talking to daemons other than the
// metadata service (nil if none is found: the call then fails naming it).
func (c *conn) secret() []byte {
	file := *c.secretFile
	if file == "" {
		if d, err := stateDir(*c.dir); err == nil {
			if cl, err := cluster.Load(d); err == nil {
				file = cl.SecretFile()
			}
		}
	}
	s, _ := readSecret(file)
	return s
}

// dialMeta returns a client of the metadata daemon: at metaAddr, or the
// local cluster's in dir (default: the current one).
func dialMeta(dir, metaAddr, secretFile string) (*rpc.Client, error) {
	if metaAddr == "" {
		d, err := stateDir(dir)
		if err != nil {
			return nil, err
		}
		c, err := cluster.Load(d)
		if err != nil {
			return nil, err
		}
		metaAddr = c.MetaAddr
		if secretFile == "" {
			secretFile = c.SecretFile()
		}
	}
	secret, err := readSecret(secretFile)
	if err != nil {
		return nil, err
	}
	return rpc.NewClient(metaAddr, secret, rpc.ClientOptions{Timeout: 10 * time.Second, Name: "metadata service " + metaAddr}), nil
}

// withMeta is the body of a command that asks the metadata service: it
// dials, runs run and closes.
func withMeta(c *conn, run func(mc *rpc.Client, args []string) error) func(args []string) error {
	return func(args []string) error {
		mc, err := c.dial()
		if err != nil {
			return err
		}
		defer mc.Close()
		return run(mc, args)
	}
}

// withPaths is withMeta for a command whose arguments are paths in a
// mount: with no --dir, --meta or $SLUICE_DIR, it refuses paths outside
// the mount of the cluster `sluice cluster up` started last (its inode
// numbers would be asked of the wrong cluster).
func withPaths(c *conn, run func(mc *rpc.Client, args []string) error) func(args []string) error {
	return func(args []string) error {
		if *c.dir == "" && *c.meta == "" && os.Getenv("SLUICE_DIR") == "" {
			if d, err := cluster.Current(); err == nil {
				if cl, err := cluster.Load(d); err == nil {
					if err := underMount(cl.Mount, d, args); err != nil {
						return err
					}
				}
			}
		}
		return withMeta(c, run)(args)
	}
}

// underMount says which of paths, if any, is not under mount, the mount
// of the cluster with state directory dir.
func underMount(mount, dir string, paths []string) error {
	if mount == "" {
		return nil
	}
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			continue
		}
		if r, err := filepath.Rel(mount, abs); err != nil || r == ".." || strings.HasPrefix(r, "../") {
			return fmt.Errorf("%s is not under %s, the mount of the cluster sluice cluster up started last (%s): name the file's cluster with --dir or --meta", p, mount, dir)
		}
	}
	return nil
}

// withServers is the body of a command without arguments that needs the
// registered daemons: it dials, lists them, runs run and closes.
func withServers(c *conn, run func(mc *rpc.Client, servers []wire.ServerInfo) error) func(args []string) error {
	return func(args []string) error {
		if err := wantArgs(args, 0, "no arguments"); err != nil {
			return err
		}
		mc, servers, err := c.servers()
		if err != nil {
			return err
		}
		defer mc.Close()
		return run(mc, servers)
	}
}

// wantArgs fails unless args has n arguments, saying what they are.
func wantArgs(args []string, n int, what string) error {
	if len(args) != n {
		return fmt.Errorf("want %s, got %d arguments", what, len(args))
	}
	return nil
}

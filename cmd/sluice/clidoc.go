package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// writeCLIDoc writes docs/cli.md: every command of the tree, in order, with
// its usage, description, example and flags. TestCLIDoc fails when the
// file differs (go test ./cmd/sluice -run TestCLIDoc -update rewrites it).
func writeCLIDoc(w io.Writer, root *cobra.Command) {
	fmt.Fprintf(w, "# The sluice command line\n\n")
	fmt.Fprintf(w, "Generated from the commands (`cmd/sluice`) by `go test ./cmd/sluice -run TestCLIDoc -update`; do not edit.\n")
	fmt.Fprintf(w, "`sluice help COMMAND` prints the same; `sluice completion bash` prints bash completion.\n\n")
	fmt.Fprintf(w, "%s\n\n", root.Long)
	fmt.Fprintf(w, "Every command takes `--config FILE`: `name = value` lines setting its flags (the command line wins).\n")
	fmt.Fprintf(w, "The spellings before the commands were nouns then verbs (`sluice up`, `sluice stat`, `sluice jobs`, `sluice job ID`, `sluice sim --swf …`) still work, with a one-line notice.\n")
	var walk func(c *cobra.Command, depth int)
	walk = func(c *cobra.Command, depth int) {
		for _, s := range c.Commands() {
			if !s.IsAvailableCommand() || s.Name() == "help" || s.Name() == "completion" {
				continue
			}
			writeCommandDoc(w, s, depth)
			walk(s, depth+1)
		}
	}
	for _, g := range root.Groups() {
		fmt.Fprintf(w, "\n## %s\n", strings.TrimSuffix(g.Title, ":"))
		for _, s := range root.Commands() {
			if s.GroupID == g.ID {
				writeCommandDoc(w, s, 0)
				walk(s, 1)
			}
		}
	}
}

func writeCommandDoc(w io.Writer, c *cobra.Command, depth int) {
	fmt.Fprintf(w, "\n%s `%s`\n\n%s.\n", strings.Repeat("#", 3+min(depth, 1)), c.CommandPath(), c.Short)
	if c.HasAvailableSubCommands() {
		var verbs []string
		for _, s := range c.Commands() {
			if s.IsAvailableCommand() {
				verbs = append(verbs, s.Name())
			}
		}
		fmt.Fprintf(w, "Verbs: %s.\n", strings.Join(verbs, ", "))
	}
	if !c.Runnable() || c.HasAvailableSubCommands() {
		if flags := docFlags(c.LocalNonPersistentFlags()); flags != "" && c.PersistentFlags().HasAvailableFlags() {
			fmt.Fprintf(w, "\nFlags of every verb:\n\n```\n%s```\n", docFlags(c.PersistentFlags()))
		} else if c.PersistentFlags().HasAvailableFlags() {
			fmt.Fprintf(w, "\nFlags of every verb:\n\n```\n%s```\n", docFlags(c.PersistentFlags()))
		}
		return
	}
	fmt.Fprintf(w, "\n```\n%s\n```\n", c.UseLine())
	if len(c.Aliases) > 0 {
		fmt.Fprintf(w, "Also spelled: %s.\n", strings.Join(c.Aliases, ", "))
	}
	if c.Example != "" {
		fmt.Fprintf(w, "\nExample:\n\n```\n%s\n```\n", c.Example)
	}
	if flags := docFlags(c.LocalNonPersistentFlags()); flags != "" {
		fmt.Fprintf(w, "\nFlags:\n\n```\n%s```\n", flags)
	}
}

// docFlags lists fs's flags as the help does, but with defaults that
// depend on the host (its name) spelled as such, so that the document
// is the same everywhere.
func docFlags(fs *pflag.FlagSet) string {
	out := pflag.NewFlagSet("doc", pflag.ContinueOnError)
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Name == "help" || f.Hidden {
			return
		}
		g := *f
		if g.DefValue == hostname() && g.DefValue != "" {
			g.DefValue = "this host's name"
		}
		out.AddFlag(&g)
	})
	return out.FlagUsages()
}

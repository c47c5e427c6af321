package burstbuf

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/sluice-hpc/sluice/internal/atomicfile"
)

// Job is one job's burst buffer on the node that runs its stages (the
// Slurm controller), which mounts sluice at Mount.
type Job struct {
	ID    string
	Mount string
	Spec  Spec
	UID   int
	GID   int
}

// Migrator moves a file's data to a tier and returns when it is there
// (the tiering manager's OpMigrate with MoveWait): "mem" for stage-in,
// "pfs" for stage-out (a plain file on the PFS, fsynced).
type Migrator func(ctx context.Context, path, tier string) error

// Dir is the job's buffer directory: <mount>/.bb/<job id>.
func (j Job) Dir() string { return filepath.Join(j.Mount, ".bb", j.ID) }

// Env is what the job finds in its environment (Slurm's path file):
// SLUICE_BB, its buffer directory, and SLUICE_BB_ACCESS.
func (j Job) Env() string {
	return fmt.Sprintf("SLUICE_BB=%s\nSLUICE_BB_ACCESS=%s\nSLUICE_BB_JOB=%s\n", j.Dir(), j.Spec.Access, j.ID)
}

func (j Job) inMount(p string) bool {
	return strings.HasPrefix(p, strings.TrimSuffix(j.Mount, "/")+"/")
}

// CheckpointPath is the glob of the job's checkpoint files as a path in
// the namespace (the mount's root is "/"): "" for the default, every file
// of the buffer directory.
func (j Job) CheckpointPath() (string, error) {
	c := j.Spec.Checkpoint
	switch {
	case c == "":
		return "", nil
	case !strings.HasPrefix(c, "/"):
		return "/.bb/" + j.ID + "/" + c, nil
	case j.inMount(c):
		return strings.TrimPrefix(c, strings.TrimSuffix(j.Mount, "/")), nil
	}
	return "", fmt.Errorf("checkpoint=%s is outside sluice (%s)", c, j.Mount)
}

// Setup makes the job's buffer directory, owned by the job's user and
// closed to others.
func (j Job) Setup() error {
	if strings.ContainsAny(j.ID, "/.") || j.ID == "" {
		return fmt.Errorf("job id %q: want a plain id", j.ID)
	}
	root := filepath.Join(j.Mount, ".bb")
	if err := os.Mkdir(root, 0o755); err != nil && !os.IsExist(err) {
		return err
	}
	if err := os.Mkdir(j.Dir(), 0o700); err != nil && !os.IsExist(err) {
		return err
	}
	return os.Chown(j.Dir(), j.UID, j.GID)
}

// StageIn brings the job's inputs in before it runs: a file in the
// namespace is promoted to the mem tier where it is (ONFS pre-migration)
// and linked into the buffer directory if a destination is named; a file
// outside it is copied into the buffer directory.
func (j Job) StageIn(ctx context.Context, migrate Migrator) error {
	for _, st := range j.Spec.StageIn {
		dst := ""
		if st.Destination != "" {
			dst = filepath.Join(j.Dir(), st.Destination)
		}
		if !j.inMount(st.Source) {
			if dst == "" {
				return fmt.Errorf("stage_in source=%s is outside sluice (%s): name a destination to copy it to", st.Source, j.Mount)
			}
			if err := j.copyFile(st.Source, dst); err != nil {
				return fmt.Errorf("stage_in %s: %w", st.Source, err)
			}
			continue
		}
		if err := migrate(ctx, st.Source, "mem"); err != nil {
			return fmt.Errorf("stage_in %s: %w", st.Source, err)
		}
		if dst != "" {
			if err := os.Link(st.Source, dst); err != nil && !os.IsExist(err) {
				return fmt.Errorf("stage_in %s: %w", st.Source, err)
			}
		}
	}
	return nil
}

// StageOut saves the job's outputs after it ran: a destination in the
// namespace gets the file renamed to it and drained to the PFS (the call
// returns once the data is there); one outside is copied to and fsynced.
func (j Job) StageOut(ctx context.Context, migrate Migrator) error {
	for _, st := range j.Spec.StageOut {
		src := filepath.Join(j.Dir(), st.Source)
		if err := j.mkParents(st.Destination); err != nil {
			return fmt.Errorf("stage_out %s: %w", st.Source, err)
		}
		if !j.inMount(st.Destination) {
			if err := j.copyFile(src, st.Destination); err != nil {
				return fmt.Errorf("stage_out %s: %w", st.Source, err)
			}
			continue
		}
		if err := os.Rename(src, st.Destination); err != nil {
			return fmt.Errorf("stage_out %s: %w", st.Source, err)
		}
		if err := migrate(ctx, st.Destination, "pfs"); err != nil {
			return fmt.Errorf("stage_out %s: draining %s to the PFS: %w", st.Source, st.Destination, err)
		}
	}
	return nil
}

// Teardown removes the job's buffer directory and everything left in it.
func (j Job) Teardown() error {
	if err := os.RemoveAll(j.Dir()); err != nil {
		return fmt.Errorf("removing %s: %w", j.Dir(), err)
	}
	return nil
}

// mkParents makes the missing directories above p, owned by the job's
// user.
func (j Job) mkParents(p string) error {
	dir := filepath.Dir(p)
	var missing []string
	for d := dir; d != "/" && d != "."; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		}
		missing = append(missing, d)
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := os.Mkdir(missing[i], 0o755); err != nil && !os.IsExist(err) {
			return err
		}
		if err := os.Chown(missing[i], j.UID, j.GID); err != nil {
			return err
		}
	}
	return nil
}

// copyFile copies src to dst (a file owned by the job's user) and
// fsyncs it. The bytes go to a temporary file beside dst, renamed over it
// once whole: a copy that fails or is killed half-way leaves dst as it
// was (a staged-out result's earlier version, or nothing), never a
// truncated file under the name the user asked for.
func (j Job) copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	return atomicfile.WriteFrom(filepath.Dir(dst), dst, 0o644, func(out *os.File) error {
		if _, err := io.Copy(out, in); err != nil {
			return err
		}
		return out.Chown(j.UID, j.GID)
	})
}

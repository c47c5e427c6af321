// Package atomicfile replaces small state files (a daemon's registered
// id, a truncation fence, a migration marker, a lent budget, a private
// directory's owner, a cluster's description) so that a reader after a
// crash, kill -9 or power loss finds the old content or the new one,
// whole, never a torn or empty file.
//
// It owns only the temporary file it writes and renames; it does not
// decide where state lives or parse it. Readers that list a directory of
// such files must skip names they did not write: a crash between the
// temporary file's creation and its rename leaves it behind (its name
// starts with a dot and ends in ".tmp" and a random number).
package atomicfile

import (
	"os"
	"path/filepath"
)

// Write replaces path with data, durably: the bytes go to a temporary
// file in path's directory, are synced, and are renamed over path, whose
// directory is synced after. perm applies to a file Write creates.
func Write(path string, data []byte, perm os.FileMode) error {
	return WriteVia(filepath.Dir(path), path, data, perm)
}

// WriteVia is Write with the temporary file made in tmpDir, which must be
// on path's file system: for a directory whose every name means
// something to its reader (a file per private directory named after it),
// where even a temporary name could be taken for one.
func WriteVia(tmpDir, path string, data []byte, perm os.FileMode) error {
	return WriteFrom(tmpDir, path, perm, func(f *os.File) error {
		_, err := f.Write(data)
		return err
	})
}

// WriteFrom is WriteVia for content fill writes into the temporary file
// (a copy of another file, say), which it may also chown. Whatever fill
// returns but nil leaves path as it was.
func WriteFrom(tmpDir, path string, perm os.FileMode, fill func(*os.File) error) error {
	f, err := os.CreateTemp(tmpDir, "."+filepath.Base(path)+".tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	if err = f.Chmod(perm); err == nil {
		err = fill(f)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// SyncDir makes the entries of dir (a file created, renamed or removed
// in it) durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Package enginetest runs a test against every registered metadata
// engine (meta/engine), reopened over the same directory as a restart
// does. It is for the tests of the services that keep their state in an
// engine; it must not be linked by anything but tests.
package enginetest

import (
	"testing"

	"github.com/sluice-hpc/sluice/meta/engine"
)

// Each runs f once per engine, as a subtest named after it. open closes
// the engine its last call returned, if any, and opens the engine again
// on the same directory: a restart. The last one is closed when the
// subtest ends.
func Each(t *testing.T, f func(t *testing.T, open func() engine.Engine)) {
	for _, name := range engine.Names() {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			var e engine.Engine
			open := func() engine.Engine {
				t.Helper()
				if e != nil {
					e.Close()
				}
				var err error
				if e, err = engine.Open(name, dir); err != nil {
					t.Fatal(err)
				}
				return e
			}
			t.Cleanup(func() {
				if e != nil {
					e.Close()
				}
			})
			f(t, open)
		})
	}
}

module pykured.dev/tools/timewindow

go 1.26.0

// tools/kured-build adds, in a scratch copy at build time, a requirement on github.com/kubereboot/kured and
// a replace pointing at kured 1.23.0's unpacked source (or the module at its release commit when that
// source is absent). Nothing of kured's is kept in this repository.

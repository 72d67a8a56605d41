//go:build tools

// Package tools pins krew, kubectl's plugin manager, as a build dependency of pykured's tests (installing
// the single-file kubectl-pykured from its manifest and archive, as krew's users do).
package tools

import _ "sigs.k8s.io/krew/cmd/krew"

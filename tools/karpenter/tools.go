//go:build tools

// Package tools pins Karpenter's kwok provider (its controller with the simulated cloud provider that creates
// Nodes itself) as a build dependency of pykured's tests: the real Karpenter, which must leave a node pykured
// is rebooting alone.
package tools

import _ "sigs.k8s.io/karpenter/kwok"

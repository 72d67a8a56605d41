//go:build tools

// Package tools pins Node Problem Detector as a build dependency of pykured's tests (its own condition,
// written by its Kubernetes exporter from a custom plugin monitor, reboots a simulated node).
package tools

import _ "k8s.io/node-problem-detector/cmd/nodeproblemdetector"

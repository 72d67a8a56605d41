//go:build tools

// Package tools pins helm v3 as a build dependency of pykured's tests (helm template of kured's chart).
package tools

import _ "helm.sh/helm/v3/cmd/helm"

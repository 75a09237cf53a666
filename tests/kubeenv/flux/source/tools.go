//go:build tools

// Package tools pins the main packages built here into this module's go.mod and go.sum: Flux's
// source-controller, and go-containerregistry's in-memory OCI registry (a dependency of
// source-controller already), which serves the bundle's OCI Helm charts on loopback to its
// OCIRepositories (tests/kubeenv/overlay.py).
package tools

import (
	_ "github.com/fluxcd/source-controller"
	_ "github.com/google/go-containerregistry/cmd/registry"
)

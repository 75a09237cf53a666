//go:build tools

// Package tools pins the main package of Flux's helm-controller into this module's go.mod and go.sum.
package tools

import _ "github.com/fluxcd/helm-controller"

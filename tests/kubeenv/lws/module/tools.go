//go:build tools

// Package tools pins the LWS controller manager's main package into this module's go.mod and go.sum.
package tools

import _ "sigs.k8s.io/lws/cmd"

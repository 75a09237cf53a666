//go:build tools

// Package tools pins promtool's main package (github.com/prometheus/prometheus/cmd/promtool) into this module's
// go.mod and go.sum.
package tools

import _ "github.com/prometheus/prometheus/cmd/promtool"

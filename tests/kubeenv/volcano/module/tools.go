//go:build tools

// Package tools pins Volcano's scheduler and controller manager main packages into this module.
package tools

import (
	_ "volcano.sh/volcano/cmd/controller-manager"
	_ "volcano.sh/volcano/cmd/scheduler"
	_ "volcano.sh/volcano/cmd/webhook-manager"
)

//go:build tools

// Package tools pins the main packages of Volcano's scheduler, controller manager and webhook server into this module.
package tools

import (
	_ "volcano.sh/volcano/cmd/controller-manager"
	_ "volcano.sh/volcano/cmd/scheduler"
	_ "volcano.sh/volcano/cmd/webhook-manager"
)

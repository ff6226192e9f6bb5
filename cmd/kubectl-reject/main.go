// Command kubectl-reject is the kubectl plugin behind
// `kubectl reject waitingpod/NAME`: it rejects pods held at Permit.
package main

import (
	"context"
	"os"
	"os/signal"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/approval/kubectlplugin"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := kubectlplugin.Main(ctx, schedulingv1alpha1.DecisionReject, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

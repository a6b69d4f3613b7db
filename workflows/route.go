package workflows

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
)

// route is what a task learned about its providers. The Submit activity picks the provider (circuits, the input's
// providers, these lists) and returns its choice in its result, so every decision is in history with no event of
// its own; the workflow only keeps what steers the next choice.
type route struct {
	// exclude are providers this task gave up on (unreachable past PROVIDER_GIVE_UP): never asked again by it.
	exclude []string
	// avoid are providers that found this task unsolvable: asked last.
	avoid []string
}

// accepted takes what the Submit result says of the route: the provider, whether the task may give it up, and the
// provider's least poll spacing.
func (r *route) accepted(sub *submission, res activities.SubmitResult, in *captchaflow.Input) {
	sub.Provider = res.Provider
	if res.Alternatives > 0 {
		sub.giveUp = time.Duration(res.GiveUpSeconds) * time.Second
	}
	if res.PollIntervalSeconds > in.PollIntervalSeconds {
		in.PollIntervalSeconds = res.PollIntervalSeconds
	}
}

// unsolvable moves the next submission away from the provider that gave up on sub, when there is another.
func (r *route) unsolvable(ctx workflow.Context, sub *submission) {
	if sub.Provider == "" {
		return
	}
	countProvider(ctx, MetricProviderUnsolvable, sub.Provider)
	if !slices.Contains(r.avoid, sub.Provider) {
		r.avoid = append(r.avoid, sub.Provider)
	}
}

// giveUp abandons sub: its provider has been unreachable past PROVIDER_GIVE_UP. If the provider did create the
// task, it is paid for and its result ignored: at most one extra paid submission per give-up.
func (s *solver) giveUp(ctx workflow.Context, sub *submission) outcome {
	sub.State = subAbandoned
	if !slices.Contains(s.route.exclude, sub.Provider) {
		s.route.exclude = append(s.route.exclude, sub.Provider)
	}
	countProvider(ctx, MetricProviderGaveUp, sub.Provider)
	s.logger.Warn("provider unreachable past PROVIDER_GIVE_UP: submission abandoned, submitting elsewhere",
		"Provider", sub.Provider, "Submission", sub.N, "ProviderTaskID", sub.ProviderID)
	return outcome{kind: outGaveUp, reason: fmt.Sprintf("provider %s unreachable past PROVIDER_GIVE_UP", sub.Provider)}
}

// gaveUp tells whether a Poll gave its submission up.
func gaveUp(err error) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && appErr.Type() == activities.FailureProviderGaveUp
}

// lostAt is the provider of a Submit whose answer was lost and the give-up bound it reported (0: the task has
// nowhere else to go), from the failure's details; a failure recorded before providers were named has neither.
func lostAt(err error) (provider string, giveUp time.Duration) {
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || !appErr.HasDetails() {
		return "", 0
	}
	var d activities.LostDetails
	if appErr.Details(&d) != nil || d.Alternatives == 0 {
		return d.Provider, 0
	}
	return d.Provider, time.Duration(d.GiveUpSeconds) * time.Second
}

// Per-provider counters of the workflow, tagged provider.
const (
	// MetricProviderUnsolvable counts submissions a provider found unsolvable.
	MetricProviderUnsolvable = "captchaflow_provider_unsolvable_total"
	// MetricProviderGaveUp counts submissions abandoned at a provider unreachable past PROVIDER_GIVE_UP (each may
	// have been paid for).
	MetricProviderGaveUp = "captchaflow_provider_gave_up_total"
	// MetricProviderSolveSeconds is a provider's time from submission to code.
	MetricProviderSolveSeconds = "captchaflow_provider_solve_seconds"
)

func countProvider(ctx workflow.Context, metric, provider string) {
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"provider": provider}).Counter(metric).Inc(1)
}

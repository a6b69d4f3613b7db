package main

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"time"

	"github.com/captchaflow/captchaflow/activities"
	"github.com/captchaflow/captchaflow/callbackauth"
	"github.com/captchaflow/captchaflow/internal/config"
	"github.com/captchaflow/captchaflow/workflows"
)

// checkSettings refuses settings that would let the worker start and then fail every task that meets them: a
// callback URL the provider cannot call, a notify secret that cannot sign, a provider timeout the activity's own
// timeout cuts short. Every problem is reported at once, naming its variable and never a secret's value.
// Bounds on the routing settings: a give-up under MinGiveUp would abandon (and pay again for) submissions over a
// provider's blip; one over MaxGiveUp keeps tasks on a dead provider for most of a token's life.
const (
	MinGiveUp       = 10 * time.Second
	MaxGiveUp       = 10 * time.Minute
	MinNoSlotBudget = 5 * time.Second
)

func checkSettings(cfg config.Worker) error {
	var errs []error
	if err := checkCallbackBaseURL(cfg.CallbackBaseURL); err != nil {
		errs = append(errs, fmt.Errorf("CALLBACK_BASE_URL: %w", err))
	}
	// The message names NOTIFY_SECRET and says what is wrong, without the value.
	if err := activities.CheckNotifySecret(cfg.NotifySecret.Reveal()); err != nil {
		errs = append(errs, err)
	}
	if err := checkRequestTimeout("CAPTCHAAI_TIMEOUT", cfg.ProviderTimeout, workflows.ProviderStartToClose, "provider"); err != nil {
		errs = append(errs, err)
	}
	if err := checkRequestTimeout("NOTIFY_REQUEST_TIMEOUT", cfg.DeliveryRequestTimeout, workflows.DeliverStartToClose, "delivery"); err != nil {
		errs = append(errs, err)
	}
	if cfg.ProviderBalanceInterval != 0 && cfg.ProviderBalanceInterval < MinBalanceInterval {
		errs = append(errs, fmt.Errorf("PROVIDER_BALANCE_INTERVAL: %s is shorter than %s (the balance is read at most once a minute "+
			"per namespace); 0 leaves the schedule alone", cfg.ProviderBalanceInterval, MinBalanceInterval))
	}
	if cfg.ProviderBalanceLow < 0 || math.IsNaN(cfg.ProviderBalanceLow) || math.IsInf(cfg.ProviderBalanceLow, 0) {
		errs = append(errs, fmt.Errorf("PROVIDER_BALANCE_LOW: %v is not a balance (>= 0; 0 = no low-balance alert)", cfg.ProviderBalanceLow))
	}
	if cfg.ProvidersFile != "" { // routing's settings: unused without the file
		errs = append(errs, checkRouting(cfg)...)
	}
	if cfg.ProviderThreads < 0 {
		errs = append(errs, fmt.Errorf("PROVIDER_THREADS: %d is negative (0 or unset turns admission control off)", cfg.ProviderThreads))
	}
	return errors.Join(errs...)
}

// checkRequestTimeout refuses a client timeout the activity attempt around it would cut short: the request would
// end as a timed-out activity (a dead worker, to Temporal) instead of failing with its own, classified error.
func checkRequestTimeout(name string, timeout, limit time.Duration, activity string) error {
	switch {
	case timeout <= 0:
		return fmt.Errorf("%s: %s is not a positive duration", name, timeout)
	case timeout >= limit:
		return fmt.Errorf("%s: %s must be shorter than %s, the start-to-close timeout of one %s activity attempt "+
			"(a longer request would be cut off as a timed-out activity instead of failing with its own error)",
			name, timeout, limit, activity)
	}
	return nil
}

// checkCallbackBaseURL accepts what the provider can call back and callbackauth can extend: an absolute http(s)
// URL with a host, and no query or fragment (they would be silently dropped from every pingback URL).
func checkCallbackBaseURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("not a valid URL")
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%q is not an absolute http(s) URL (the provider calls it from the internet)", u.Redacted())
	case u.Hostname() == "":
		return fmt.Errorf("%q has no host", u.Redacted())
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return fmt.Errorf("%q must not have a query or fragment", u.Redacted())
	}
	// The same construction Submit uses, so nothing it refuses can pass here.
	if _, err := callbackauth.URLFor(raw, "preflight", "x", callbackauth.Submission{RunID: "preflight", N: 1}); err != nil {
		return err
	}
	return nil
}

func checkRouting(cfg config.Worker) []error {
	var errs []error
	if cfg.ProviderGiveUp < MinGiveUp || cfg.ProviderGiveUp > MaxGiveUp {
		errs = append(errs, fmt.Errorf("PROVIDER_GIVE_UP: %s is outside [%s, %s]", cfg.ProviderGiveUp, MinGiveUp, MaxGiveUp))
	}
	if cfg.ProviderNoSlotBudget < MinNoSlotBudget || cfg.ProviderNoSlotBudget > MaxGiveUp {
		errs = append(errs, fmt.Errorf("PROVIDER_NO_SLOT_BUDGET: %s is outside [%s, %s]", cfg.ProviderNoSlotBudget, MinNoSlotBudget, MaxGiveUp))
	}
	return errs
}

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

// Bounds on the routing settings: a shorter give-up pays again over a blip, a longer one keeps tasks on a dead
// provider for most of a token's life.
const minGiveUp, maxGiveUp, minNoSlotBudget = 10 * time.Second, 10 * time.Minute, 5 * time.Second

// checkSettings refuses, all at once and never quoting a secret, the settings that would fail every task later.
func checkSettings(cfg config.Worker) error {
	errs := []error{activities.CheckNotifySecret(cfg.NotifySecret.Reveal())}
	check := func(bad bool, format string, args ...any) {
		if bad {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	// What Submit extends (the same URLFor), and no query or fragment, which every pingback URL keeps.
	u, err := url.Parse(cfg.CallbackBaseURL)
	if err == nil && (u.RawQuery != "" || u.Fragment != "" || u.ForceQuery) {
		err = fmt.Errorf("%q must not have a query or fragment", u.Redacted())
	} else if err == nil {
		_, err = callbackauth.URLFor(cfg.CallbackBaseURL, "preflight", "x", callbackauth.Submission{RunID: "preflight", N: 1})
	}
	check(err != nil, "CALLBACK_BASE_URL: %v", err)
	// A request its activity attempt cuts short ends as a timed-out activity (a dead worker, to Temporal) instead
	// of failing with its own, classified error.
	const shorter = "%s: %s must be positive and shorter than %s, the start-to-close timeout of one %s activity attempt"
	check(cfg.ProviderTimeout <= 0 || cfg.ProviderTimeout >= workflows.ProviderStartToClose, shorter,
		"CAPTCHAAI_TIMEOUT", cfg.ProviderTimeout, workflows.ProviderStartToClose, "provider")
	check(cfg.DeliveryRequestTimeout <= 0 || cfg.DeliveryRequestTimeout >= workflows.DeliverStartToClose, shorter,
		"NOTIFY_REQUEST_TIMEOUT", cfg.DeliveryRequestTimeout, workflows.DeliverStartToClose, "delivery")
	check(cfg.ProviderBalanceInterval != 0 && cfg.ProviderBalanceInterval < MinBalanceInterval, "PROVIDER_BALANCE_INTERVAL: "+
		"%s is shorter than %s (the balance is read at most once a minute per namespace); 0 leaves the schedule alone",
		cfg.ProviderBalanceInterval, MinBalanceInterval)
	low := cfg.ProviderBalanceLow
	check(low < 0 || math.IsNaN(low) || math.IsInf(low, 0), "PROVIDER_BALANCE_LOW: %v is not a balance (>= 0; 0 = no low-balance alert)", low)
	check(cfg.ProviderThreads < 0, "PROVIDER_THREADS: %d is negative (0 or unset turns admission control off)", cfg.ProviderThreads)
	if cfg.ProvidersFile != "" { // routing's settings: unused without the file
		check(cfg.ProviderThreads != 0, "PROVIDER_THREADS: not read with PROVIDERS_FILE, whose providers' threads are "+
			"the plans; unset it and set threads in %s", cfg.ProvidersFile)
		check(cfg.ProviderGiveUp < minGiveUp || cfg.ProviderGiveUp > maxGiveUp, "PROVIDER_GIVE_UP: %s is outside [%s, %s]",
			cfg.ProviderGiveUp, minGiveUp, maxGiveUp)
		check(cfg.ProviderNoSlotBudget < minNoSlotBudget || cfg.ProviderNoSlotBudget > maxGiveUp,
			"PROVIDER_NO_SLOT_BUDGET: %s is outside [%s, %s]", cfg.ProviderNoSlotBudget, minNoSlotBudget, maxGiveUp)
	}
	return errors.Join(errs...)
}

package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/captchaflow/captchaflow"
)

// MethodTimeouts is "method=duration,…" (e.g. "turnstile=60s"), whole seconds from 1 s to 24 h, each method once.
type MethodTimeouts map[string]time.Duration

func (m *MethodTimeouts) UnmarshalText(text []byte) error {
	out := MethodTimeouts{}
	for entry := range strings.SplitSeq(string(text), ",") {
		method, value, ok := strings.Cut(entry, "=")
		if strings.TrimSpace(entry) == "" {
			continue
		}
		method, value = strings.TrimSpace(method), strings.TrimSpace(value)
		switch d, err := time.ParseDuration(value); {
		case !ok:
			return fmt.Errorf("CALLBACK_TIMEOUT_BY_METHOD: %.60q is not method=duration", strings.TrimSpace(entry))
		case !captchaflow.MethodPattern.MatchString(method):
			return fmt.Errorf("CALLBACK_TIMEOUT_BY_METHOD: %.60q is not a provider method name", method)
		case out[method] != 0:
			return fmt.Errorf("CALLBACK_TIMEOUT_BY_METHOD: %s appears twice", method)
		case err != nil:
			return fmt.Errorf("CALLBACK_TIMEOUT_BY_METHOD: %s=%.40q is not a duration (e.g. 60s)", method, value)
		case d < time.Second || d > 24*time.Hour || d%time.Second != 0:
			return fmt.Errorf("CALLBACK_TIMEOUT_BY_METHOD: %s=%s must be whole seconds from 1s to 24h", method, d)
		default:
			out[method] = d
		}
	}
	*m = out
	return nil
}

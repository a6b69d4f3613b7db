package sim

import (
	"cmp"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Fault names accepted in the sim_fault parameter and in fault rules.
const (
	FaultDropPingback      = "drop_pingback"
	FaultDuplicatePingback = "duplicate_pingback"
	FaultLatePingback      = "late_pingback"
	FaultHangPingback      = "hang_pingback"
	FaultUnsolvable        = "unsolvable"
	FaultFailSubmit        = "fail_submit"
	// FaultUnsolvablePingback is unsolvable[=N] whose pingback still comes, with code=ERROR_CAPTCHA_UNSOLVABLE, as
	// 2captcha-style providers document it.
	FaultUnsolvablePingback = "unsolvable_pingback"
	// FaultSubmitError chooses what fail_submit answers: a class (SubmitErrorClasses) or a code.
	FaultSubmitError = "submit_error"
	// FaultSubmitLost is submit_lost[=N]: the first N submissions for a pingback URL create their task (solved and
	// called back as usual) but lose in.php's answer: the connection is closed without one.
	FaultSubmitLost = "submit_lost"
	// FaultSubmitStallMS is submit_stall_ms=MS: in.php's answer to those submissions (the first one without
	// submit_lost) is held MS milliseconds after the task was created — past the client's timeout, the answer is lost.
	FaultSubmitStallMS = "submit_stall_ms"
	// FaultSubmitGatewayError is submit_gateway_error=STATUS (500–599): the first submission for a pingback URL
	// creates its task (solved and called back as usual), and then in.php or createTask answers STATUS with a
	// gateway's HTML page instead of the task id, as a proxy, load balancer or CDN in front of a provider does when it
	// loses the answer.
	FaultSubmitGatewayError = "submit_gateway_error"
)

// SubmitErrorClasses are the submit_error shorthands, one code for each way a client must react to an in.php
// error: retry later, submit again, fix the configuration, or give up on an answer it does not know.
var SubmitErrorClasses = map[string]string{
	"transient": ErrorNoSlotAvailable,
	"resubmit":  ErrorCaptchaUnsolvable,
	"config":    ErrorWrongUserKey,
	"unknown":   ErrorSimulatedUnknown,
}

// submitErrorCode is the shape of an explicit submit_error code: what a provider's error words look like.
var submitErrorCode = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,63}$`)

// FaultSpec is a parsed set of per-task faults.
type FaultSpec struct {
	DropPingback      bool
	DuplicatePingback bool
	LatePingback      bool
	HangPingback      bool
	// Unsolvable makes the first N submissions for a pingback URL unsolvable,
	// so the workflow's resubmission with the same URL can succeed.
	Unsolvable int
	// FailSubmit rejects the first N submissions for a pingback URL with
	// SubmitError (ERROR_NO_SLOT_AVAILABLE when empty) before accepting one.
	FailSubmit int
	// SubmitError is the code fail_submit answers with; a submit_error without
	// fail_submit rejects the first submission.
	SubmitError string
	// UnsolvablePingback sends the pingback of an unsolvable task (instead of
	// none) with code=ERROR_CAPTCHA_UNSOLVABLE.
	UnsolvablePingback bool
	// SubmitLost loses in.php's answer to the first N accepted submissions for
	// a pingback URL: the task exists, the client never learns its id.
	SubmitLost int
	// SubmitStallMS holds in.php's answer to those submissions (the first one
	// when SubmitLost is 0) this many milliseconds before sending (or losing) it.
	SubmitStallMS int
	// SubmitGatewayStatus answers the first accepted submission for a pingback
	// URL with this 5xx status and a gateway's page: the task exists, the
	// client never learns its id.
	SubmitGatewayStatus int
}

// ParseFaultSpec parses a comma-separated list such as
// "duplicate_pingback,unsolvable=2,fail_submit=3,submit_error=config". A bare
// "unsolvable", "unsolvable_pingback" or "fail_submit" means N=1;
// "unsolvable_pingback=N" is "unsolvable=N" with an ERROR_CAPTCHA_UNSOLVABLE
// pingback; submit_error takes a class of SubmitErrorClasses or a code.
func ParseFaultSpec(list string) (FaultSpec, error) {
	var spec FaultSpec
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if err := spec.add(item); err != nil {
			return FaultSpec{}, err
		}
	}
	if spec.SubmitError != "" && spec.FailSubmit == 0 {
		spec.FailSubmit = 1
	}
	return spec, nil
}

// add applies one "name" or "name=arg" item of a fault list; submit_error's argument is a code, the others' a count.
func (f *FaultSpec) add(item string) error {
	name, arg, hasArg := strings.Cut(item, "=")
	if name == FaultSubmitError {
		code, err := parseSubmitError(arg)
		if err != nil {
			return err
		}
		f.SubmitError = code
		return nil
	}
	count := 1
	if hasArg {
		n, err := strconv.Atoi(arg)
		if err != nil || n < 1 {
			return fmt.Errorf("fault %q needs a positive count", item)
		}
		count = n
	}
	return f.set(name, count, hasArg)
}

// set turns on fault name with its count; repeated counting faults keep the largest count.
func (f *FaultSpec) set(name string, count int, hasArg bool) error {
	switch name {
	case FaultDropPingback, FaultDuplicatePingback, FaultLatePingback, FaultHangPingback:
		if hasArg {
			return fmt.Errorf("fault %q takes no count", name)
		}
	}
	switch name {
	case FaultDropPingback:
		f.DropPingback = true
	case FaultDuplicatePingback:
		f.DuplicatePingback = true
	case FaultLatePingback:
		f.LatePingback = true
	case FaultHangPingback:
		f.HangPingback = true
	case FaultUnsolvable:
		f.Unsolvable = max(f.Unsolvable, count)
	case FaultFailSubmit:
		f.FailSubmit = max(f.FailSubmit, count)
	case FaultUnsolvablePingback:
		f.Unsolvable = max(f.Unsolvable, count)
		f.UnsolvablePingback = true
	case FaultSubmitLost:
		f.SubmitLost = max(f.SubmitLost, count)
	case FaultSubmitStallMS:
		if !hasArg {
			return fmt.Errorf("fault %q needs a duration in milliseconds", name)
		}
		f.SubmitStallMS = max(f.SubmitStallMS, count)
	case FaultSubmitGatewayError:
		if count < 500 || count > 599 {
			return fmt.Errorf("fault %q needs an HTTP status from 500 to 599, e.g. %s=502", name, name)
		}
		f.SubmitGatewayStatus = count
	default:
		return fmt.Errorf("unknown fault %q", name)
	}
	return nil
}

// parseSubmitError resolves submit_error's argument to the code in.php answers.
func parseSubmitError(arg string) (string, error) {
	if code, ok := SubmitErrorClasses[arg]; ok {
		return code, nil
	}
	if !submitErrorCode.MatchString(arg) {
		return "", fmt.Errorf("fault %s=%q: want transient, resubmit, config, unknown or an error code like ERROR_PAGEURL", FaultSubmitError, arg)
	}
	return arg, nil
}

// submitErrorCode is the code a fail_submit rejection answers.
func (f FaultSpec) submitErrorCode() string {
	if f.SubmitError != "" {
		return f.SubmitError
	}
	return ErrorNoSlotAvailable
}

// IsZero reports whether the spec asks for no fault at all.
func (f FaultSpec) IsZero() bool { return f == FaultSpec{} }

// merge combines two specs; counts take the larger value.
func (f FaultSpec) merge(o FaultSpec) FaultSpec {
	return FaultSpec{
		DropPingback:      f.DropPingback || o.DropPingback,
		DuplicatePingback: f.DuplicatePingback || o.DuplicatePingback,
		LatePingback:      f.LatePingback || o.LatePingback,
		HangPingback:      f.HangPingback || o.HangPingback,
		Unsolvable:        max(f.Unsolvable, o.Unsolvable),
		FailSubmit:        max(f.FailSubmit, o.FailSubmit),
		SubmitError:       cmp.Or(f.SubmitError, o.SubmitError),
		// Unsolvable pingbacks go with the merged unsolvable count, whichever spec asked for them.
		UnsolvablePingback:  f.UnsolvablePingback || o.UnsolvablePingback,
		SubmitLost:          max(f.SubmitLost, o.SubmitLost),
		SubmitStallMS:       max(f.SubmitStallMS, o.SubmitStallMS),
		SubmitGatewayStatus: cmp.Or(f.SubmitGatewayStatus, o.SubmitGatewayStatus),
	}
}

// FaultRule assigns Faults (sim_fault syntax) to every submission whose
// pingback URL or task id matches the regular expression Pattern. Rules let a
// test inject faults without changing what the client sends.
type FaultRule struct {
	Pattern string `json:"pattern"`
	Faults  string `json:"faults"`
}

type compiledRule struct {
	re   *regexp.Regexp
	spec FaultSpec
}

// ParseFaultRules parses the SIM_FAULT_RULES syntax: rules separated by ";",
// each "REGEX=>FAULTS", e.g. "/callback/chaos-drop-=>drop_pingback;[05]$=>duplicate_pingback".
func ParseFaultRules(text string) ([]FaultRule, error) {
	var rules []FaultRule
	for _, entry := range strings.Split(text, ";") {
		if strings.TrimSpace(entry) == "" {
			continue
		}
		pattern, faults, ok := strings.Cut(entry, "=>")
		if !ok {
			return nil, fmt.Errorf("fault rule %q: want REGEX=>FAULTS", entry)
		}
		rules = append(rules, FaultRule{Pattern: strings.TrimSpace(pattern), Faults: strings.TrimSpace(faults)})
	}
	if _, err := compileRules(rules); err != nil {
		return nil, err
	}
	return rules, nil
}

func compileRules(rules []FaultRule) ([]compiledRule, error) {
	out := make([]compiledRule, 0, len(rules))
	for _, r := range rules {
		if r.Pattern == "" {
			return nil, fmt.Errorf("fault rule for %q has an empty pattern", r.Faults)
		}
		re, err := regexp.Compile(r.Pattern)
		if err != nil {
			return nil, fmt.Errorf("fault rule pattern %q: %w", r.Pattern, err)
		}
		spec, err := ParseFaultSpec(r.Faults)
		if err != nil {
			return nil, fmt.Errorf("fault rule %q: %w", r.Pattern, err)
		}
		out = append(out, compiledRule{re: re, spec: spec})
	}
	return out, nil
}

// matchRules merges the specs of every rule matching subject.
func matchRules(rules []compiledRule, subject string) FaultSpec {
	var spec FaultSpec
	if subject == "" {
		return spec
	}
	for _, r := range rules {
		if r.re.MatchString(subject) {
			spec = spec.merge(r.spec)
		}
	}
	return spec
}

// pingbackPlan is what happens to one task's pingback once it is solved.
type pingbackPlan struct {
	unsolvable bool
	failWord   string // the word an unsolvable task answers ("": ERROR_CAPTCHA_UNSOLVABLE; a bad proxy's word)
	// unsolvablePingback calls an unsolvable task's pingback with
	// code=ERROR_CAPTCHA_UNSOLVABLE instead of sending none.
	unsolvablePingback bool
	drop               bool
	hang               bool
	late               bool
	duplicate          bool
	// submitLost and submitStall are what happened to in.php's answer (see answerFate).
	submitLost  bool
	submitStall time.Duration
	// submitGatewayStatus is the 5xx in.php answered instead of the task id (submit_gateway_error), 0 for none.
	submitGatewayStatus int
}

// names lists the plan's faults for the task listing.
func (p pingbackPlan) names() []string {
	var out []string
	add := func(on bool, name string) {
		if on {
			out = append(out, name)
		}
	}
	add(p.unsolvable && !p.unsolvablePingback, FaultUnsolvable)
	add(p.unsolvable && p.unsolvablePingback, FaultUnsolvablePingback)
	add(p.drop, FaultDropPingback)
	add(p.hang, FaultHangPingback)
	add(p.late, FaultLatePingback)
	add(p.duplicate, FaultDuplicatePingback)
	add(p.submitLost, FaultSubmitLost)
	add(p.submitStall > 0, FaultSubmitStallMS)
	add(p.submitGatewayStatus != 0, FaultSubmitGatewayError)
	return out
}

// drawPlan draws a plan from the per-run rates. The pingback faults partition
// one uniform draw, so each happens at exactly its configured rate.
func drawPlan(cfg *Config, unsolvableDraw, pingbackDraw float64) pingbackPlan {
	var p pingbackPlan
	if unsolvableDraw < cfg.UnsolvableRate {
		p.unsolvable = true
		p.unsolvablePingback = cfg.UnsolvablePingback
		return p
	}
	edge := cfg.DropRate
	switch {
	case pingbackDraw < edge:
		p.drop = true
	case pingbackDraw < edge+cfg.DupRate:
		p.duplicate = true
	case pingbackDraw < edge+cfg.DupRate+cfg.LateRate:
		p.late = true
	case pingbackDraw < edge+cfg.DupRate+cfg.LateRate+cfg.HangRate:
		p.hang = true
	}
	return p
}

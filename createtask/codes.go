package createtask

import (
	"strings"
	"time"

	"github.com/captchaflow/captchaflow/captchaai"
)

// The createTask providers answer the in.php family's codes (ERROR_NO_SLOT_AVAILABLE, ERROR_ZERO_BALANCE,
// ERROR_CAPTCHA_UNSOLVABLE, ERROR_KEY_DOES_NOT_EXIST, ERROR_NO_SUCH_CAPCHA_ID, …: https://anti-captcha.com/apidoc/errors,
// https://2captcha.com/api-docs/error-codes), which captchaai classifies and paces already, plus a few of their own,
// declared here. Same code, same class, same wait, whichever protocol answered it.

// code is one createTask-only code: its class and, for a busy or ban answer, the documented wait.
type code struct {
	class captchaai.Class
	wait  time.Duration
}

// codes are the createTask-only codes.
var codes = map[string]code{
	// https://2captcha.com/api-docs/error-codes, https://anti-captcha.com/apidoc/errors (ids 21-23, 31).
	"ERROR_IP_BLOCKED":                {captchaai.ClassTransient, 5 * time.Minute}, // banned for improper use, like in.php's IP_BANNED
	"ERROR_TASK_ABSENT":               {class: captchaai.ClassConfig},
	"ERROR_TASK_NOT_SUPPORTED":        {class: captchaai.ClassConfig},
	"ERROR_RECAPTCHA_INVALID_SITEKEY": {class: captchaai.ClassConfig},
	"ERROR_RECAPTCHA_INVALID_DOMAIN":  {class: captchaai.ClassConfig},
	"ERROR_ACCOUNT_SUSPENDED":         {class: captchaai.ClassConfig},
	// A worker gave up (often a slow proxy): a new task may succeed.
	"ERROR_RECAPTCHA_TIMEOUT": {class: captchaai.ClassResubmit},
	// https://zennolab.atlassian.net/wiki/spaces/APIS/pages/295396/Error+Types (CapMonster Cloud).
	"ERROR_IP_BANNED":          {captchaai.ClassTransient, 5 * time.Minute}, // too many requests with a wrong key; "after some time, try again"
	"ERROR_DOMAIN_NOT_ALLOWED": {class: captchaai.ClassConfig},
	"WRONG_CAPTCHA_ID":         {class: captchaai.ClassConfig},
	// https://docs.capsolver.com/guide/api-error (CapSolver; "UNAVALIABLE" is its spelling).
	"ERROR_SERVICE_UNAVALIABLE": {class: captchaai.ClassTransient},
	"ERROR_RATE_LIMIT":          {captchaai.ClassTransient, 10 * time.Second}, // paced like ERROR_TOO_MUCH_REQUESTS
	"ERROR_INVALID_TASK_DATA":   {class: captchaai.ClassConfig},
	"ERROR_BAD_REQUEST":         {class: captchaai.ClassConfig},
	"ERROR_TASKID_INVALID":      {class: captchaai.ClassConfig},
	"ERROR_TASK_TIMEOUT":        {class: captchaai.ClassResubmit}, // not solved within 120 s
	// CapSolver's getTaskResult answer for a task it failed ({"errorCode":"ERROR_CAPTCHA_SOLVE_FAILED",
	// "status":"failed"}): throw the task away and create a new one.
	"ERROR_CAPTCHA_SOLVE_FAILED": {class: captchaai.ClassResubmit},
}

// codeNotReady is the status word a getTaskResult "processing" (or CapSolver's "idle") answer is reported as: the
// in.php family's own spelling of it (CapMonster lists CAPTCHA_NOT_READY among its codes), so activities count and
// treat it as they do res.php's.
const codeNotReady = "CAPTCHA_NOT_READY"

// codeUnsolvable is reported for a "failed" status that came without an error code.
const codeUnsolvable = "ERROR_CAPTCHA_UNSOLVABLE"

func canonical(c string) string { return strings.ToUpper(strings.TrimSpace(c)) }

// ClassifyCode maps a createTask error code to what the caller should do: this package's codes first, then the
// in.php family's (captchaai.ClassifyCode), so a shared code is classified once.
func ClassifyCode(c string) captchaai.Class {
	if e, ok := codes[canonical(c)]; ok {
		return e.class
	}
	return captchaai.ClassifyCode(c)
}

// RetryAfter is the documented wait after code, or 0 (the caller's backoff applies): see ClassifyCode.
func RetryAfter(c string) time.Duration {
	if e, ok := codes[canonical(c)]; ok {
		return e.wait
	}
	return captchaai.RetryAfter(c)
}

// KnownCode returns the canonical spelling of a documented code of either protocol and true; the set is fixed, so
// its values can label a metric.
func KnownCode(c string) (string, bool) {
	if _, ok := codes[canonical(c)]; ok {
		return canonical(c), true
	}
	return captchaai.KnownCode(c)
}

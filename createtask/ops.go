package createtask

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/captchaflow/captchaflow/captchaai"
)

// ErrReportUnsupported marks a verdict the provider has no call for (e.g. a good verdict on 2captcha, any verdict on
// a Turnstile task at Anti-Captcha). Nothing is sent; the error is ClassConfig.
var ErrReportUnsupported = errors.New("the provider has no report call for this verdict")

// Created is what createTask answered: the task ID and, when the provider solved it within the call (CapSolver's
// image recognition), its code.
type Created struct {
	TaskID string
	Code   string
}

// Create maps the in.php method and params to the flavor's task and calls createTask, with callbackURL unless it is
// "". A task the flavor cannot serve is a ClassConfig error wrapping ErrUnsupported, and nothing is sent. A success
// answer without a task ID that IsTaskID accepts is a captchaai.ErrInvalidAnswer (ClassUnknown: not retried, the
// task may exist and be paid for).
func (c *Client) Create(ctx context.Context, method string, params map[string]string, callbackURL string) (Created, error) {
	task, spec, err := buildTask(c.profile.Flavor, method, params)
	if err != nil {
		return Created{}, c.fail(OpCreate, captchaai.ClassConfig, err)
	}
	body := map[string]any{"task": task}
	if callbackURL != "" {
		body["callbackUrl"] = callbackURL
	}
	env, err := c.call(ctx, OpCreate, "createTask", body)
	if err != nil {
		return Created{}, err
	}
	id, err := c.taskID(env.TaskID)
	if err != nil {
		return Created{}, err
	}
	if env.Status != "ready" || len(env.Solution) == 0 {
		return Created{TaskID: id}, nil
	}
	code, err := c.code(OpCreate, spec.Solution, env.Solution)
	return Created{TaskID: id, Code: code}, err
}

// Submit is Create with the in.php client's signature (activities.Provider). A code that came with the answer is
// kept in this client for Get, for at most syncTTL.
func (c *Client) Submit(ctx context.Context, method string, params map[string]string, callbackURL string) (string, error) {
	id, _, err := c.SubmitSolved(ctx, method, params, callbackURL)
	return id, err
}

// SubmitSolved is Submit that also returns a code that came with the answer (CapSolver's image tasks), so the
// caller can take it at once; it is kept for Get all the same (a workflow that does not take it polls for it).
func (c *Client) SubmitSolved(ctx context.Context, method string, params map[string]string, callbackURL string) (id, code string, err error) {
	created, err := c.Create(ctx, method, params, callbackURL)
	if err != nil {
		return "", "", err
	}
	if created.Code != "" {
		c.sync.put(created.TaskID, created.Code)
	}
	return created.TaskID, created.Code, nil
}

// Result calls getTaskResult for a task of kind. A task still being solved ("processing", CapSolver's "idle") is a
// ClassNotReady error with code CAPTCHA_NOT_READY; a "failed" one is ClassResubmit.
func (c *Client) Result(ctx context.Context, kind Kind, taskID string) (string, error) {
	spec, ok := TaskFor(c.profile.Flavor, kind)
	if !ok {
		return "", c.fail(OpResult, captchaai.ClassConfig, &UnsupportedError{Flavor: c.profile.Flavor, Kind: kind})
	}
	return c.result(ctx, taskID, func(raw json.RawMessage) (string, error) { return c.code(OpResult, spec.Solution, raw) })
}

// Get is Result with the in.php client's signature (activities.Provider): the solution's shape is recognised among
// those the flavor's tasks declare (inferCode).
func (c *Client) Get(ctx context.Context, taskID string) (string, error) {
	return c.result(ctx, taskID, func(raw json.RawMessage) (string, error) {
		code, err := inferCode(c.profile.Flavor, raw)
		if err != nil {
			return "", c.fail(OpResult, captchaai.ClassUnknown, fmt.Errorf("%w: %w", captchaai.ErrInvalidAnswer, err))
		}
		return c.code(OpResult, Solution{Shape: ShapeText, Fields: []string{"code"}}, codeObject(code))
	})
}

func (c *Client) result(ctx context.Context, taskID string, decode func(json.RawMessage) (string, error)) (string, error) {
	if code, ok := c.sync.get(taskID); ok {
		return code, nil
	}
	id, err := c.idValue(taskID)
	if err != nil {
		return "", c.fail(OpResult, captchaai.ClassConfig, err)
	}
	env, err := c.call(ctx, OpResult, "getTaskResult", map[string]any{"taskId": id})
	if err != nil {
		return "", err
	}
	switch env.Status {
	case "processing", "idle":
		return "", &captchaai.Error{Op: OpResult, Code: codeNotReady, Class: captchaai.ClassNotReady, Provider: c.name(), Err: errors.New("status " + env.Status)}
	case "ready":
		return decode(env.Solution)
	case "failed":
		return "", &captchaai.Error{Op: OpResult, Code: codeUnsolvable, Class: captchaai.ClassResubmit, Provider: c.name(), Err: errors.New("status failed")}
	}
	return "", c.failWritten(OpResult, fmt.Errorf("%w: status %s", errMalformed, captchaai.Snippet([]byte(env.Status))))
}

// code extracts and bounds a solution's code; a solution that cannot be one is an ErrInvalidAnswer (ClassUnknown:
// the provider keeps answering the same).
func (c *Client) code(op string, s Solution, raw json.RawMessage) (string, error) {
	code, err := s.code(raw)
	switch {
	case err != nil:
		return "", c.fail(op, captchaai.ClassUnknown, fmt.Errorf("%w: %w", captchaai.ErrInvalidAnswer, err))
	case len(code) > c.maxCode:
		return "", c.fail(op, captchaai.ClassUnknown, fmt.Errorf("%w: the code is %d bytes, over the %d-byte bound",
			captchaai.ErrInvalidAnswer, len(code), c.maxCode))
	}
	return code, nil
}

// taskID reads createTask's taskId (a JSON number's exact digits, or a string) and checks its shape.
func (c *Client) taskID(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	var id string
	if len(raw) > 0 && raw[0] != '"' {
		if _, err := strconv.ParseUint(string(raw), 10, 64); err == nil {
			id = string(raw)
		}
	} else {
		_ = json.Unmarshal(raw, &id)
	}
	if !captchaai.IsTaskID(id) {
		return "", c.fail(OpCreate, captchaai.ClassUnknown, fmt.Errorf("%w: taskId %s is not an id",
			captchaai.ErrInvalidAnswer, captchaai.Snippet([]byte(captchaai.RedactText(string(raw), c.apiKey)))))
	}
	return id, nil
}

// idValue is a task ID as the provider wants it back: a JSON number for integer IDs, else a string.
func (c *Client) idValue(taskID string) (any, error) {
	if !captchaai.IsTaskID(taskID) {
		return nil, errors.New("task id is required and must be 1-64 of [0-9A-Za-z_-]")
	}
	if !c.profile.NumericTaskID {
		return taskID, nil
	}
	if _, err := strconv.ParseUint(taskID, 10, 64); err != nil {
		return nil, fmt.Errorf("task id %.20q is not an integer, as %s hands out", taskID, c.profile.Flavor)
	}
	return json.Number(taskID), nil
}

// Balance calls getBalance.
func (c *Client) Balance(ctx context.Context) (float64, error) {
	env, err := c.call(ctx, OpBalance, "getBalance", map[string]any{})
	if err != nil {
		return 0, err
	}
	var n json.Number
	if json.Unmarshal(env.Balance, &n) == nil {
		if b, err := n.Float64(); err == nil && !math.IsInf(b, 0) && !math.IsNaN(b) {
			return b, nil
		}
	}
	return 0, c.failWritten(OpBalance, fmt.Errorf("%w: balance %s is not a number", errMalformed, captchaai.Snippet(env.Balance)))
}

// Report sends a verdict on a task of kind through the flavor's call for it (Profile.Reports). A verdict the
// flavor has no call for is ErrReportUnsupported, and nothing is sent.
func (c *Client) Report(ctx context.Context, kind Kind, taskID string, good bool) error {
	rule, ok := c.profile.reportRule(kind, good)
	if !ok {
		return c.fail(OpReport, captchaai.ClassConfig, fmt.Errorf("%s, %s, good=%t: %w", c.profile.Flavor, kind, good, ErrReportUnsupported))
	}
	id, err := c.idValue(taskID)
	if err != nil {
		return c.fail(OpReport, captchaai.ClassConfig, err)
	}
	body := map[string]any{"taskId": id}
	if rule.Feedback {
		body["result"] = map[string]any{"invalid": !good}
	}
	_, err = c.call(ctx, OpReport, rule.Endpoint, body)
	return err
}

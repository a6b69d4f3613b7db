package createtask

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/url"
	"strings"

	"github.com/captchaflow/captchaflow/captchaai"
)

// inferCode extracts the code from a solution of unknown kind: the first of the flavor's declared solution shapes,
// in Kinds order, that the solution has. The shapes' fields are disjoint enough (a token, a text, GeeTest's
// objects) for the first match to be the right one.
func inferCode(f Flavor, raw json.RawMessage) (string, error) {
	for _, kind := range Kinds {
		if spec, ok := TaskFor(f, kind); ok {
			if code, err := spec.Solution.code(raw); err == nil {
				return code, nil
			}
		}
	}
	return "", fmt.Errorf("%w of any shape %s declares", errNoCode, f)
}

// codeObject wraps a code as a {"code": …} solution, so that one bound check (Client.code) serves every path.
func codeObject(code string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"code": code})
	return b
}

// CallbackResult is what a provider's callback says: the task and either its code or a status word (an error code
// such as ERROR_CAPTCHA_UNSOLVABLE, which captchaai.IsStatusWord recognises).
type CallbackResult struct {
	TaskID string
	Code   string
}

// ErrCallbackBody marks a callback body that is not the flavor's documented shape.
var ErrCallbackBody = errors.New("not a callback body of this provider")

// ParseCallback reads a callback the flavor POSTed (Profile.Callback.Body): 2captcha's form (id, code) or the
// getTaskResult-shaped JSON of the others, whose taskId is optional (CapMonster's getTaskResult has none; the
// tokened callback URL names the workflow). The code is never echoed in an error.
func ParseCallback(f Flavor, contentType string, body []byte) (CallbackResult, error) {
	p, ok := ProfileOf(f)
	if !ok {
		return CallbackResult{}, fmt.Errorf("flavor %.20q: %w", string(f), ErrCallbackBody)
	}
	media, _, _ := mime.ParseMediaType(contentType)
	if p.Callback.Body == CallbackForm {
		if media != "application/x-www-form-urlencoded" {
			return CallbackResult{}, fmt.Errorf("content type %.40q: %w", media, ErrCallbackBody)
		}
		form, err := url.ParseQuery(string(body))
		if err != nil || form.Get("id") == "" || form.Get("code") == "" {
			return CallbackResult{}, fmt.Errorf("want id and code: %w", ErrCallbackBody)
		}
		return CallbackResult{TaskID: form.Get("id"), Code: form.Get("code")}, nil
	}
	return parseResultCallback(f, body)
}

func parseResultCallback(f Flavor, body []byte) (CallbackResult, error) {
	env, err := parseEnvelope(body)
	if err != nil {
		return CallbackResult{}, fmt.Errorf("%w: %w", ErrCallbackBody, err)
	}
	var out CallbackResult
	if len(env.TaskID) > 0 {
		var n json.Number
		if json.Unmarshal(env.TaskID, &n) == nil {
			out.TaskID = n.String()
		} else if json.Unmarshal(env.TaskID, &out.TaskID) != nil {
			return CallbackResult{}, fmt.Errorf("taskId: %w", ErrCallbackBody)
		}
	}
	switch {
	case env.failed():
		out.Code = canonical(env.ErrorCode)
	case env.Status == "failed":
		out.Code = codeUnsolvable
	case env.Status == "ready":
		out.Code, err = inferCode(f, env.Solution)
	default:
		err = fmt.Errorf("status %s", captchaai.Snippet([]byte(strings.TrimSpace(env.Status))))
	}
	if err != nil || out.Code == "" {
		return CallbackResult{}, fmt.Errorf("%w: no code (%v)", ErrCallbackBody, err)
	}
	return out, nil
}

package server

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/callbackauth"
	"github.com/captchaflow/captchaflow/providers/callback"
)

// createTaskAckWithin bounds the signal of a createTask provider's callback: CapMonster drops the connection after
// 2 s, and a callback lost that way is recovered by the task's poll.
const createTaskAckWithin = 1500 * time.Millisecond

// tokenedFields reads a tokened callback: a createTask provider's POST body when its pingback URL names the flavor
// (callbackauth.FlavorParam), else the in.php pingback's id and code.
func tokenedFields(c echo.Context) (id, code string, err error) {
	flavor := c.QueryParam(callbackauth.FlavorParam)
	if flavor == "" {
		return callbackFields(c)
	}
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		if tooLarge := asBodyTooLarge(err); tooLarge != nil {
			return "", "", tooLarge
		}
		return "", "", badRequest("body", "cannot be read")
	}
	res, err := callback.Parse(callback.Flavor(flavor), c.Request().Header.Get(echo.HeaderContentType), body)
	switch {
	case err != nil:
		return "", "", badRequest("body", fmt.Sprintf("not a %.20s callback body", flavor))
	case res.TaskID != "" && !providerTaskIDPattern.MatchString(res.TaskID):
		return "", "", badRequest("taskId", "must be 1-64 characters of A-Z a-z 0-9 _ -")
	case len(res.Code) > captchaflow.MaxCodeBytes:
		return res.TaskID, "", badRequest("solution", codeTooLong)
	}
	return res.TaskID, res.Code, nil
}

// signalContext bounds a createTask provider's callback signal to createTaskAckWithin (and INGRESS_SIGNAL_TIMEOUT).
func signalContext(c echo.Context) (context.Context, context.CancelFunc) {
	if c.QueryParam(callbackauth.FlavorParam) == "" {
		return context.WithCancel(c.Request().Context())
	}
	return context.WithTimeout(c.Request().Context(), createTaskAckWithin)
}

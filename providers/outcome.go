package providers

import (
	"errors"
	"net/http"
)

// keyCodes are the answers that mean the key (or the worker's address) is refused: nothing sent with it can work.
var keyCodes = map[string]bool{
	"ERROR_WRONG_USER_KEY": true, "ERROR_KEY_DOES_NOT_EXIST": true, "ERROR_IP_NOT_ALLOWED": true,
	"ERROR_IP_BLOCKED": true, "ERROR_ACCOUNT_SUSPENDED": true, "ERROR_KEY_DENIED_ACCESS": true,
}

// OutcomeOf is what a provider request that ended with err says about the provider.
func OutcomeOf(err error) Outcome {
	if err == nil {
		return OutcomeOK
	}
	if IsTransportError(err) {
		return OutcomeUnreachable
	}
	var pe *Error
	if !errors.As(err, &pe) {
		return OutcomeOther
	}
	switch {
	case pe.Code == "ERROR_ZERO_BALANCE":
		return OutcomeZeroBalance
	case pe.Code == "ERROR_NO_SLOT_AVAILABLE":
		return OutcomeNoSlot
	case keyCodes[pe.Code], pe.HTTPStatus == http.StatusUnauthorized, pe.HTTPStatus == http.StatusForbidden:
		return OutcomeKeyRefused
	case pe.Code == "" && pe.HTTPStatus >= 500:
		return OutcomeUnreachable
	}
	return OutcomeOther
}

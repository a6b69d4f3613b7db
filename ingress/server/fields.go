package server

import (
	"fmt"
	"mime"
	"net/http"
	"regexp"

	"github.com/labstack/echo/v4"

	"github.com/captchaflow/captchaflow"
)

// providerTaskIDPattern bounds the provider's task ID. Providers use numeric IDs; the pattern also keeps anything
// from being injected into the visibility query of the untokened route.
var providerTaskIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// codeTooLong is the 400's message for a code over captchaflow.MaxCodeBytes, the bound on every route.
var codeTooLong = fmt.Sprintf("longer than %d bytes", captchaflow.MaxCodeBytes)

// multipartMemory is how much of a multipart body is kept in memory; the body limit is far below it, so nothing
// spills to disk.
const multipartMemory = 1 << 20

// callbackFields reads the provider's `id` and `code` from the form body (POST, urlencoded or multipart) or the
// query string (GET, or a POST that carries them there). Body values win over query values.
func callbackFields(c echo.Context) (id, code string, err error) {
	r := c.Request()
	if err := parseForm(r); err != nil {
		return "", "", err
	}
	id, code = r.Form.Get("id"), r.Form.Get("code")
	switch {
	case id == "":
		return "", "", badRequest("id", "required (the provider's task ID)")
	case !providerTaskIDPattern.MatchString(id):
		return "", "", badRequest("id", "must be 1-64 characters of A-Z a-z 0-9 _ -")
	case code == "":
		return id, "", badRequest("code", "required (the solved CAPTCHA)")
	case len(code) > captchaflow.MaxCodeBytes:
		return id, "", badRequest("code", codeTooLong)
	}
	return id, code, nil
}

// parseForm reads the query and form (multipart or urlencoded) so an oversized body stays a 413, not a 400.
func parseForm(r *http.Request) error {
	var err error
	if mediaType, _, _ := mime.ParseMediaType(r.Header.Get(echo.HeaderContentType)); mediaType == echo.MIMEMultipartForm {
		err = r.ParseMultipartForm(multipartMemory)
	} else {
		err = r.ParseForm()
	}
	if err == nil {
		return nil
	}
	// The body limit surfaces as a read error while parsing; keep it a 413.
	if tooLarge := asBodyTooLarge(err); tooLarge != nil {
		return tooLarge
	}
	return badRequest("form", "the query string or form body cannot be parsed")
}

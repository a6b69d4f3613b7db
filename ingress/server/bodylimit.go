package server

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"
)

// bodyLimit caps the request body at limit bytes, answering 413 beyond it.
//
// It is used instead of Echo's BodyLimit middleware: Echo's reader hands the bytes past the limit to the caller
// together with the error, and mime/multipart reads through a bufio.Reader that can finish parsing a small
// oversized body before it looks at that error, so a chunked multipart body slightly over the limit was accepted.
// http.MaxBytesReader never returns a byte past the limit.
func bodyLimit(limit int64) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			if r.ContentLength > limit {
				return echo.ErrStatusRequestEntityTooLarge
			}
			r.Body = http.MaxBytesReader(c.Response(), r.Body, limit)
			return next(c)
		}
	}
}

// asBodyTooLarge turns the reader's over-limit error, however the parser wrapped it, into the 413 it stands for.
func asBodyTooLarge(err error) error {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return echo.ErrStatusRequestEntityTooLarge
	}
	return nil
}
